"""Repository-defined code on the write side, written as the attacks: a worktree planted in another repo's
`.git`, `auto` running a hostile repo's hooks and filters, a merge driver the preflight did not see, a hook
that adds a file the preview never listed, and paths swapped between the proposal and its approval.
Real git repos built with the git CLI; every marker file is written by a command the repository defines."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from fleet.errors import FleetError
from fleet.index.scan import scan
from fleet.index.store import open_index
from fleet.ops import service
from tests.fleets.gitbuild import commit_file, git, init_repo, with_upstream, write
from tests.fleets.hostile import HOOKS, fired, hostile_repo, marker_script

AUTO_OPS = ["stage", "unstage", "commit", "branch", "checkout", "worktree", "stash", "merge", "patch",
            "reset", "push"]


@pytest.fixture
def fleet(tmp_path, monkeypatch):
    """A fleet root with an auto rule for every low/medium op the attacks use, and an open index."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    policy = tmp_path / "policy.toml"
    policy.write_text(f'[[rules]]\nop = {AUTO_OPS!r}\naction = "auto"\n'.replace("'", '"'))
    monkeypatch.setenv("FLEETDECK_POLICY", str(policy))
    root = tmp_path / "fleet"
    root.mkdir()
    marker = tmp_path / "marker"
    marker.mkdir()
    index = open_index(tmp_path / "fleet.db")
    yield {"root": root, "marker": marker, "index": index, "tmp": tmp_path}
    index.close()


def _scan(fleet) -> None:
    scan(fleet["index"], [str(fleet["root"])])


def _clear(marker: Path) -> None:
    for name in list(marker.iterdir()):
        name.unlink()


def _propose(fleet, repo, op, args, agent="codex"):
    return service.propose(fleet["index"], agent, op, str(repo), args, f"attack: {op}")


def _code(fn, *args) -> str:
    with pytest.raises(FleetError) as err:
        fn(*args)
    return err.value.code


def _hooked_repo(path: Path, marker: Path) -> Path:
    """A repo whose .git/hooks fire a marker for every hook, plus core.* programs aimed at the marker;
    no filters or merge drivers (so auto ops may run, neutralized)."""
    repo = init_repo(path, commits=2)
    commit_file(repo, "src/app.py", "print(1)\n", "add app")
    git(repo, "branch", "topic")
    for hook in HOOKS:
        marker_script(repo / ".git" / "hooks" / hook, marker, f"hook-{hook}")
    bin_ = repo / ".git" / "evil-bin"
    for name in ("fsmonitor", "pager", "editor", "askpass", "ssh", "gpg"):
        marker_script(bin_ / name, marker, name)
    with open(repo / ".git" / "config", "a", encoding="utf-8") as fh:
        fh.write(f"[core]\n\tfsmonitor = {bin_ / 'fsmonitor'}\n\tpager = {bin_ / 'pager'}\n"
                 f"\teditor = {bin_ / 'editor'}\n\taskPass = {bin_ / 'askpass'}\n"
                 f"\tsshCommand = {bin_ / 'ssh'}\n[gpg]\n\tprogram = {bin_ / 'gpg'}\n")
    write(repo / "README.md", "edited\n")
    write(repo / "new.txt", "untracked\n")
    return repo


# --- 1. a worktree planted in another repository's .git ---------------------------------------------------

def _victim_and_attacker(fleet) -> tuple[Path, Path]:
    root = fleet["root"]
    victim = root / "victim"
    victim.mkdir()
    git(victim, "init", "-q", "--template=", "-b", "main")   # no .git/hooks folder at all
    commit_file(victim, "a.txt", "a\n")
    attacker = init_repo(root / "attacker", commits=1)
    marker_script(attacker / "pre-commit", fleet["marker"], "victim-pre-commit")
    git(attacker, "add", "pre-commit")
    git(attacker, "commit", "-q", "-m", "a hook as a file")
    assert not (victim / ".git" / "hooks").exists()
    _scan(fleet)
    return victim, attacker


