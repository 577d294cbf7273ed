"""The in-process merge verdict (fleet/repo/libmerge.py): where it answers, `git merge-tree` run directly says
the merge is clean; every case it declines goes to git (the throwaway's `merge_tree`), and predict_merge is the
same with it on and off. Nothing the repository holds runs and nothing is written."""

from __future__ import annotations

import os
import random
import subprocess
import threading
from pathlib import Path

import pytest

from fleet.repo import libmerge, record
from fleet.repo.record import predict_merge
from tests.fleets.gitbuild import git, git_env
from tests.fleets.hostile import age_git_dir, snapshot, snapshot_diff

_SUB = "1" * 40


class History:
    """Commits built with git's plumbing in one repository: exact trees, no work tree involved."""

    def __init__(self, path: Path) -> None:
        path.mkdir(parents=True)
        git(path, "init", "-q", "-b", "main")
        self.path = path
        self.clock = 1_700_000_000

    def commit(self, parents: list[str], changes: dict, message: str = "c") -> str:
        """A commit over `parents[0]`'s tree with `changes`: path -> text (a file), ("x", text) an executable,
        ("l", target) a symlink, ("g", sha) a gitlink, None a deletion."""
        index = str(self.path / ".git" / "build-index")
        env = {**git_env(), "GIT_INDEX_FILE": index}
        run = lambda *args, stdin=None: subprocess.run(  # noqa: E731
            ["git", "-C", str(self.path), *args], env=env, input=stdin, capture_output=True, check=True).stdout
        if parents:
            run("read-tree", parents[0])
        else:
            run("read-tree", "--empty")
        for name, spec in changes.items():
            if spec is None:
                run("update-index", "--force-remove", "--", name)
                continue
            mode, data = "100644", spec
            if isinstance(spec, tuple):
                kind, data = spec
                mode = {"x": "100755", "l": "120000", "g": "160000"}[kind]
            if mode == "160000":
                sha = data
            else:
                raw = data.encode() if isinstance(data, str) else data
                sha = run("hash-object", "-w", "--stdin", stdin=raw).decode().strip()
            run("update-index", "--add", "--replace", "--cacheinfo", f"{mode},{sha},{name}")
        tree = run("write-tree").decode().strip()
        self.clock += 60
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = f"{self.clock} +0000"
        args = ["commit-tree", tree, "-m", message]
        for parent in parents:
            args += ["-p", parent]
        sha = run(*args).decode().strip()
        os.unlink(index)
        git(self.path, "update-ref", f"refs/tags/c{self.clock}", sha)   # reachable: `repack -ad` keeps it
        return sha

    def pack(self) -> None:
        git(self.path, "repack", "-adq")
        assert not [d for d in os.listdir(self.path / ".git" / "objects") if len(d) == 2]


def _oracle(repo: Path, ours: str, theirs: str) -> dict | None:
    """`git merge-tree` in the repository itself: clean, and the conflicted paths (None: git refuses, as for
    unrelated histories)."""
    proc = subprocess.run(["git", "-C", str(repo), "merge-tree", "--write-tree", "--name-only", "-z",
                           "--no-messages", ours, theirs], env=git_env(), capture_output=True, check=False)
    assert proc.returncode in (0, 1, 128), proc.stderr
    if proc.returncode == 128:
        return None
    paths = sorted({p.decode() for p in proc.stdout.split(b"\0")[1:] if p})
    return {"clean": proc.returncode == 0, "paths": paths}


def _fork(h: History, base: dict, ours: dict, theirs: dict) -> tuple[str, str]:
    root = h.commit([], base)
    return h.commit([root], ours, "ours"), h.commit([root], theirs, "theirs")


def _criss_cross(h: History) -> tuple[str, str]:
    root = h.commit([], {"a": "1\n", "b": "1\n"})
    x = h.commit([root], {"a": "x\n"})
    y = h.commit([root], {"b": "y\n"})
    xm = h.commit([x, y], {})
    ym = h.commit([y, x], {})
    return h.commit([xm], {"c": "o\n"}), h.commit([ym], {"d": "t\n"})


def _unrelated(h: History) -> tuple[str, str]:
    return h.commit([], {"a": "1\n"}), h.commit([], {"b": "1\n"})


def _ancestor(h: History) -> tuple[str, str]:
    root = h.commit([], {"a": "1\n"})
    return h.commit([root], {"b": "2\n"}), root


def _same(h: History) -> tuple[str, str]:
    root = h.commit([], {"a": "1\n"})
    return root, root


