"""The realistic benchmark fleet: repositories shaped like a working person's, not like a fresh `git init`.

Each kind of repo is built once as a template with the real git CLI (history through `git fast-import`,
then real commits, amends, resets, rebases, checkouts, pushes and fetches, so every reflog line is one git
wrote itself), then copied with `cp -a`. Linked worktrees hold absolute paths, so they are added after the
copy with `git worktree add`. Bare mirrors (`git clone --mirror`) sit under the same root, in `mirrors/`.

Kinds (weights out of 40): synced (10: 1 remote, 2-5 branches with upstreams, ~40 reflog lines), busy (4: two
remotes, 20 branches, ~500 reflog lines), ahead (5), behind (4), diverged (4), dirty (5), stashed (3),
rebasing (1: stopped on a conflict), merging (1: conflicted merge), worktree (2), submodule (1).
`MANIFEST` says what each kind claims; tests/test_fleetgen.py checks the claims with git.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.fleetgen import ENV

# kind -> (weight, claims). Claims are checked by tests/test_fleetgen.py with git.
MANIFEST: dict[str, tuple[int, dict]] = {
    "synced": (10, {"ahead": 0, "behind": 0, "remotes": 1, "reflog_min": 20}),
    "busy": (4, {"remotes": 2, "branches_min": 20, "reflog_min": 450}),
    "ahead": (5, {"ahead": 2, "behind": 0, "remotes": 1}),
    "behind": (4, {"ahead": 0, "behind": 1, "remotes": 1}),
    "diverged": (4, {"ahead": 1, "behind": 1, "remotes": 1}),
    "dirty": (5, {"dirty": True, "remotes": 1}),
    "stashed": (3, {"stashes": 2, "remotes": 1}),
    "rebasing": (1, {"operation": "rebase", "remotes": 1}),
    "merging": (1, {"operation": "merge", "remotes": 1}),
    "worktree": (2, {"worktrees": 1, "remotes": 1}),
    "submodule": (1, {"submodules": 1, "remotes": 1}),
}
HISTORY = 120  # commits imported per template before the reflog-writing work starts
MIRROR_SHARE = 5  # one bare mirror per this many working repos


def git(cwd: Path, *args: str, check: bool = True) -> str:
    proc = subprocess.run(["git", "-c", "protocol.file.allow=always", "-C", str(cwd), *args], env=ENV,
                          capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} in {cwd}: {proc.stderr.strip()}")
    return proc.stdout


def _fast_import(repo: Path, commits: int, seed: int) -> None:
    """`commits` commits on main in one `git fast-import` (a repo's long past: no reflog lines, as in a clone)."""
    rng = random.Random(seed)
    parts: list[bytes] = []
    for i in range(commits):
        files = b"".join(
            b"M 644 inline src/mod%d.py\ndata %d\n%s\n" % (n, len(body), body)
            for n in (rng.randrange(30) for _ in range(3))
            for body in [b"VALUE = %d\n" % rng.randrange(10**6) * 8])
        msg = b"change %d" % i
        when = 1_700_000_000 + i * 3600
        parts.append(b"commit refs/heads/main\nmark :%d\ncommitter Bench <bench@example.com> %d +0000\n"
                     b"data %d\n%s\n%s%s\n" % (i + 1, when, len(msg), msg,
                                                b"from :%d\n" % i if i else b"", files))
    subprocess.run(["git", "-C", str(repo), "fast-import", "--quiet"], input=b"".join(parts), env=ENV,
                   check=True, capture_output=True)
    git(repo, "reset", "-q", "--hard", "main")


def _commit(repo: Path, rng: random.Random, message: str, *extra: str) -> None:
    (repo / "src" / f"mod{rng.randrange(30)}.py").write_text(f"VALUE = {rng.randrange(10**6)}\n" * 8)
    git(repo, "commit", "-q", "-am", message, *extra)


def _churn(repo: Path, lines: int, rng: random.Random) -> None:
    """Real work until HEAD's reflog has about `lines` lines: commits, amends, resets, checkouts, rebases."""
    n = 0
    while len((repo / ".git" / "logs" / "HEAD").read_text().splitlines()) < lines:
        n += 1
        roll = rng.random()
        if roll < 0.45:
            _commit(repo, rng, f"work {n}")
        elif roll < 0.6:
            _commit(repo, rng, f"work {n} (amended)", "--amend")
        elif roll < 0.7:
            git(repo, "reset", "-q", "--hard", "HEAD~1")
        elif roll < 0.85:
            git(repo, "checkout", "-q", "-B", f"topic{n % 3}")
            _commit(repo, rng, f"topic {n}")
            git(repo, "checkout", "-q", "main")
        else:  # a topic rebased on main, then main fast-forwarded to it
            git(repo, "checkout", "-q", "-b", f"rb{n}", "HEAD~2")
            (repo / f"rb{n}.txt").write_text(f"{n}\n")
            git(repo, "add", f"rb{n}.txt")
            git(repo, "commit", "-q", "-m", f"rebased {n}")
            git(repo, "rebase", "-q", "main")
            git(repo, "checkout", "-q", "main")
            git(repo, "merge", "-q", "--ff-only", f"rb{n}")
            git(repo, "branch", "-q", "-D", f"rb{n}")


def _template(base: Path, kind: str, seed: int) -> Path:
    rng = random.Random(seed)
    repo = base / kind
    origin, backup = base / "remotes" / f"{kind}-origin.git", base / "remotes" / f"{kind}-backup.git"
    git(base, "init", "-q", "--bare", "-b", "main", str(origin))
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    _fast_import(repo, HISTORY, seed)
    git(repo, "remote", "add", "origin", str(origin))
    _churn(repo, 500 if kind == "busy" else rng.randrange(20, 60), rng)
    branches = 20 if kind == "busy" else rng.randrange(1, 5)
    names = [f"feature/{i}" for i in range(1, branches)]
    for name in names:
        git(repo, "branch", name, f"HEAD~{rng.randrange(1, 30)}")
    git(repo, "push", "-q", "-u", "origin", "main", *names)
    if kind == "busy":
        git(base, "init", "-q", "--bare", "-b", "main", str(backup))
        git(repo, "remote", "add", "backup", str(backup))
        git(repo, "push", "-q", "-u", "backup", *names[::2])
        git(repo, "fetch", "-q", "--all")
    if kind == "ahead":
        _commit(repo, rng, "unpushed 1")
        _commit(repo, rng, "unpushed 2")
    elif kind in ("behind", "diverged"):
        git(repo, "reset", "-q", "--hard", "HEAD~1")
        if kind == "diverged":
            _commit(repo, rng, "local only")
    elif kind == "dirty":
        (repo / "src" / "mod1.py").write_text("changed\n")
        (repo / "notes.txt").write_text("untracked\n")
        git(repo, "add", "src/mod2.py", "notes.txt")
        (repo / "src" / "mod3.py").write_text("changed too\n")
    elif kind == "stashed":
        for i in range(2):
            (repo / "src" / "mod4.py").write_text(f"stash {i}\n")
            git(repo, "stash", "-q")
    elif kind in ("rebasing", "merging"):
        git(repo, "checkout", "-q", "-b", "side", "HEAD~3")
        (repo / "clash.txt").write_text("side\n")
        git(repo, "add", "clash.txt")
        git(repo, "commit", "-q", "-m", "side clash")
        git(repo, "checkout", "-q", "main")
        (repo / "clash.txt").write_text("main\n")
        git(repo, "add", "clash.txt")
        git(repo, "commit", "-q", "-m", "main clash")
        if kind == "rebasing":
            git(repo, "checkout", "-q", "side")
            git(repo, "rebase", "main", check=False)
        else:
            git(repo, "merge", "side", check=False)
    elif kind == "submodule":
        lib = base / "remotes" / "lib"
        lib.mkdir()
        git(lib, "init", "-q", "-b", "main")
        (lib / "lib.txt").write_text("lib\n")
        git(lib, "add", "lib.txt")
        git(lib, "commit", "-q", "-m", "lib")
        git(repo, "submodule", "-q", "add", str(lib), "lib")
        git(repo, "commit", "-q", "-m", "add lib")
    return repo


def _mix(count: int) -> list[str]:
    """`count` kinds, spread evenly by weight (every kind appears once `count` reaches the weights' total)."""
    pool = [kind for kind, (weight, _) in MANIFEST.items() for _ in range(weight)]
    order = sorted(range(len(pool)), key=lambda i: (i * 7919) % len(pool))
    return [pool[order[i % len(pool)]] for i in range(count)]


def generate_realistic(root: Path, count: int) -> dict:
    """`count` working repos (root/rNNNNN), their linked worktrees (root/worktrees/) and count // 5 bare mirrors
    (root/mirrors/) under `root`; cached by a marker. Returns {"repos", "worktrees", "mirrors", "kinds"}."""
    kinds = _mix(count)
    repos = [root / f"r{i:05d}" for i in range(count)]
    worktrees = [root / "worktrees" / repo.name for repo, kind in zip(repos, kinds) if kind == "worktree"]
    mirrors = [root / "mirrors" / f"m{i:05d}.git" for i in range(count // MIRROR_SHARE)]
    result = {"repos": repos, "worktrees": worktrees, "mirrors": mirrors, "kinds": dict(zip(repos, kinds))}
    marker = root / f".realistic-{count}"
    if marker.exists():
        return result
    templates = root.parent / f"{root.name}-templates"
    if not (templates / ".done").exists():
        shutil.rmtree(templates, ignore_errors=True)
        (templates / "remotes").mkdir(parents=True)
        # the kinds' templates share nothing (each its own repo and remotes, its own seed): built side by side,
        # one per core, as git processes
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            list(pool.map(lambda seeded: _template(templates, seeded[1], seeded[0]), enumerate(MANIFEST)))
        for kind in ("synced", "busy"):
            git(templates, "clone", "-q", "--mirror", str(templates / kind), f"mirror-{kind}.git")
        (templates / ".done").write_text("ok\n")
    root.mkdir(parents=True, exist_ok=True)
    (root / "mirrors").mkdir(exist_ok=True)
    for repo, kind in zip(repos, kinds):
        if not repo.exists():
            subprocess.run(["cp", "-a", str(templates / kind), str(repo)], check=True)
    for wt in worktrees:
        if not wt.exists():
            git(root / wt.name, "worktree", "add", "-q", "-b", "wt-work", str(wt))
    for i, mirror in enumerate(mirrors):
        if not mirror.exists():
            subprocess.run(["cp", "-a", str(templates / f"mirror-{('synced', 'busy')[i % 2]}.git"), str(mirror)],
                           check=True)
    marker.write_text("ok\n")
    return result
