"""A sample fleet in every interesting state, built with the real git CLI (for `fleetdeck demo` and benchmarks).

Layout under the target folder: `fleet/work` and `fleet/oss` are the two roots; bare remotes, seed clones and
linked worktrees live beside them (outside the roots) so discovery finds only the repos a person would own.
Commits use a fixed identity and a clock that walks through the past week, so the digest has days to chart.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from fleet.errors import FleetError
from fleet.git.run import run_git
from fleet.index.scan import scan
from fleet.index.store import open_index
from fleet.ops import service
from fleet.ops.policy import POLICY_META
from fleet.snapshot.shadow import WorkTree
from fleet.snapshot.take import take

IDENTITY = ("Demo Developer", "demo@fleetdeck.invalid")
DAY = 86_400


class DemoBuilder:
    """Runs git with a fixed identity and a monotonic fake clock (`GIT_*_DATE`)."""

    def __init__(self, base: Path, start: float, end: float) -> None:
        self.base = base
        self.clock = int(start)
        self.end = int(end)

    def git(self, cwd: Path, *args: str, ok_codes: tuple[int, ...] = (0,), step: int = 300) -> str:
        self.clock = min(self.clock + step, self.end)
        stamp = f"@{self.clock} +0000"
        env = {"GIT_AUTHOR_NAME": IDENTITY[0], "GIT_AUTHOR_EMAIL": IDENTITY[1],
               "GIT_COMMITTER_NAME": IDENTITY[0], "GIT_COMMITTER_EMAIL": IDENTITY[1],
               "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp, "GIT_EDITOR": "true"}
        config = ["-c", "init.defaultBranch=main", "-c", "protocol.file.allow=always",
                  "-c", "advice.detachedHead=false", "-c", "commit.gpgsign=false",
                  "-c", f"user.name={IDENTITY[0]}", "-c", f"user.email={IDENTITY[1]}"]
        return run_git(cwd, config + list(args), ok_codes=ok_codes, extra_env=env).stdout.decode()

    def write(self, path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    def commit(self, repo: Path, name: str, text: str, message: str, step: int = 300) -> None:
        self.write(repo / name, text)
        self.git(repo, "add", "--", name)
        self.git(repo, "commit", "-q", "-m", message, step=step)

    def repo(self, path: Path, files: dict[str, str] | None = None) -> Path:
        path.mkdir(parents=True, exist_ok=True)
        self.git(path, "init", "-q", "-b", "main")
        for name, text in (files or {"README.md": f"# {path.name}\n"}).items():
            self.commit(path, name, text, f"add {name}")
        return path

    def tracked(self, name: str, root: Path, files: dict[str, str] | None = None) -> tuple[Path, Path]:
        """A repo under `root` cloned from a bare remote, plus a seed clone that plays 'the teammates'."""
        remote = self.base / "remotes" / f"{name}.git"
        remote.mkdir(parents=True)
        self.git(remote, "init", "-q", "--bare", "-b", "main")
        seed = self.repo(self.base / "seeds" / name, files)
        self.git(seed, "remote", "add", "origin", str(remote))
        self.git(seed, "push", "-q", "-u", "origin", "main")
        clone = root / name
        self.git(root, "clone", "-q", str(remote), str(clone))
        return clone, seed

    def push_from(self, seed: Path, commits: list[tuple[str, str, str]]) -> None:
        for name, text, message in commits:
            self.commit(seed, name, text, message)
        self.git(seed, "push", "-q", "origin", "main")


def build_demo_fleet(target: str | os.PathLike[str], now: float | None = None) -> list[str]:
    """Build the sample fleet under `target` (which must be empty or absent); return the two root paths."""
    base = Path(target)
    if base.exists() and any(base.iterdir()):
        raise FileExistsError(f"{base} is not empty")
    work, oss = base / "fleet" / "work", base / "fleet" / "oss"
    work.mkdir(parents=True)
    oss.mkdir(parents=True)
    end = int(now or time.time()) - 60
    b = DemoBuilder(base, end - 8 * DAY, end)
    builders = [
        lambda: _stale_stashes(b, oss), lambda: _clean(b, oss, "dotfiles"), lambda: _no_upstream(b, oss),
        lambda: _clean(b, work, "design-system"), lambda: _submodule_drift(b, oss), lambda: _behind(b, oss),
        lambda: _worktrees(b, work), lambda: _ahead_with_rewrites(b, work), lambda: _diverged(b, work),
        lambda: _mid_rebase(b, work), lambda: _dirty(b, oss), lambda: _conflicted_merge(b, work),
        lambda: _about_to_lose_work(b, work),
    ]
    for build in builders:  # spread the fleet's history over the week, newest states last
        build()
        b.clock += 14 * 3600
    _last_hours(b, base, work, oss, end)
    return [str(work), str(oss)]


def _last_hours(b: DemoBuilder, base: Path, work: Path, oss: Path, end: int) -> None:
    """What happened in the last few hours (so a digest of the last 24 h has something to say): the
    teammates pushed and infra fetched it, a commit in cli-tools, dotfiles rebased onto a teammate's change."""
    b.clock = max(b.clock, end - 5 * 3600)
    b.push_from(base / "seeds" / "infra", [("iam.tf", "resource \"iam\" {}\n", "add IAM roles")])
    b.git(oss / "infra", "fetch", "-q")
    b.clock = max(b.clock, end - 3 * 3600)
    b.commit(work / "cli-tools", "table.go", "package main // tables\n", "cli: table output")
    b.clock = max(b.clock, end - 2 * 3600)
    b.push_from(base / "seeds" / "dotfiles", [(".gitconfig", "[pull]\n\trebase = true\n", "git: pull --rebase")])
    b.commit(oss / "dotfiles", ".bashrc", "alias g=git\n", "bash: g for git")
    b.git(oss / "dotfiles", "fetch", "-q")
    b.git(oss / "dotfiles", "rebase", "-q", "origin/main")