def test_worktree_into_another_repos_hooks_folder_is_refused(fleet):
    victim, attacker = _victim_and_attacker(fleet)
    args = {"path": str(victim / ".git" / "hooks"), "branch": "plant", "new_branch": True}
    assert _code(_propose, fleet, attacker, "worktree", args) == "BAD_PATH"
    assert not (victim / ".git" / "hooks").exists()
    commit_file(victim, "b.txt", "b\n")          # the person's next commit there
    assert fired(fleet["marker"]) == []


def test_worktree_into_a_git_dir_through_a_symlink_is_refused(fleet):
    victim, attacker = _victim_and_attacker(fleet)
    os.symlink(victim / ".git", fleet["root"] / "innocent")
    args = {"path": str(fleet["root"] / "innocent" / "hooks"), "branch": "plant", "new_branch": True}
    assert _code(_propose, fleet, attacker, "worktree", args) == "BAD_PATH"
    own = {"path": str(attacker / ".git" / "wt"), "branch": "plant", "new_branch": True}
    assert _code(_propose, fleet, attacker, "worktree", own) == "BAD_PATH"   # its own .git too
    assert not (victim / ".git" / "hooks").exists()


def test_worktree_swapped_into_a_git_dir_after_the_proposal_is_refused_at_execution(fleet):
    victim, attacker = _victim_and_attacker(fleet)
    (fleet["root"] / "parent").mkdir()
    fleet["tmp"].joinpath("policy.toml").write_text("")          # a person approves this one
    made = _propose(fleet, attacker, "worktree", {"path": str(fleet["root"] / "parent" / "hooks"),
                                                  "branch": "plant", "new_branch": True})
    assert made["status"] == "pending"
    os.rmdir(fleet["root"] / "parent")                            # the folder becomes a symlink
    os.symlink(victim / ".git", fleet["root"] / "parent")
    done = service.approve(fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "failed" and done["error"].startswith("STALE"), done["error"]
    assert not (victim / ".git" / "hooks").exists()


def test_worktree_swapped_outside_the_roots_after_the_proposal_is_refused_at_execution(fleet):
    attacker = init_repo(fleet["root"] / "attacker", commits=1)
    _scan(fleet)
    outside = fleet["tmp"] / "outside"
    outside.mkdir()
    direct = {"path": str(outside / "wt"), "branch": "side", "new_branch": True}
    assert _code(_propose, fleet, attacker, "worktree", direct) == "BAD_PATH"
    (fleet["root"] / "parent").mkdir()
    fleet["tmp"].joinpath("policy.toml").write_text("")
    made = _propose(fleet, attacker, "worktree", {"path": str(fleet["root"] / "parent" / "wt"),
                                                  "branch": "side", "new_branch": True})
    os.rmdir(fleet["root"] / "parent")
    os.symlink(outside, fleet["root"] / "parent")
    done = service.approve(fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "failed" and done["error"].startswith("STALE"), done["error"]
    assert list(outside.iterdir()) == []
    assert git(attacker, "branch", "--list", "side") == ""


# --- 2. auto runs nothing the repository defines ----------------------------------------------------------

@pytest.mark.slow
def test_auto_in_a_hooked_repo_runs_neutralized_and_no_marker_appears(fleet):
    marker = fleet["marker"]
    repo = _hooked_repo(fleet["root"] / "hooked", marker)
    _scan(fleet)
    _clear(marker)
    steps = [("stage", {"paths": ["README.md"]}),
             ("commit", {"message": "auto commit"}),
             ("branch", {"name": "feature", "checkout": True}),
             ("checkout", {"ref": "main"}),
             ("worktree", {"path": str(fleet["root"] / "hooked-wt"), "branch": "wt", "new_branch": True}),
             ("stash", {"include_untracked": True})]
    for op, args in steps:
        done = _propose(fleet, repo, op, args)
        assert done["status"] == "completed", (op, done["status"], done["error"], done["policy"])
        assert fired(marker) == [], (op, fired(marker))
        assert done["result"]["repo_code_skipped"], op        # said, never silent
    assert git(repo, "log", "-1", "--format=%s", "main").strip() == "auto commit"
    assert (fleet["root"] / "hooked-wt" / "src" / "app.py").exists()


def test_a_neutralized_commit_is_what_the_preview_showed(fleet):
    marker = fleet["marker"]
    repo = _hooked_repo(fleet["root"] / "hooked", marker)
    # a pre-commit hook that would add a file, and a commit-msg hook that would rewrite the message
    write(repo / ".git" / "hooks" / "pre-commit", "#!/bin/sh\necho sneaky > sneaky.txt\ngit add sneaky.txt\n")
    write(repo / ".git" / "hooks" / "commit-msg", "#!/bin/sh\necho rewritten > \"$1\"\n")
    git(repo, "add", "README.md")
    _scan(fleet)
    done = _propose(fleet, repo, "commit", {"message": "as shown"})
    assert done["status"] == "completed", done["error"]
    shown = sorted(f["path"] for f in done["preview"]["files"])
    committed = git(repo, "diff-tree", "--no-commit-id", "--name-only", "-r", "HEAD").split()
    assert committed == shown == ["README.md"]
    assert git(repo, "log", "-1", "--format=%s").strip() == "as shown"
    assert not (repo / "sneaky.txt").exists()


HOSTILE_CASES = [
    ("stage", {"all": True}, "pending"),
    ("commit", {"message": "x", "paths": ["data.txt"]}, "pending"),
    ("branch", {"name": "feature", "checkout": True}, "pending"),
    ("branch", {"name": "plain"}, "completed"),
    ("worktree", {"path": "WT", "branch": "wt", "new_branch": True}, "pending"),
    ("stash", {"include_untracked": True}, "pending"),
    ("merge", {"source": "origin/main"}, "pending"),
    ("reset", {"mode": "mixed", "target": "HEAD~1"}, "completed"),
    ("unstage", {"paths": ["data.txt"]}, "BAD_ARGUMENT"),
    ("checkout", {"ref": "side"}, "pending"),
]


@pytest.mark.parametrize("op,args,expect", HOSTILE_CASES,
                         ids=[f"{op}-{n}-{expect}" for n, (op, _, expect) in enumerate(HOSTILE_CASES)])
def test_auto_in_a_hostile_repo_runs_no_marker(fleet, op, args, expect):
    """The full hostile repo (filters, merge driver, hooks, every core.* program): an auto op whose result
    would change without the repository's filters or merge driver waits for a person; the others run
    neutralized (the restore point too); no command of the repository runs either way."""
    marker = fleet["marker"]
    repo = hostile_repo(fleet["tmp"], "evil", marker, root=fleet["root"])
    _scan(fleet)
    _clear(marker)
    if args.get("path") == "WT":
        args = {**args, "path": str(fleet["root"] / "evil-wt")}
    if expect == "BAD_ARGUMENT":                       # nothing staged: stage it as the person would
        git(repo, "add", "data.txt")
        expect = "completed"
    if op == "checkout":
        git(repo, "branch", "side", "HEAD~1")
    _clear(marker)
    done = _propose(fleet, repo, op, args)
    assert fired(marker) == [], fired(marker)
    assert done["status"] == expect, (done["status"], done["error"], done["policy"])
    if done["status"] == "pending":
        assert "defines" in done["policy"]["why"], done["policy"]     # downgraded, saying why
    kinds = {item["kind"] for item in done["preview"]["repo_code"]}
    assert {"hook", "filter", "merge driver", "program"} <= kinds


# --- 3. what a person approves: the preview lists it, the preflight does not lie --------------------------

def _driver_repo(fleet) -> Path:
    """A repo with a merge driver `evil` for *.ini, a smudge filter `x` and a pre-commit hook; a topic
    branch and main both change settings.ini far apart (git's own merge: clean)."""
    marker = fleet["marker"]
    repo = init_repo(fleet["root"] / "drv", commits=1)
    commit_file(repo, "settings.ini", "".join(f"k{i} = {i}\n" for i in range(20)), "settings")
    git(repo, "switch", "-q", "-c", "topic")
    commit_file(repo, "settings.ini", "k0 = topic\n" + "".join(f"k{i} = {i}\n" for i in range(1, 20)), "topic")
    git(repo, "switch", "-q", "main")
    commit_file(repo, "settings.ini", "".join(f"k{i} = {i}\n" for i in range(19)) + "k19 = main\n", "main")
    write(repo / ".gitattributes", "*.ini merge=evil\n*.bin filter=x\n")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-q", "-m", "attributes")
    driver = marker_script(repo / ".git" / "evil-merge", marker, "merge-driver")
    with open(repo / ".git" / "config", "a", encoding="utf-8") as fh:
        fh.write(f'[merge "evil"]\n\tdriver = {driver} %O %A %B\n[filter "x"]\n\tsmudge = cat\n')
    marker_script(repo / ".git" / "hooks" / "pre-commit", marker, "hook-pre-commit")
    _scan(fleet)
    return repo


def test_the_preview_lists_the_repository_code_that_will_run(fleet):
    repo = _driver_repo(fleet)
    fleet["tmp"].joinpath("policy.toml").write_text("")
    made = _propose(fleet, repo, "merge", {"source": "topic"})
    code = made["preview"]["repo_code"]
    assert {"kind": "hook", "name": "pre-commit"} in [{k: c[k] for k in ("kind", "name")} for c in code]
    driver = next(c for c in code if c["kind"] == "merge driver")
    assert driver["name"] == "evil" and "*.ini" in driver["patterns"]
    smudge = next(c for c in code if c["kind"] == "filter")
    assert smudge["name"] == "x" and smudge["keys"] == ["smudge"] and "*.bin" in smudge["patterns"]


def test_merge_preflight_does_not_say_clean_when_a_repo_driver_applies(fleet):
    repo = _driver_repo(fleet)
    fleet["tmp"].joinpath("policy.toml").write_text("")
    made = _propose(fleet, repo, "merge", {"source": "topic"})
    flight = made["preview"]["preflight"]
    assert flight["result"] == "unknown", flight
    assert "evil" in flight["note"] and "settings.ini" in flight["driver_paths"]
    assert fired(fleet["marker"]) == []
    done = service.approve(fleet["index"], made["proposal_id"], "cli")   # the person's merge runs it
    assert "merge-driver" in fired(fleet["marker"]), done
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    git(repo, "switch", "-q", "topic")
    replay = _propose(fleet, repo, "rebase", {"onto": "main"})["preview"]["preflight"]
    assert replay["result"] == "unknown" and replay["builtin_result"] == "clean", replay
    assert replay["driver_paths"] == ["settings.ini"]


def test_auto_merge_with_a_repo_merge_driver_waits_for_a_person(fleet):
    repo = _driver_repo(fleet)
    made = _propose(fleet, repo, "merge", {"source": "topic"})
    assert made["status"] == "pending" and "merge driver" in made["policy"]["why"], made["policy"]
    assert fired(fleet["marker"]) == []


def test_a_hook_that_adds_a_file_is_reported_as_unexpected(fleet):
    repo = init_repo(fleet["root"] / "sneaky", commits=1)
    write(repo / ".git" / "hooks" / "pre-commit",
          "#!/bin/sh\necho payload > sneaky.sh\ngit add sneaky.sh\necho side > side.txt\n")
    os.chmod(repo / ".git" / "hooks" / "pre-commit", 0o755)
    write(repo / "README.md", "changed\n")
    git(repo, "add", "README.md")
    _scan(fleet)
    fleet["tmp"].joinpath("policy.toml").write_text("")
    made = _propose(fleet, repo, "commit", {"message": "only the readme"})
    assert [f["path"] for f in made["preview"]["files"]] == ["README.md"]
    done = service.approve(fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "completed"
    assert git(repo, "diff-tree", "--no-commit-id", "--name-only", "-r", "HEAD").split() == ["README.md", "sneaky.sh"]
    unexpected = {u["path"]: u for u in done["result"]["unexpected_changes"]}
    assert set(unexpected) == {"sneaky.sh", "side.txt"}, unexpected
    assert unexpected["sneaky.sh"]["where"] == "commit"


# --- 4. scope at execution --------------------------------------------------------------------------------

def test_a_repo_moved_out_of_the_roots_is_not_written(fleet):
    repo = init_repo(fleet["root"] / "movable", commits=1)
    write(repo / "README.md", "changed\n")
    _scan(fleet)
    fleet["tmp"].joinpath("policy.toml").write_text("")
    made = _propose(fleet, repo, "stage", {"paths": ["README.md"]})
    outside = fleet["tmp"] / "elsewhere"
    shutil.move(str(repo), str(outside))
    os.symlink(outside, repo)                       # the old path still leads there
    done = service.approve(fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "failed" and done["error"].startswith("STALE"), done["error"]
    assert git(outside, "diff", "--cached", "--name-only") == ""


def test_a_repo_replaced_by_another_at_the_same_path_is_not_written(fleet):
    repo = init_repo(fleet["root"] / "swapped", commits=1)
    write(repo / "README.md", "changed\n")
    _scan(fleet)
    fleet["tmp"].joinpath("policy.toml").write_text("")
    made = _propose(fleet, repo, "stage", {"paths": ["README.md"]})
    twin = fleet["tmp"] / "twin"
    shutil.copytree(repo, twin, symlinks=True)      # same refs, same files, another repository
    shutil.rmtree(repo)
    shutil.move(str(twin), str(repo))
    done = service.approve(fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "failed" and done["error"].startswith("STALE"), done["error"]
    assert "changed identity" in done["error"]
    assert git(repo, "diff", "--cached", "--name-only") == ""


# --- 5. shown to the person: `proposals show` and the dashboard's proposal page -------------------------

def test_proposals_show_and_the_dashboard_say_what_the_repository_defines(fleet, capsys):
    from starlette.testclient import TestClient

    from fleet.cli import main as cli_main
    from tests.fleets.serving import sign_in
    from tests.test_ops_web import BASE, TOKEN
    from web.app import create_app

    repo = _driver_repo(fleet)
    fleet["tmp"].joinpath("policy.toml").write_text("")
    pid = _propose(fleet, repo, "merge", {"source": "topic"})["proposal_id"]
    capsys.readouterr()
    assert cli_main(["--db", str(fleet["tmp"] / "fleet.db"), "proposals", "show", pid]) == 0
    shown = capsys.readouterr().out
    assert "this repository defines: pre-commit hook, " in shown
    assert "merge driver `evil` for *.ini" in shown and "smudge filter `x` for *.bin" in shown
    with TestClient(create_app(fleet["tmp"] / "fleet.db", TOKEN), base_url=BASE, follow_redirects=False) as c:
        sign_in(c, fleet["tmp"] / "fleet.db")
        page = c.get(f"/proposals/{pid}").text
    block = page.split('id="repo-code-title"', 1)[1].split("</section>", 1)[0]
    assert "pre-commit" in block and "merge driver <code>evil</code>" in block and "*.ini" in block


def test_the_persons_global_config_stays_trusted_under_auto(fleet):
    """git-lfs's filter and a global core.hooksPath are the person's: an auto stage and commit run them,
    also when the repository repeats the same filter (`git lfs install --local`)."""
    marker = fleet["marker"]
    hooks = fleet["tmp"] / "global-hooks"
    marker_script(hooks / "pre-commit", marker, "trusted-pre-commit")
    clean = f"touch {marker / 'trusted-clean'}; cat"
    write(fleet["tmp"] / "config" / "git" / "config",
          f'[filter "lfs"]\n\tclean = "{clean}"\n\tsmudge = cat\n\trequired = true\n[core]\n\thooksPath = {hooks}\n')
    repo = init_repo(fleet["root"] / "lfs", commits=1)
    with open(repo / ".git" / "config", "a", encoding="utf-8") as fh:
        fh.write(f'[filter "lfs"]\n\tclean = "{clean}"\n\tsmudge = cat\n')     # the same, repeated locally
    write(repo / ".gitattributes", "*.bin filter=lfs\n")
    write(repo / "blob.bin", "data\n")
    _scan(fleet)
    _clear(marker)
    staged = _propose(fleet, repo, "stage", {"all": True})
    assert staged["status"] == "completed" and staged["preview"]["repo_code"] == [], staged["preview"]["repo_code"]
    assert fired(marker) == ["trusted-clean"]
    done = _propose(fleet, repo, "commit", {"message": "with lfs"})
    assert done["status"] == "completed", done["error"]
    assert "trusted-pre-commit" in fired(marker)


def test_a_path_swapped_for_a_symlink_out_of_the_repo_is_stale(fleet):
    repo = init_repo(fleet["root"] / "paths", commits=1)
    write(repo / "sub" / "junk.txt", "junk\n")
    outside = fleet["tmp"] / "precious"
    write(outside / "junk.txt", "the person's file\n")
    _scan(fleet)
    fleet["tmp"].joinpath("policy.toml").write_text("")
    made = _propose(fleet, repo, "discard", {"paths": ["sub/junk.txt"], "include_untracked": True})
    shutil.rmtree(repo / "sub")
    os.symlink(outside, repo / "sub")
    done = service.approve(fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "failed" and done["error"].startswith("STALE"), done["error"]
    assert "leaves the repo through a symlink" in done["error"] and done["result"] == {"touched": False}
    assert (outside / "junk.txt").read_text() == "the person's file\n"


@pytest.mark.slow
def test_ordinary_runs_report_no_unexpected_change(fleet):
    """Without hooks, what the preview listed is all that changes: no false alarm on any everyday op."""
    fleet["tmp"].joinpath("policy.toml").write_text("")
    repo = init_repo(fleet["root"] / "plain", commits=2)
    git(repo, "branch", "topic", "HEAD~1")
    git(repo, "switch", "-q", "topic")
    commit_file(repo, "topic.txt", "t\n")
    git(repo, "switch", "-q", "main")
    write(repo / "README.md", "edited\n")
    write(repo / "new.txt", "new\n")
    _scan(fleet)
    for op, args in [("stage", {"all": True}), ("commit", {"message": "both"}), ("checkout", {"ref": "topic"}),
                     ("checkout", {"ref": "main"}), ("merge", {"source": "topic"}),
                     ("reset", {"mode": "hard", "target": "HEAD~1"}), ("branch", {"name": "x", "checkout": True})]:
        made = _propose(fleet, repo, op, args)
        done = service.approve(fleet["index"], made["proposal_id"], "cli")
        assert done["status"] == "completed", (op, done["error"])
        assert done["result"]["unexpected_changes"] == [], (op, done["result"]["unexpected_changes"])
    restored = service.undo(fleet["index"], made["proposal_id"], "cli")
    assert restored["result"]["unexpected_changes"] == [], restored["result"]


def test_auto_push_waits_for_a_person_when_a_pre_push_hook_exists(fleet):
    """git-lfs uploads its objects in pre-push: an auto push without it would publish pointers only."""
    marker = fleet["marker"]
    repo = with_upstream(fleet["tmp"], "pushed", ahead=1)
    shutil.move(str(repo), str(fleet["root"] / "pushed"))
    repo = fleet["root"] / "pushed"
    marker_script(repo / ".git" / "hooks" / "reference-transaction", marker, "hook-reference-transaction")
    _scan(fleet)
    done = _propose(fleet, repo, "push", {"remote": "origin", "branch": "main"})
    assert done["status"] == "completed", done["error"]
    assert fired(marker) == [] and git(repo, "rev-parse", "origin/main") == git(repo, "rev-parse", "main")
    commit_file(repo, "more.txt", "more\n")
    marker_script(repo / ".git" / "hooks" / "pre-push", marker, "hook-pre-push")
    _clear(marker)
    waiting = _propose(fleet, repo, "push", {"remote": "origin", "branch": "main"})
    assert waiting["status"] == "pending" and "pre-push hook" in waiting["policy"]["why"], waiting["policy"]
    assert fired(marker) == []

