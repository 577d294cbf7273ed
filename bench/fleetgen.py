"""Generate a fleet of N real git repositories quickly: build a few templates with git, then copy them.

Templates: a clean repo with history, one with local changes, one with an extra branch, one tracking an
upstream it is ahead of. Copies are real repos (git works in them as usual); only `cp -a` makes it fast.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ENV = {**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
       "GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
       "GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "bench@example.com"}


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(cwd), *args], check=True, env=ENV, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def _template(base: Path, kind: str) -> Path:
    repo = base / f"template-{kind}"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    for i in range(20):
        (repo / "src").mkdir(exist_ok=True)
        (repo / "src" / f"module{i}.py").write_text(f"VALUE = {i}\n" * 20)
    (repo / "README.md").write_text("# bench\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "initial")
    for i in range(5):
        (repo / "src" / "module0.py").write_text(f"VALUE = {i}\n" * 30)
        git(repo, "commit", "-q", "-am", f"change {i}")
    if kind == "dirty":
        (repo / "src" / "module1.py").write_text("changed\n")
        (repo / "notes.txt").write_text("untracked\n")
    elif kind == "branch":
        git(repo, "branch", "feature")
    elif kind == "upstream":
        remote = base / "template-remote.git"
        git(base, "init", "-q", "--bare", "-b", "main", str(remote))
        git(repo, "remote", "add", "origin", str(remote))
        git(repo, "push", "-q", "-u", "origin", "main")
        (repo / "src" / "module2.py").write_text("ahead\n")
        git(repo, "commit", "-q", "-am", "unpushed")
    return repo


def generate(root: Path, count: int) -> list[Path]:
    """`count` repos under root/r0000..; returns their paths. Reuses an existing fleet of the same size."""
    marker = root / f".fleet-{count}"
    repos = [root / f"r{i:05d}" for i in range(count)]
    if marker.exists():
        return repos
    templates_dir = root.parent / f"{root.name}-templates"
    if not templates_dir.exists():
        templates_dir.mkdir(parents=True)
        for kind in ("clean", "dirty", "branch", "upstream"):
            _template(templates_dir, kind)
    kinds = ["clean", "clean", "dirty", "branch", "upstream"]
    root.mkdir(parents=True, exist_ok=True)
    for i, repo in enumerate(repos):
        if not repo.exists():
            subprocess.run(["cp", "-a", str(templates_dir / f"template-{kinds[i % len(kinds)]}"), str(repo)],
                           check=True)
    marker.write_text("ok\n")
    return repos


if __name__ == "__main__":
    out = generate(Path(sys.argv[1]), int(sys.argv[2]))
    print(f"{len(out)} repos under {sys.argv[1]}")