def _conflicted_merge(b: DemoBuilder, root: Path) -> None:
    repo, seed = b.tracked("api-server", root, {"app.py": "def handler():\n    return 200\n", "README.md": "# api\n"})
    b.git(repo, "checkout", "-q", "-b", "feature/rate-limits")
    b.commit(repo, "app.py", "def handler():\n    return 429  # rate limited\n", "rate-limit every handler")
    b.git(repo, "checkout", "-q", "main")
    b.commit(repo, "app.py", "def handler():\n    return 204\n", "handlers return no content")
    b.git(repo, "merge", "-q", "feature/rate-limits", ok_codes=(0, 1))


def _mid_rebase(b: DemoBuilder, root: Path) -> None:
    repo, seed = b.tracked("web-frontend", root, {"index.html": "<h1>hi</h1>\n"})
    b.git(repo, "checkout", "-q", "-b", "redesign")
    for i in range(3):
        b.commit(repo, f"styles/part{i}.css", f"body {{ margin: {i}px }}\n", f"redesign step {i + 1}")
    b.git(repo, "-c", "sequence.editor=sed -i 2s/^pick/edit/", "rebase", "-q", "-i", "HEAD~3")


def _diverged(b: DemoBuilder, root: Path) -> None:
    repo, seed = b.tracked("billing", root, {"invoice.py": "TAX = 0.20\n", "README.md": "# billing\n"})
    b.push_from(seed, [("invoice.py", "TAX = 0.21\n", "new tax rate"),
                       ("docs.md", "how invoices work\n", "document invoices"),
                       ("ci.yml", "steps: [test]\n", "add CI")])
    b.commit(repo, "invoice.py", "TAX = 0.19\n", "discount tax for partners")
    b.commit(repo, "export.py", "def export(): ...\n", "csv export")
    b.git(repo, "fetch", "-q")


