"""Property: for every undoable op and any repository state, execute then undo leaves every file exactly as it
was (bytes, permission bits, type, symlink target; tracked, untracked, ignored and excluded alike), with HEAD,
refs, the index and the stash list as before.

Repository states are generated with hypothesis and built with the real git CLI: three commits (a base, the
checked-out `main` and a diverged `other`, each with files, executables and symlinks, some force-added
over .gitignore / .git/info/exclude rules), then working-tree edits over them: staged, unstaged, staged then
edited again, deletions, mode flips, symlinks, untracked, ignored and excluded files. Each generated state is
built once and every op runs on a fresh copy of it; three states (derandomized, no deadline) keep it fast; `test_the_property_catches_a_broken_restore` shows it
fails when the restore point forgets something.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from fleet.errors import FleetError
from fleet.index.scan import scan
from fleet.index.store import open_index
from fleet.ops import savedfiles, service
from tests.fleets.gitbuild import git
from tests.fleets.treesnap import exact

PATHS = ["a.txt", "run.sh", "d/c.txt", "d/e.txt", "link", ".env", "keep.cfg", "n/new.txt", "x.log"]
TEXTS = ["one\n", "two\n", "three\n", "SECRET=1\n"]
BINARY = b"\x00bin\xff\n"
IGNORE = ".env\n*.log\n"
EXCLUDE = "keep.cfg\nn/\n"

entry = st.one_of(
    st.none(),
    st.tuples(st.just("file"), st.sampled_from(TEXTS + [BINARY]), st.sampled_from([0o644, 0o755, 0o600])),
    st.tuples(st.just("link"), st.sampled_from(["a.txt", "d", "../elsewhere"])),
)
tree = st.fixed_dictionaries({p: entry for p in PATHS})
edit = st.sampled_from(["leave", "edit", "stage", "stage", "stage_edit", "delete", "chmod", "symlink", "new"])
overlay = st.fixed_dictionaries({p: st.tuples(edit, st.sampled_from(TEXTS)) for p in PATHS})


def _clear(work: Path) -> None:
    for name in os.listdir(work):
        if name != ".git":
            full = work / name
            shutil.rmtree(full) if full.is_dir() and not full.is_symlink() else full.unlink()


def _write(work: Path, rel: str, spec) -> None:
    full = work / rel
    full.parent.mkdir(parents=True, exist_ok=True)
    if os.path.lexists(full):
        full.unlink()
    if spec[0] == "link":
        os.symlink(spec[1], full)
    else:
        full.write_bytes(spec[1] if isinstance(spec[1], bytes) else spec[1].encode())
        os.chmod(full, spec[2])


def _commit(work: Path, files: dict, message: str) -> None:
    _clear(work)
    (work / ".gitignore").write_text(IGNORE)
    for rel, spec in files.items():
        if spec is not None:
            _write(work, rel, spec)
    git(work, "add", "-A", "-f", ".")
    git(work, "commit", "-q", "--allow-empty", "-m", message)


def _apply_overlay(work: Path, edits: dict) -> None:
    for rel, (kind, text) in edits.items():
        full = work / rel
        exists = os.path.lexists(full)
        if kind == "leave" or (kind in ("edit", "stage", "stage_edit", "delete", "chmod") and not exists):
            continue
        if kind == "delete":
            full.unlink() if not full.is_dir() or full.is_symlink() else shutil.rmtree(full)
        elif kind == "chmod":
            if not full.is_symlink():
                os.chmod(full, os.lstat(full).st_mode ^ 0o100)
        elif kind == "symlink":
            _write(work, rel, ("link", "a.txt"))
        else:
            _write(work, rel, ("file", text, 0o644 if kind != "new" else 0o600))
            if kind in ("stage", "stage_edit"):
                git(work, "add", "-f", "--", rel)
            if kind == "stage_edit":
                _write(work, rel, ("file", "edited after staging\n", 0o644))


def build(base: Path, c0: dict, c1: dict, c2: dict, edits: dict) -> Path:
    """base/fleet/work: base commit c0, `other` = c0 + c1, `main` = c0 + c2 (checked out), then `edits`."""
    work = base / "fleet" / "work"
    work.mkdir(parents=True)
    git(work, "init", "-q", "-b", "main")
    _commit(work, c0, "base")
    git(work, "checkout", "-q", "-b", "other")
    _commit(work, {**c0, **{p: v for p, v in c1.items() if v is not None or p in ("a.txt", "d/e.txt")}}, "other")
    git(work, "checkout", "-q", "-f", "main")
    git(work, "clean", "-q", "-f", "-d", "-x")
    _commit(work, {**c0, **{p: v for p, v in c2.items() if v is not None or p == "run.sh"}}, "main")
    (work / ".git" / "info").mkdir(exist_ok=True)
    (work / ".git" / "info" / "exclude").write_text(EXCLUDE)
    _apply_overlay(work, edits)
    return work


def _status(work: Path) -> list[tuple[str, str]]:
    """[(XY, path)] from git status (the oracle), renames' old paths skipped."""
    fields = git(work, "status", "--porcelain", "-z", "-uall").split("\0")
    out, skip = [], False
    for item in fields:
        if skip or len(item) < 4:
            skip = False
            continue
        out.append((item[:2], item[3:]))
        skip = item[0] == "R"
    return out


