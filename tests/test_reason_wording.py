"""Every reason's text reads right for counts 0, 1 and 2: no "branchs", no "1 files", no reason about 0."""

from __future__ import annotations

import re

import pytest

from fleet.attention import attention

OLD = "2000-01-01T00:00:00Z"
BAD = [re.compile(p) for p in (r"branchs|stashs|entrys", r"\b1 \w*(files|branches|commits|stashes|submodules)\b",
                               r"\b2 (file|branch|commit|stash|submodule)\b(?!e)", r"(?<![\w.])0 \w")]


def _record(n: int) -> dict:
    return {
        "branch": "main", "head": "a" * 40, "upstream": "origin/main", "ahead": n, "behind": n,
        "staged": n, "unstaged": n, "untracked": n, "conflicted": n, "operation": "merge" if n else None,
        "branches": [{"name": "main", "current": True}] + [
            {"name": f"{state}{i}", "current": False, "upstream": f"origin/{state}{i}", **counts}
            for state, counts in (("ahead", {"ahead": 1, "behind": 0}), ("behind", {"ahead": 0, "behind": 2}),
                                  ("diverged", {"ahead": 1, "behind": 1}),
                                  ("gone", {"ahead": None, "behind": None, "upstream_gone": True}))
            for i in range(n)],
        "stash_list": [{"at": OLD}] * n,
        "submodules": [{"path": f"lib{i}", "state": "drifted"} for i in range(n)],
        "worktrees": [{"path": f"/w/wt{i}", "branch": f"b{i}", "operation": "cherry-pick", "conflicted": n,
                       "staged": n, "unstaged": n, "untracked": n} for i in range(n)],
        "predicted_conflicts": {"clean": False, "paths": [f"f{i}" for i in range(n)]} if n else None,
    }


@pytest.mark.parametrize("n", [0, 1, 2])
def test_every_reason_reads_right(n: int):
    reasons = attention(_record(n))
    for variant in (_record(n), {**_record(n), "behind": 0}, {**_record(n), "ahead": 0}):
        reasons += attention(variant)
    texts = [r["summary"] for r in reasons] + [r["next_step"] for r in reasons]
    for text in texts:
        for bad in BAD:
            assert not bad.search(text), (bad.pattern, text)
    if n == 0:
        assert {r["code"] for r in reasons} == {"clean"}
    else:
        assert {"conflict", "predicted_conflict", "diverged", "ahead", "behind", "no_upstream", "stale_stash",
                "submodule", "local_changes"} <= {r["code"] for r in reasons}
        assert any("in worktree /w/wt0" in r["summary"] and r["next_step"].startswith("in /w/wt0: ")
                   for r in reasons)


@pytest.mark.parametrize("n", [1, 2, 4])
def test_no_next_step_leaves_a_placeholder(n: int):
    """Every branch named in a next step is the real one: `<branch>` / `<upstream>` never reach a person."""
    steps = [r["next_step"] for r in attention(_record(n)) + attention({**_record(n), "detached": True,
                                                                       "branch": None, "operation": None})]
    assert not [s for s in steps if "<" in s], steps
    joined = " | ".join(steps)
    assert "git push origin ahead0" in joined and "git branch -f behind0 origin/behind0" in joined
    assert "git rebase origin/diverged0 diverged0" in joined and "git branch -d gone0" in joined


def test_previews_count_in_english(tmp_path):
    """No "(1 file(s))": a preview counts as a person would say it."""
    from fleet.ops import service
    from tests.fleets.gitbuild import git
    from tests.fleets.ops_fleet import build

    fleet = build(tmp_path)
    git(fleet["work"], "add", "README.md")
    one = service.propose(fleet["index"], "codex", "commit", str(fleet["work"]), {"message": "m"}, "one file",
                          dry_run=True)["preview"]["summary"]
    two = service.propose(fleet["index"], "codex", "stage", str(fleet["work"]), {"all": True}, "two files",
                          dry_run=True)["preview"]["summary"]
    assert one == "commit on main (1 file)" and two == "stage 1 file" or two.endswith(" files")
    assert "(s)" not in one + two
    fleet["index"].close()