_TEXT = "".join(f"line {i}\n" for i in range(20))
_BIN = bytes(range(256)) * 4
# name: (base, ours, theirs, the reason the verdict declines or None)
_FORKS = {
    "disjoint_edits": ({"a": "1\n", "d/b": "1\n"}, {"a": "2\n"}, {"d/b": "2\n"}, None),
    "same_file_clean": ({"a": _TEXT}, {"a": "top\n" + _TEXT}, {"a": _TEXT + "end\n"}, "same_path"),
    "same_file_conflict": ({"a": "1\n"}, {"a": "2\n"}, {"a": "3\n"}, "same_path"),
    "same_edit_both": ({"a": "1\n"}, {"a": "2\n"}, {"a": "2\n"}, "same_path"),
    "adds_both_sides": ({"a": "1\n"}, {"d/n1": "x\n"}, {"d/n2": "y\n", "e/f/g": "z\n"}, None),
    "add_add_same": ({"a": "1\n"}, {"n": "x\n"}, {"n": "y\n"}, "same_path"),
    "add_add_identical": ({"a": "1\n"}, {"n": "x\n"}, {"n": "x\n"}, "same_path"),
    "file_vs_dir": ({"a": "1\n"}, {"x": "f\n"}, {"x/y": "d\n"}, "file_directory"),
    "dir_vs_file": ({"a": "1\n"}, {"x/y/z": "d\n"}, {"x/y": "f\n"}, "file_directory"),
    "file_became_dir": ({"x": "1\n"}, {"x": None, "x/y": "d\n"}, {"a": "2\n"}, "deletion"),
    "deletion_one_side": ({"a": "1\n", "b": "1\n"}, {"a": None}, {"b": "2\n"}, "deletion"),
    "delete_vs_modify": ({"a": "1\n"}, {"a": None}, {"a": "2\n"}, "deletion"),
    "rename_vs_edit": ({"old": _TEXT, "b": "1\n"}, {"old": None, "new": _TEXT}, {"old": _TEXT + "x\n"},
                       "deletion"),
    "dir_rename": ({"d/a": _TEXT, "d/b": _TEXT + "b\n"},
                   {"d/a": None, "d/b": None, "e/a": _TEXT, "e/b": _TEXT + "b\n"}, {"d/c": "new\n"}, "deletion"),
    "mode_change_disjoint": ({"a": "1\n", "b": "1\n"}, {"a": ("x", "1\n")}, {"b": "2\n"}, None),
    "mode_vs_edit_same": ({"a": "1\n"}, {"a": ("x", "1\n")}, {"a": "2\n"}, "same_path"),
    "symlink_added": ({"a": "1\n"}, {"l": ("l", "a")}, {"a": "2\n"}, None),
    "symlink_retargeted": ({"a": "1\n", "l": ("l", "a")}, {"l": ("l", "b")}, {"a": "2\n"}, None),
    "file_to_symlink": ({"a": "1\n", "b": "1\n"}, {"a": ("l", "b")}, {"b": "2\n"}, "deletion"),
    "symlink_vs_dir": ({"a": "1\n"}, {"x": ("l", "a")}, {"x/y": "2\n"}, "file_directory"),
    "gitlink_added": ({"a": "1\n"}, {"sub": ("g", _SUB)}, {"a": "2\n"}, "change_kind"),
    "gitlink_moved": ({"a": "1\n", "sub": ("g", _SUB)}, {"sub": ("g", "2" * 40)}, {"a": "2\n"}, "change_kind"),
    "binary_disjoint": ({"bin": _BIN, "a": "1\n"}, {"bin": _BIN[::-1]}, {"a": "2\n"}, None),
    "binary_both": ({"bin": _BIN}, {"bin": _BIN[::-1]}, {"bin": _BIN + b"x"}, "same_path"),
    "non_ascii_paths": ({"é/ü.txt": "1\n", "日本": "1\n"}, {"é/ü.txt": "2\n"}, {"日本": "2\n", "ñ": "3\n"},
                        None),
    "empty_commits": ({"a": "1\n"}, {}, {}, None),
    "one_side_empty": ({"a": "1\n"}, {}, {"a": "2\n", "z": "3\n"}, None),
}
_SHAPES = {"criss_cross": (_criss_cross, "merge_bases"), "unrelated": (_unrelated, "no_merge_base"),
           "fast_forward": (_ancestor, None), "same_commit": (_same, None)}


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Every `merge_tree` predict_merge starts: which path answered."""
    calls: list[list[str]] = []
    real = record.merge_tree

    def counted(path, commondir, args, **kw):
        calls.append(args)
        return real(path, commondir, args, **kw)

    monkeypatch.setattr(record, "merge_tree", counted)
    return calls


def _check(repo: Path, ours: str, theirs: str, reason: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    common = str(repo / ".git")
    monkeypatch.delenv(libmerge.SWITCH, raising=False)
    assert libmerge.unsure(common, ours, theirs) == reason
    oracle = _oracle(repo, ours, theirs)
    if reason is None:
        assert oracle == {"clean": True, "paths": []}   # the verdict's one answer is git's
    calls = _counting(monkeypatch)
    age_git_dir(repo)
    before = snapshot(repo)
    got = predict_merge(str(repo), common, ours, theirs)
    assert snapshot_diff(before, snapshot(repo)) == []
    assert len(calls) == (0 if reason is None else 1)
    assert got == (None if oracle is None else {**oracle, "ours": ours, "theirs": theirs})
    monkeypatch.setenv(libmerge.SWITCH, "git")
    assert predict_merge(str(repo), common, ours, theirs) == got
    assert len(calls) == (1 if reason is None else 2)


@pytest.mark.parametrize("name", sorted(_FORKS))
def test_a_fork_is_answered_in_process_only_when_git_says_clean(tmp_path: Path, name: str,
                                                                 monkeypatch: pytest.MonkeyPatch):
    base, ours, theirs, reason = _FORKS[name]
    h = History(tmp_path / "r")
    one, two = _fork(h, base, ours, theirs)
    _check(h.path, one, two, reason, monkeypatch)
    _check(h.path, two, one, reason, monkeypatch)


@pytest.mark.parametrize("name", sorted(_SHAPES))
def test_history_shapes(tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch):
    build, reason = _SHAPES[name]
    h = History(tmp_path / "r")
    one, two = build(h)
    _check(h.path, one, two, reason, monkeypatch)


def test_the_answer_holds_over_packed_objects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    h = History(tmp_path / "r")
    one, two = _fork(h, {"a": "1\n", "b": "1\n"}, {"a": "2\n"}, {"b": "2\n"})
    h.pack()
    _check(h.path, one, two, None, monkeypatch)


def _store(tmp_path: Path) -> tuple[History, str, str]:
    h = History(tmp_path / "r")
    one, two = _fork(h, {"a": "1\n", "b": "1\n"}, {"a": "2\n"}, {"b": "2\n"})
    return h, one, two


@pytest.mark.parametrize("name", ["shallow", "info/grafts", "objects/info/alternates",
                                  "objects/info/commit-graph", "objects/pack/multi-pack-index"])
def test_a_repository_whose_history_or_objects_git_may_read_otherwise_goes_to_git(
        tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch):
    h, one, two = _store(tmp_path)
    (h.path / ".git" / name).write_text("")
    reason = "shallow" if name in ("shallow", "info/grafts") else "object_store"
    assert libmerge.unsure(str(h.path / ".git"), one, two) == reason


@pytest.mark.parametrize("packed", [False, True])
def test_a_linked_loose_object_or_pack_goes_to_git(tmp_path: Path, packed: bool):
    """git in the throwaway skips a loose object or a pack that is a link; libgit2 would follow it."""
    h, one, two = _store(tmp_path)
    objects = h.path / ".git" / "objects"
    if packed:
        h.pack()
        linked = next((objects / "pack").glob("*.pack"))
    else:
        blob = git(h.path, "rev-parse", f"{one}:a").strip()
        linked = objects / blob[:2] / blob[2:]
    assert libmerge.unsure(str(h.path / ".git"), one, two) is None
    moved = tmp_path / "elsewhere"
    linked.rename(moved)
    linked.symlink_to(moved)
    assert libmerge.unsure(str(h.path / ".git"), one, two) == "object_store"


def test_names_threads_extensions_and_the_switch_go_to_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    h, one, two = _store(tmp_path)
    common = str(h.path / ".git")
    assert libmerge.unsure(common, one, two) is None
    assert libmerge.unsure(common, "main", two) == "not_sha1"
    git(h.path, "update-ref", "refs/heads/main", one)
    calls = _counting(monkeypatch)
    assert predict_merge(str(h.path), common, "main", two) == {"clean": True, "paths": []}
    assert len(calls) == 1
    seen: list[str | None] = []
    thread = threading.Thread(target=lambda: seen.append(libmerge.unsure(common, one, two)))
    thread.start()
    thread.join()
    assert seen == ["not_main_thread"]
    with (h.path / ".git" / "config").open("a") as fh:
        fh.write("[extensions]\n\tobjectformat = sha256\n")
    assert libmerge.unsure(common, one, two) == "extensions"
    monkeypatch.setenv(libmerge.SWITCH, "git")
    assert libmerge.unsure(common, one, two) == "switched_off"


def test_a_sha256_repository_goes_to_git(tmp_path: Path):
    repo = tmp_path / "s"
    repo.mkdir()
    git(repo, "init", "-q", "--object-format=sha256", "-b", "main")
    (repo / "a").write_text("1\n")
    git(repo, "add", "a")
    git(repo, "commit", "-qm", "a")
    sha = git(repo, "rev-parse", "HEAD").strip()
    assert len(sha) == 64 and libmerge.unsure(str(repo / ".git"), sha, sha) == "not_sha1"


def test_hostile_config_runs_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The repository's merge driver and attributes are never read: the verdict opens no config but its bytes."""
    h, one, two = _store(tmp_path)
    marker = tmp_path / "ran"
    with (h.path / ".git" / "config").open("a") as fh:
        fh.write(f'[merge "evil"]\n\tdriver = touch {marker}\n[core]\n\tfsmonitor = touch {marker}\n')
    (h.path / ".git" / "info" / "attributes").write_text("* merge=evil\n")
    _check(h.path, one, two, None, monkeypatch)
    assert not marker.exists()