def _patch(work: Path) -> str:
    """An edit or a deletion of every one-line text file in the work tree, tracked, untracked or ignored."""
    patch = ""
    for n, rel in enumerate(sorted(exact(work)["files"])):
        full = work / rel
        if full.is_symlink() or rel == ".gitignore":
            continue
        data = full.read_bytes()
        if data.count(b"\n") != 1 or not data.endswith(b"\n") or b"\0" in data:
            continue
        old = data.decode().rstrip("\n")
        if n % 2:
            patch += f"--- a/{rel}\n+++ b/{rel}\n@@ -1 +1 @@\n-{old}\n+patched\n"
        else:
            mode = "100755" if os.stat(full).st_mode & 0o111 else "100644"
            patch += (f"diff --git a/{rel} b/{rel}\ndeleted file mode {mode}\n--- a/{rel}\n+++ /dev/null\n"
                      f"@@ -1 +0,0 @@\n-{old}\n")
    return patch


def op_args(op: str, work: Path) -> dict | None:
    """The op's arguments for this state (None: the op has nothing to do here)."""
    if op == "unstage":
        staged = [p for xy, p in _status(work) if xy[0] in "MADT"]
        return {"paths": staged} if staged else None
    if op == "discard":
        changed = [p for xy, p in _status(work) if xy[1] in "MDT?"]
        return {"paths": changed, "include_untracked": True} if changed else None
    if op == "patch":
        patch = _patch(work)
        return {"patch": patch} if patch else None
    if op == "stash_pop":
        git(work, "stash", "push", "-q", "-u", check=False)
        return {}
    if op == "worktree":
        return {"path": str(work.parent / "wt"), "branch": "fresh", "new_branch": True}
    return {
        "stage": {"all": True}, "commit": {"message": "m"}, "checkout": {"ref": "other"},
        "branch": {"name": "nb", "start_point": "other", "checkout": True},
        "stash": {"include_untracked": True, "message": "s"}, "merge": {"source": "other"},
        "rebase": {"onto": "other"},
        "plan": {"steps": [{"op": "stage", "args": {"all": True}}, {"op": "commit", "args": {"message": "p"}},
                           {"op": "checkout", "args": {"ref": "other"}}]},
        **{f"reset-{m}": {"mode": m, "target": "other"} for m in ("soft", "mixed", "hard", "keep", "merge")},
    }[op]


OPS = ["stage", "unstage", "commit", "branch", "checkout", "stash", "stash_pop", "discard", "merge", "rebase",
       "patch", "worktree", "plan", "reset-soft", "reset-mixed", "reset-hard", "reset-keep", "reset-merge"]


def execute_then_undo(ops: list[str], c0, c1, c2, edits) -> None:
    """Build the state once; for each op put the repository back to it (a copy), run the op, undo, compare."""
    base = Path(tempfile.mkdtemp(prefix="fleetdeck-undo-prop-"))
    try:
        work = build(base, c0, c1, c2, edits)
        pristine = base / "pristine"
        shutil.copytree(work, pristine, symlinks=True)
        index = open_index(base / "fleet.db")
        try:
            scan(index, [str(base / "fleet")])
            for op in ops:
                shutil.rmtree(work)
                shutil.copytree(pristine, work, symlinks=True)
                _execute_then_undo(index, work, op)
        finally:
            index.close()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _execute_then_undo(index, work: Path, op: str) -> None:
    args = op_args(op, work)
    if args is None:
        return
    before = exact(work)
    try:
        made = service.propose(index, "claude-code", op.split("-")[0], str(work), args, "property")
    except FleetError:
        return  # the op refuses this state at preview: nothing ran
    done = service.approve(index, made["proposal_id"], "cli")
    if not done.get("restore_point"):
        assert exact(work) == before, f"{op}: a proposal that took no restore point changed the repository"
        return
    undone = service.undo(index, done["id"], "cli")
    assert undone["status"] == "completed", f"{op}: {undone['error']}"
    after = exact(work)
    for key in before:
        assert after[key] == before[key], f"{op}: {key} differs after the undo"


PROPERTY = settings(max_examples=3, deadline=None, derandomize=True, database=None,
                    phases=[Phase.explicit, Phase.generate],  # no shrinking: a failure is reported as found
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.fixture
def no_policy(tmp_path, monkeypatch):
    monkeypatch.delenv("FLEETDECK_POLICY", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))


@pytest.mark.slow
@PROPERTY
@given(c0=tree, c1=tree, c2=tree, edits=overlay)
def test_execute_then_undo_restores_every_byte(no_policy, c0, c1, c2, edits):
    execute_then_undo(OPS, c0, c1, c2, edits)


@pytest.mark.slow
def test_the_property_catches_a_broken_restore(no_policy, monkeypatch):
    """A restore that writes every saved file back 0644 (losing a private 0600 `.env`'s mode) is caught."""
    real = savedfiles.write_back

    def careless(repo, entries):
        return real(repo, {p: (v if v is None or v[0] != "100644" else [v[0], v[1], 0o644]) for p, v in entries.items()})

    monkeypatch.setattr(savedfiles, "write_back", careless)
    prop = PROPERTY(given(c0=tree, c1=tree, c2=tree, edits=overlay)(
        lambda c0, c1, c2, edits: execute_then_undo(["checkout", "reset-hard"], c0, c1, c2, edits)))
    with pytest.raises(AssertionError, match="files differs after the undo"):
        prop()