def _dirty(b: DemoBuilder, root: Path) -> None:
    repo, _ = b.tracked("mobile-app", root, {"App.tsx": "export default 1\n", "package.json": "{}\n"})
    b.write(repo / "App.tsx", "export default 2\n")
    b.write(repo / "package.json", '{"name": "mobile"}\n')
    b.git(repo, "add", "--", "package.json")
    b.write(repo / "screens/Login.tsx", "export const Login = 1\n")
    b.write(repo / "notes.txt", "todo\n")


def _ahead_with_rewrites(b: DemoBuilder, root: Path) -> None:
    repo, _ = b.tracked("cli-tools", root, {"main.go": "package main\n"})
    b.commit(repo, "flags.go", "package main // flags\n", "parse flags")
    b.commit(repo, "flags.go", "package main // flags v2\n", "wip")
    b.write(repo / "flags.go", "package main // flags v3\n")
    b.git(repo, "commit", "-q", "-a", "--amend", "-m", "flags: support --json")
    b.commit(repo, "experiment.go", "package main // risky\n", "experiment: rewrite parser")
    b.git(repo, "reset", "-q", "--hard", "HEAD~1")
    b.commit(repo, "help.go", "package main // help\n", "better --help text")


def _behind(b: DemoBuilder, root: Path) -> None:
    repo, seed = b.tracked("infra", root, {"main.tf": "provider \"aws\" {}\n"})
    b.push_from(seed, [("vpc.tf", "resource \"vpc\" {}\n", "add VPC"), ("dns.tf", "resource \"dns\" {}\n", "add DNS")])
    b.git(repo, "fetch", "-q")


def _stale_stashes(b: DemoBuilder, root: Path) -> None:
    repo, _ = b.tracked("ml-notebooks", root, {"train.py": "epochs = 10\n"})
    b.write(repo / "train.py", "epochs = 50\n")
    b.git(repo, "stash", "push", "-q", "-m", "try more epochs")
    b.write(repo / "train.py", "epochs = 10\nlr = 0.01\n")
    b.git(repo, "stash", "push", "-q", "-m", "learning-rate sweep")


def _worktrees(b: DemoBuilder, root: Path) -> None:
    repo, _ = b.tracked("platform", root, {"service.py": "VERSION = 1\n"})
    outside = b.base / "worktrees"
    b.git(repo, "worktree", "add", "-q", "-b", "hotfix/login", str(outside / "platform-hotfix"))
    b.commit(outside / "platform-hotfix", "service.py", "VERSION = 2\n", "hotfix: login loop")
    b.git(repo, "worktree", "add", "-q", "-b", "spike/grpc", str(outside / "platform-spike"))
    b.git(repo, "worktree", "lock", "--reason", "agent experiment in progress", str(outside / "platform-spike"))
    b.git(repo, "worktree", "add", "-q", "-b", "old/cleanup", str(outside / "platform-old"))
    shutil.rmtree(outside / "platform-old")


def _submodule_drift(b: DemoBuilder, root: Path) -> None:
    lib = b.repo(b.base / "seeds" / "shared-lib", {"lib.py": "VERSION = 1\n"})
    repo, _ = b.tracked("monorepo", root, {"README.md": "# monorepo\n"})
    b.git(repo, "submodule", "add", "-q", str(lib), "vendor/shared-lib")
    b.git(repo, "commit", "-q", "-m", "vendor shared-lib")
    b.git(repo, "push", "-q", "origin", "main")
    b.commit(lib, "lib.py", "VERSION = 2\n", "shared-lib v2")
    b.git(repo / "vendor" / "shared-lib", "pull", "-q", "origin", "main")


