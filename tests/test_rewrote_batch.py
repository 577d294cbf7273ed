"""`rewrote_all` (one cat-file per repo, merge-base only when the graph cannot tell) agrees with git's own
`merge-base --is-ancestor` on every line of a reflog full of commits, amends, resets, rebases and pulls."""

from __future__ import annotations

import subprocess

from hypothesis import given, settings
from hypothesis import strategies as st
import pytest

from fleet.git import files as gitfiles
from fleet.index import events
from fleet.index.events import rewrote_all
from tests.fleets.gitbuild import commit_file, git, init_repo


def _oracle(repo, old, new) -> int | None:
    if old is None or new is None or old == new:
        return 0
    code = subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", old, new],
                          capture_output=True).returncode
    return {0: 0, 1: 1}.get(code)


def test_batched_verdicts_match_merge_base(tmp_path, monkeypatch):
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    repo = init_repo(tmp_path / "repo", commits=3)
    git(repo, "remote", "add", "origin", str(remote))
    git(repo, "push", "-q", "-u", "origin", "main")
    for i in range(3):
        commit_file(repo, f"f{i}.txt", f"{i}\n")
    git(repo, "commit", "-q", "--amend", "-m", "amended")
    git(repo, "reset", "-q", "--hard", "HEAD~2")
    git(repo, "reset", "-q", "--hard", "HEAD@{1}")  # forward again: old is an ancestor of new
    git(repo, "checkout", "-q", "-b", "topic", "HEAD~3")
    commit_file(repo, "t.txt", "t\n")
    git(repo, "rebase", "-q", "main")
    git(repo, "checkout", "-q", "main")
    git(repo, "reset", "-q", "--hard", "topic")
    git(repo, "reset", "-q", "--hard", "origin/main")   # far back, past commits no reflog line names
    git(repo, "pull", "-q", "--ff-only")
    git(repo, "update-ref", "-m", "made up", "refs/heads/main", "HEAD~1")  # kind "other"
    moves, expected = [], []
    for ref, path in gitfiles.reflog_files(str(repo / ".git"), str(repo / ".git")):
        for line in gitfiles.parse_reflog(open(path, "rb").read()):
            kind = gitfiles.reflog_kind(line.message)
            moves.append((line.old_sha, line.new_sha, kind))
            expected.append(_oracle(repo, line.old_sha, line.new_sha) if kind in
                            ("amend", "reset", "rebase", "pull", "other") else 0)
    assert len(moves) > 20 and 1 in expected and expected.count(0) > expected.count(1)
    assert rewrote_all(str(repo), moves) == expected
    monkeypatch.setattr(events, "HISTORY_CAP", 3)  # a "big" repo: cat-file graph first, merge-base for the rest
    assert rewrote_all(str(repo), moves) == expected
    # a move naming an object that is gone: git cannot tell, and neither may the batch
    assert rewrote_all(str(repo), [("1" * 40, moves[-1][1], "reset")]) == [None]


def _runs(repo) -> list[tuple[str, list[tuple]]]:
    """(ref, its lines in file order, as `reflog_fields` gives them) of every reflog of `repo`."""
    return [(ref, gitfiles.reflog_fields(open(path, "rb").read()))
            for ref, path in gitfiles.reflog_files(str(repo / ".git"), str(repo / ".git"))]