def test_the_persons_settings_and_attributes_change_no_one_sided_path(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch):
    """The throwaway git reads the person's config and attributes (not the repository's): case-folding, CRLF
    conversion and a merge driver for every path touch no path only one side changed, so git still calls a
    case-colliding add and CRLF edits clean, and the driver never runs."""
    marker = tmp_path / "ran"
    home = tmp_path / "home"
    home.mkdir()
    (home / "attributes").write_text("* merge=evil text eol=crlf\n")
    (home / ".gitconfig").write_text(
        "[core]\n\tignorecase = true\n\tautocrlf = true\n"
        f"\tattributesFile = {home / 'attributes'}\n"
        f'[merge "evil"]\n\tdriver = touch {marker}\n')
    monkeypatch.setenv("HOME", str(home))
    h = History(tmp_path / "r")
    one, two = _fork(h, {"a": "1\r\n", "D/x": "1\n"}, {"A": "x\n", "a": "2\r\n"}, {"d/x": "y\n", "D/x": "2\n"})
    _check(h.path, one, two, None, monkeypatch)
    assert not marker.exists()


@pytest.mark.parametrize("setting", ["[merge]\n\trenormalize = true\n", "[merge]\n\trenames = bogus\n",
                                     "[diff]\n\trenames = copies\n", "[include]\n\tpath = other\n",
                                     "[merge\n"])
