"""`fleetdeck patch ...` run as a subprocess: JSON in, JSON out, exit codes, and the patch applies."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.fleets.cli import run_cli
from tests.fleets.gitbuild import commit_file, git, init_repo


def fleetdeck(*args: str, stdin: bytes | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return run_cli(*args, stdin=stdin, text=False, cwd=cwd, timeout=60)  # patches are bytes


def test_generate_from_stdin_then_inspect_remove_validate(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    commit_file(repo, "app.py", "x = 1\ny = 2\n")
    changes = [{"mode": "search_replace", "path": "app.py", "replacements": [{"search": "y = 2", "replace": "y = 3"}]},
               {"mode": "create_file", "path": "new.txt", "new_content": "hello\n"}]
    pf = tmp_path / "out.patch"
    proc = fleetdeck("patch", "generate", "--repo", str(repo), "--patch-file", str(pf), "--write-mode", "upsert",
                     stdin=json.dumps(changes).encode())
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["git_check"]["ok"] and result["files_changed"] == 2
    assert result["patch_file"]["added"] == ["app.py", "new.txt"]
    assert pf.read_text() == result["patch"]

    listing = json.loads(fleetdeck("patch", "inspect", str(pf)).stdout)
    assert [e["path"] for e in listing["entries"]] == ["app.py", "new.txt"]

    valid = fleetdeck("patch", "validate", str(pf), "--repo", str(repo))
    assert valid.returncode == 0 and json.loads(valid.stdout)["valid"] is True

    removed = json.loads(fleetdeck("patch", "remove", str(pf), "--index", "1").stdout)
    assert removed["removed"][0]["path"] == "new.txt" and removed["entries_after"] == 1
    git(repo, "apply", str(pf))
    assert (repo / "app.py").read_text() == "x = 1\ny = 3\n" and not (repo / "new.txt").exists()


def test_generate_raw_from_file_with_relative_paths(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    spec = tmp_path / "changes.json"
    spec.write_text(json.dumps({"changes": [{"mode": "delete_file", "path": "README.md"}]}))
    proc = fleetdeck("patch", "generate", "--changes", str(spec), "--raw", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(b"diff --git a/README.md b/README.md\ndeleted file mode 100644\n")
    git(repo, "apply", "-", input=proc.stdout)
    assert not (repo / "README.md").exists()


def test_errors_exit_1_with_code_and_invalid_patch_exits_1(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    bad = fleetdeck("patch", "generate", "--repo", str(repo),
                    stdin=json.dumps([{"mode": "delete_file", "path": "../etc/passwd"}]).encode())
    assert bad.returncode == 1 and bad.stdout == b"" and b"[BAD_PATH]" in bad.stderr
    junk = fleetdeck("patch", "generate", "--repo", str(repo), stdin=b"{not json")
    assert junk.returncode == 1 and b"[BAD_ARGUMENT]" in junk.stderr
    invalid = fleetdeck("patch", "validate", "-", stdin=b"hello\n")
    assert invalid.returncode == 1 and json.loads(invalid.stdout)["error"]["code"] == "BAD_ARGUMENT"
    usage = fleetdeck("patch", "generate", "--write-mode", "sideways")
    assert usage.returncode == 2
