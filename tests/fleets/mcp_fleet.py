"""A small fleet in every state the MCP tools must describe, built with the real git CLI and indexed."""

from __future__ import annotations

from pathlib import Path

from fleet.index.store import open_index
from fleet.index.scan import scan
from tests.fleets.gitbuild import commit_file, git, init_repo, with_upstream, write
from tests.fleets.repo_states import forked_edits
from tests.fleets.template import shared


def build_fleet(base: Path) -> dict[str, Path]:
    """Repos under `base/fleet` (the root), indexed into `base/fleet.db`. Returns name -> path (+ root, db).
    Built once per session; each caller gets a copy."""
    return shared().copy("mcp", _build, base)


def _build(base: Path) -> dict[str, Path]:
    root = base / "fleet"
    root.mkdir()
    repos: dict[str, Path] = {}
    repos["alpha"] = alpha = init_repo(root / "alpha", commits=3)
    commit_file(alpha, "src/app.py", "print('hi')\n", "feat: add app")
    git(alpha, "branch", "feature/login")
    git(alpha, "worktree", "add", "-q", str(root / "alpha-wt"), "feature/login")
    git(alpha, "tag", "-a", "v1", "-m", "release one")

    repos["beta"] = with_upstream(root, "beta", ahead=1, behind=2)

    dirty = repos["dirty"] = init_repo(root / "dirty", commits=2)
    commit_file(dirty, "old name.txt", "stays the same\n" * 5, "add file to rename")
    write(dirty / "logo.bin", bytes(range(256)) * 4)
    git(dirty, "add", "logo.bin")
    git(dirty, "commit", "-q", "-m", "binary logo")
    write(dirty / "README.md", "stashed edit\n")
    git(dirty, "stash", "push", "-q", "-m", "wip: first idea")
    git(dirty, "mv", "old name.txt", "new name.txt")
    write(dirty / "café.txt", "non-ascii name\n")
    git(dirty, "add", "café.txt")
    write(dirty / "README.md", "line 0\nchanged\n")
    write(dirty / "logo.bin", bytes(range(255, -1, -1)) * 4)
    write(dirty / "notes.txt", "untracked\n")

    repos["conflicted"] = conflicted = init_repo(root / "conflicted", commits=1)
    forked_edits(conflicted, "shared.txt", "topic", "topic side\n", "main side\n")
    git(conflicted, "merge", "-q", "topic", check=False)

    rebasing = repos["rebasing"] = init_repo(root / "rebasing", commits=1)
    forked_edits(rebasing, "shared.txt", "topic", "topic\n", "main\n", ("topic change", "main change"))
    git(rebasing, "checkout", "-q", "topic")
    git(rebasing, "rebase", "-q", "main", check=False)

    detached = repos["detached"] = init_repo(root / "detached", commits=3)
    git(detached, "checkout", "-q", "HEAD~1")

    repos["empty"] = empty = root / "empty"
    empty.mkdir()
    git(empty, "init", "-q", "-b", "main")

    sup = repos["super"] = init_repo(root / "super", commits=1)
    git(sup, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(alpha), "libs/alpha")
    git(sup, "commit", "-q", "-m", "add submodule")
    git(sup / "libs" / "alpha", "checkout", "-q", "HEAD~1")

    evil = repos["evil"] = init_repo(root / "evil", commits=2)
    sha = git(evil, "rev-parse", "HEAD").strip()
    for name in ("--output=evil.txt", "--orphan=evil", "-p"):
        write(evil / ".git" / "refs" / "heads" / name, sha + "\n")

    latin = repos["latin"] = init_repo(root / "latin", commits=1)
    write(latin / "menu.txt", b"caf\xe9 cr\xe8me\n")
    git(latin, "add", "menu.txt")
    tree = git(latin, "write-tree").strip()
    parent = git(latin, "rev-parse", "HEAD").strip()
    raw = (f"tree {tree}\nparent {parent}\nauthor T <t@example.com> 1760000000 +0000\n"
           f"committer T <t@example.com> 1760000000 +0000\n\n").encode() + b"caf\xe9: latin-1 subject\n"
    sha = git(latin, "hash-object", "-t", "commit", "-w", "--stdin", input=raw).strip()  # git commit would re-encode
    git(latin, "update-ref", "-m", "commit: raw latin-1 message", "refs/heads/main", sha)
    write(latin / "menu.txt", b"caf\xe9 cr\xe8me br\xfbl\xe9e\n")

    db = base / "fleet.db"
    with open_index(db) as index:
        scan(index, [str(root)])
    repos["_root"] = root
    repos["_db"] = db
    return repos


async def call(server, name: str, args: dict | None = None, mode: str = "auto"):
    """One tool call through the official client, in-process (auto = modern direct, legacy = JSON-RPC)."""
    from mcp import Client

    async with Client(server, mode=mode) as client:
        return await client.call_tool(name, args or {})


def error_of(result) -> tuple[str, str]:
    """(code, message) of an isError result, checking its text mirrors its structured content."""
    import json

    assert result.is_error is True
    assert json.loads(result.content[0].text) == result.structured_content
    err = result.structured_content["error"]
    return err["code"], err["message"]


def ok(result) -> dict:
    """The structured content of a successful result, checking the compact JSON text mirror."""
    import json

    assert result.is_error is False, result.content[0].text
    text = result.content[0].text
    assert json.loads(text) == result.structured_content
    assert "\n" not in text and ": " not in text.split('"')[0]
    return result.structured_content