@pytest.mark.slow
def test_verdicts_settled_from_reflog_lines_agree_with_merge_base(tmp_path):
    """Every move `settle_by_lines` answers without git agrees with `merge-base --is-ancestor`, over amends,
    resets back and forth, rebases (onto a known tip, onto a fresh fetch, `--root`, with a fixup), pulls
    (fast-forward and `--rebase`), cherry-picks and a made-up message; and it settles most of them."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    other = init_repo(tmp_path / "other", commits=2)
    git(other, "remote", "add", "origin", str(remote))
    git(other, "push", "-q", "-u", "origin", "main")
    repo = tmp_path / "repo"
    git(tmp_path, "clone", "-q", str(remote), str(repo))
    for i in range(3):
        commit_file(repo, f"f{i}.txt", f"{i}\n")
    git(repo, "commit", "-q", "--amend", "-m", "amended")
    git(repo, "reset", "-q", "--hard", "HEAD~2")
    git(repo, "reset", "-q", "--hard", "HEAD@{1}")
    git(repo, "reset", "-q", "--hard", "HEAD^")
    git(repo, "checkout", "-q", "-b", "topic", "HEAD~1")
    commit_file(repo, "t.txt", "t\n")
    commit_file(repo, "t2.txt", "t2\n")
    git(repo, "rebase", "-q", "main")                       # onto a tip the log knew
    env_editor = "sed -i -e '2s/^pick/fixup/'"
    git(repo, "-c", f"sequence.editor={env_editor}", "rebase", "-q", "-i", "HEAD~2")
    git(repo, "rebase", "-q", "--root")                     # starts on a commit it makes itself
    git(repo, "checkout", "-q", "main")
    commit_file(other, "o.txt", "o\n")
    git(other, "push", "-q")
    git(repo, "pull", "-q", "--rebase")                     # onto a commit fetched just now
    commit_file(other, "o2.txt", "o2\n")
    git(other, "push", "-q")
    git(repo, "reset", "-q", "--hard", "origin/main")
    git(repo, "pull", "-q", "--ff-only")
    git(repo, "cherry-pick", "topic")
    git(repo, "reset", "-q", "--hard", "topic")
    git(repo, "update-ref", "-m", "made up", "refs/heads/main", "HEAD~1")
    runs = _runs(repo)
    lines = [(ref, old, new, kind, message) for ref, run in runs for old, new, _who, _at, _tz, message, kind in run]
    expected = [_oracle(repo, old, new) if kind in events.REWRITE_KINDS else 0
                for _ref, old, new, kind, _msg in lines]
    settled = events.settle_by_lines(runs)
    asked = [n for n, (_r, old, new, kind, _m) in enumerate(lines)
             if kind in events.REWRITE_KINDS and old and new and old != new]
    assert len(asked) > 15 and 1 in expected and 0 in [expected[n] for n in asked]
    wrong = [(lines[n], settled[n], expected[n]) for n in range(len(lines))
             if settled[n] != events.UNSETTLED and settled[n] != expected[n]]
    assert wrong == []
    assert sum(settled[n] != events.UNSETTLED for n in asked) > len(asked) // 2
    assert events.UNSETTLED in settled  # the made-up move and the --root pick are git's to answer
    assert events.rewrote_lines(str(repo), runs) == expected


_STARTS = ["", "commit: ", "commit (amend): ", "commit (merge): ", "commit (initial): ", "merge origin/main: ",
           "reset: moving to ", "reset: moving to HEAD~", "reset: moving to @^", "rebase (pick): ",
           "rebase -i (fixup): ", "rebase -i (squash): ", "rebase (start): ", "pull --rebase (start): ",
           "pull: Fast-forward", "pull origin main: Fast-forward", "pull: fast-forward", "fetch origin: fast-forward",
           "fetch: fast-forward", "checkout: moving from a to b", "cherry-pick: ", "branch: Created from HEAD",
           "made up (pick): ", "x (fixup): ", "update by push"]


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(st.sampled_from(_STARTS), st.text(alphabet="HEAD@~^0123456789 :()-abFfst", max_size=14),
       st.sampled_from(["", ": ", "): ", " (start): x", "ast-forward", ": Fast-forward"]))
def test_a_message_a_pattern_accepts_always_passes_the_cheap_gate_before_it(start, middle, end):
    """`settle_by_lines` tries each message pattern only on a message whose kind and text hold the pattern's
    literal part: a gate that turned away a message the pattern accepts would change a verdict."""
    message = start + middle + end
    kind = gitfiles.reflog_kind(message)
    if events._FAST_FORWARD.fullmatch(message):
        assert "ast-forward" in message and kind in ("pull", "fetch")
    if events._BACK_TO_ANCESTOR.fullmatch(message):
        assert kind == "reset"
    if events._START.match(message):
        assert "(start): " in message
    if events._AMEND.match(message):
        assert "): " in message and (kind == "amend" or not message.startswith("commit (amend): "))
    if events._PICK.match(message):
        assert "(pick): " in message
    if message.startswith(events._CREATES_COMMIT):
        assert kind in events._COMMIT_KINDS
    if message.startswith("commit: "):
        assert kind == "commit"
    if message.startswith("commit (merge): "):
        assert kind == "merge"