def _about_to_lose_work(b: DemoBuilder, root: Path) -> None:
    """An afternoon of uncommitted work that `seed_proposals` lets an agent throw away (the safety net's case)."""
    repo, _ = b.tracked("landing-page", root, {"index.html": "<h1>Welcome</h1>\n", "style.css": "h1 {}\n"})
    b.write(repo / "index.html", "<h1>Welcome</h1>\n<section class=pricing>\n  <p>Three plans</p>\n</section>\n")
    b.write(repo / "style.css", "h1 { font-size: 3rem }\n.pricing { display: grid }\n")
    b.write(repo / "pricing.md", "# Pricing copy\n\nFree, Team, Enterprise.\n")


def _clean(b: DemoBuilder, root: Path, name: str) -> None:
    b.tracked(name, root, {"README.md": f"# {name}\n", "LICENSE": "MIT\n"})


def _no_upstream(b: DemoBuilder, root: Path) -> None:
    repo = b.repo(root / "scratch", {"notes.md": "# ideas\n"})
    b.commit(repo, "notes.md", "# ideas\n- a fleet dashboard\n", "more ideas")


# Proposals the demo's agents are waiting on: (agent, op, repo under its root, args, reason).
DEMO_PROPOSALS = (
    ("claude-code", "commit", "oss/mobile-app", {"message": "Name the package", "paths": ["package.json"]},
     "package.json is staged and names the app; committing it before the release branch is cut"),
    ("codex", "discard", "oss/mobile-app", {"paths": ["notes.txt"], "include_untracked": True},
     "notes.txt is a scratch file I left behind"),
    ("claude-code", "submodule_pointer", "oss/monorepo",
     {"path": "vendor/shared-lib", "action": "record", "message": "vendor shared-lib v2"},
     "shared-lib v2 is checked out and tested; record it as the new pointer"),
    ("codex", "merge", "work/billing", {"source": "origin/main"},
     "bring in the teammates' tax-rate change before continuing the export work"),
)


DEMO_POLICY = """# the demo's policy: every proposal waits for a person, for as long as the demo may run
[settings]
expiry_minutes = 10080
"""


def demo_policy(target: str | os.PathLike[str]) -> str:
    """Write the demo's policy file in `target` and return its path."""
    path = Path(target) / "demo-policy.toml"
    path.write_text(DEMO_POLICY, encoding="utf-8")
    return str(path)


def _discard_work(db_path: str | os.PathLike[str], repo: Path) -> None:
    """The safety net's story, made by its own code: the hook snapshots before an agent's `git checkout -- .`
    and `git clean -fd`, the commands run for real, and the next snapshot finds the work discarded."""
    tree = WorkTree(str(repo), str(repo / ".git"), str(repo / ".git"))
    command = "git checkout -- . && git clean -fd"
    take(tree, db_path, "hook:claude-code", agents=["claude-code"], command=command)
    for args in (("checkout", "-q", "--", "."), ("clean", "-fdq")):
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)
    take(tree, db_path, "sweep", agents=["claude-code"])


def seed_proposals(db_path: str | os.PathLike[str], roots: list[str]) -> list[str]:
    """Index the demo fleet and make the demo agents' pending proposals (under no personal policy);
    returns their ids. A proposal the fleet's state refuses is skipped, never fatal to the demo."""
    base = Path(roots[0]).parent
    made = []
    saved = os.environ.get("FLEETDECK_POLICY")
    os.environ["FLEETDECK_POLICY"] = demo_policy(base.parent)
    try:
        with open_index(db_path) as index:
            index.set_meta(POLICY_META, os.environ["FLEETDECK_POLICY"])  # `fleetdeck mcp --db` follows it too
            for root in roots:
                index.add_root(root)
            scan(index, roots)
            _discard_work(db_path, base / "work" / "landing-page")
            for agent, op, where, args, reason in DEMO_PROPOSALS:
                try:
                    made.append(service.propose(index, agent, op, str(base / where), args, reason)["proposal_id"])
                except FleetError:
                    continue
    finally:
        if saved is None:
            os.environ.pop("FLEETDECK_POLICY", None)
        else:
            os.environ["FLEETDECK_POLICY"] = saved
    return made
