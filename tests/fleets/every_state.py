"""A fleet with one repository in each state fleetdeck must read, built with the real git CLI.

`build_fleet(root)` returns {state name: repo path}. Remotes and helper repos live outside `root` so the
fleet holds exactly the repos named here (plus the skipped `node_modules` one).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.fleets.gitbuild import bare_remote, clone, commit_file, git, init_repo, with_upstream, write
from tests.fleets.repo_states import forked_edits
from tests.fleets.template import shared

# How the in-process status (fleet/repo/libstatus.py) reads each state: these through libgit2, the others
# through git for the reason given.
IN_PROCESS = ["clean", "ahead", "behind", "diverged", "predict", "branches", "detached", "empty", "stashes",
              "worktrees", "merging", "rebasing", "picking", "bisecting", "history", "outer", "nested", "locked"]
TO_GIT = {"dirty": "renames", "super": "submodules", "broken": "libgit2_error"}


def _conflicting_branches(repo: Path) -> None:
    """main and `topic` both change `shared.txt` line 1, differently."""
    forked_edits(repo, "shared.txt", "topic", "topic side\n", "main side\n", ("topic change", "main change"))


def build_fleet(root: Path, side: Path) -> dict[str, Path]:
    """Make every state under `root`; bare remotes and scratch clones go under `side`, a sibling folder.
    Built once per session (per pair of folder names); each caller gets a copy."""
    base = root.parent
    if side.parent != base:
        raise ValueError("root and side must be sibling folders")
    return shared().copy(f"every-state:{root.name}:{side.name}", lambda b: _build(b / root.name, b / side.name),
                         base)


def _build(root: Path, side: Path) -> dict[str, Path]:
    root.mkdir(parents=True, exist_ok=True)
    side.mkdir(parents=True, exist_ok=True)
    repos: dict[str, Path] = {}

    repos["clean"] = init_repo(root / "clean", commits=2)

    dirty = init_repo(root / "dirty", commits=1)
    commit_file(dirty, "old name.txt", "rename me\n" * 5, "add file to rename")
    commit_file(dirty, "tracked.txt", "one\n", "add tracked")
    git(dirty, "mv", "old name.txt", "new näme.txt")
    write(dirty / "staged.txt", "staged\n")
    git(dirty, "add", "staged.txt")
    write(dirty / "tracked.txt", "one\ntwo\n")
    write(dirty / "untracked file.txt", "u\n")
    write(dirty / "ünïcode dir" / "fïle.txt", "x\n")
    write(dirty / "image.bin", bytes(range(256)) * 4)
    repos["dirty"] = dirty

    repos["ahead"] = with_upstream(side, "ahead", ahead=2)
    repos["behind"] = with_upstream(side, "behind", behind=3)
    repos["diverged"] = with_upstream(side, "diverged", ahead=1, behind=2)
    for name in ("ahead", "behind", "diverged"):
        target = root / name
        shutil.move(str(repos[name]), target)
        repos[name] = target

    # Diverged with a predicted conflict: both sides edit the same line.
    remote = bare_remote(side / "predict-remote.git")
    seed = init_repo(side / "predict-seed", commits=1)
    commit_file(seed, "shared.txt", "base\n", "base")
    git(seed, "remote", "add", "origin", str(remote))
    git(seed, "push", "-q", "-u", "origin", "main")
    predict = clone(remote, root / "predict")
    commit_file(seed, "shared.txt", "theirs\n", "remote edit")
    git(seed, "push", "-q", "origin", "main")
    git(predict, "fetch", "-q")
    commit_file(predict, "shared.txt", "ours\n", "local edit")
    repos["predict"] = predict

    # Several branches, each with a different upstream state.
    branches = with_upstream(side, "branches", ahead=0)
    git(branches, "branch", "feature-ahead", "origin/main")
    git(branches, "branch", "--set-upstream-to=origin/main", "feature-ahead")
    git(branches, "checkout", "-q", "feature-ahead")
    commit_file(branches, "feat.txt", "f\n", "feature work")
    git(branches, "checkout", "-q", "-b", "gone-upstream")
    git(branches, "push", "-q", "-u", "origin", "gone-upstream")
    git(branches, "push", "-q", "origin", "--delete", "gone-upstream")
    git(branches, "checkout", "-q", "-b", "no-upstream")
    git(branches, "checkout", "-q", "main")
    target = root / "branches"
    shutil.move(str(branches), target)
    repos["branches"] = target

    detached = init_repo(root / "detached", commits=3)
    git(detached, "checkout", "-q", "HEAD~1")
    repos["detached"] = detached

    empty = root / "empty"
    empty.mkdir()
    git(empty, "init", "-q", "-b", "main")
    repos["empty"] = empty

    stashes = init_repo(root / "stashes", commits=1)
    for i in range(2):
        write(stashes / "README.md", f"stash {i}\n")
        git(stashes, "stash", "push", "-q", "-m", f"wip {i}")
    repos["stashes"] = stashes

    wt = init_repo(root / "worktrees", commits=2)
    git(wt, "worktree", "add", "-q", "-b", "wt-locked", str(side / "wt-locked"))
    git(wt, "worktree", "lock", "--reason", "on a usb disk", str(side / "wt-locked"))
    git(wt, "worktree", "add", "-q", "-b", "wt-gone", str(side / "wt-gone"))
    shutil.rmtree(side / "wt-gone")
    git(wt, "worktree", "add", "-q", "--detach", str(root / "worktrees-linked"))
    write(root / "worktrees-linked" / "dirty.txt", "x\n")
    repos["worktrees"] = wt

    lib = init_repo(side / "lib", commits=2)
    sup = init_repo(root / "super", commits=1)
    git(sup, "submodule", "add", "-q", str(lib), "libs/drifted")
    git(sup, "submodule", "add", "-q", str(lib), "libs/uninit")
    git(sup, "commit", "-q", "-m", "add submodules")
    git(sup / "libs" / "drifted", "checkout", "-q", "HEAD~1")
    git(sup, "submodule", "deinit", "-q", "-f", "libs/uninit")
    repos["super"] = sup

    merge = init_repo(root / "merging", commits=1)
    _conflicting_branches(merge)
    git(merge, "merge", "topic", check=False)
    repos["merging"] = merge

    rebase = init_repo(root / "rebasing", commits=1)
    _conflicting_branches(rebase)
    git(rebase, "checkout", "-q", "topic")
    git(rebase, "rebase", "main", check=False)
    repos["rebasing"] = rebase

    pick = init_repo(root / "picking", commits=1)
    _conflicting_branches(pick)
    git(pick, "cherry-pick", "topic", check=False)
    repos["picking"] = pick

    bisect = init_repo(root / "bisecting", commits=4)
    git(bisect, "bisect", "start", "HEAD", "HEAD~3")
    repos["bisecting"] = bisect

    history = init_repo(root / "history", commits=3)
    commit_file(history, "a.txt", "a\n", "to be amended")
    write(history / "a.txt", "a2\n")
    git(history, "commit", "-q", "-a", "--amend", "-m", "amended")
    git(history, "reset", "-q", "--hard", "HEAD~2")
    git(history, "update-ref", "refs/heads/no-message", "HEAD")  # a message-less reflog line
    repos["history"] = history

    outer = init_repo(root / "outer", commits=1)
    repos["nested"] = init_repo(outer / "sub" / "inner", commits=1)
    repos["outer"] = outer
    write(outer / ".gitignore", "sub/\n")

    init_repo(root / "node_modules" / "dep", commits=1)

    bare = side / "bare-src"
    init_repo(bare, commits=2)
    git(root, "clone", "-q", "--bare", str(bare), str(root / "mirror.git"))
    repos["bare"] = root / "mirror.git"

    broken = init_repo(root / "broken", commits=1)
    (broken / ".git" / "HEAD").write_text("garbage that is not a ref\n")
    repos["broken"] = broken

    locked = init_repo(root / "locked", commits=1)
    (locked / ".git" / "index.lock").write_text("")
    repos["locked"] = locked
    return repos