def test_the_persons_merge_settings_go_to_git(tmp_path: Path, setting: str, monkeypatch: pytest.MonkeyPatch):
    """Under `merge.renormalize` git 2.39 aborts in the bare throwaway (no prediction), on a bad value it dies:
    whatever the person sets for merges, or may include from elsewhere, is git's to apply."""
    h, one, two = _store(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = x\n")
    monkeypatch.setenv("HOME", str(home))
    assert libmerge.unsure(str(h.path / ".git"), one, two) is None
    (home / ".gitconfig").write_text(setting)   # read again: the file changed
    assert libmerge.unsure(str(h.path / ".git"), one, two) == "person_config"
    if "renormalize" in setting:
        assert predict_merge(str(h.path), str(h.path / ".git"), one, two) is None


def _random_side(rng: random.Random, base: dict[str, str]) -> dict:
    names = ["a", "b", "d/a", "d/b", "d/e/f", "x", "x/y", "é"]
    side: dict = {}
    for _ in range(rng.randint(0, 3)):
        name = rng.choice(names)
        roll = rng.random()
        if roll < 0.15 and name in base:
            side[name] = None
        elif roll < 0.25:
            side[name] = ("x", rng.choice("12"))
        elif roll < 0.3:
            side[name] = ("l", rng.choice(names))
        else:
            side[name] = rng.choice(["1\n", "2\n", "3\n", _TEXT, _TEXT + "z\n"])
    return side


@pytest.mark.parametrize("seed", range(60))
def test_random_histories_predict_alike_with_the_verdict_on_and_off(tmp_path: Path, seed: int,
                                                                    monkeypatch: pytest.MonkeyPatch):
    rng = random.Random(seed)
    h = History(tmp_path / "r")
    base = {n: rng.choice(["1\n", _TEXT]) for n in rng.sample(["a", "b", "d/a", "d/b", "x"], rng.randint(1, 4))}
    root = h.commit([], base)
    tips = [root, root]
    for side in [0, 1] + [rng.randrange(2) for _ in range(rng.randint(0, 3))]:
        try:
            tips[side] = h.commit([tips[side]], _random_side(rng, base))
        except subprocess.CalledProcessError:
            continue   # a change the index refuses (a folder over a file left in it)
        if rng.random() < 0.2:
            tips[1 - side] = h.commit([tips[1 - side], tips[side]], {})   # a merge: more than one base later
    common = str(h.path / ".git")
    on = predict_merge(str(h.path), common, *tips)
    verdict = libmerge.unsure(common, *tips)
    monkeypatch.setenv(libmerge.SWITCH, "git")
    off = predict_merge(str(h.path), common, *tips)
    assert on == off
    if verdict is None:
        assert _oracle(h.path, *tips) == {"clean": True, "paths": []}
