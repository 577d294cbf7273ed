"""The one display rule (fleet/safetext.py), checked against Python's Unicode database, and the CLI using it
for a proposal: a CR, a bidi override and a zero-width space in a patch are shown as escapes, and the push
URL git will use and the commits it sends are printed outside any JSON."""

from __future__ import annotations

import json
import sys
import unicodedata

import pytest

from fleet.cli import main as cli_main
from fleet.safetext import diff_lines, json_safe, visible
from tests.fleets.gitbuild import bare_remote, commit_file, git
from tests.fleets.ops_fleet import propose


def test_every_format_control_and_separator_character_is_made_visible():
    hidden = [c for c in range(sys.maxunicode + 1)
              if unicodedata.category(chr(c)) in ("Cc", "Cf", "Zl", "Zp")]
    assert len(hidden) > 150
    assert [hex(c) for c in hidden if visible(chr(c)) == chr(c)] == []
    assert all(visible(chr(c)).isascii() for c in hidden)


@pytest.mark.parametrize("kept", ["plain ascii", "héllo wörld", "日本語", "emoji 🎉", "tab\tkept"])
def test_ordinary_text_is_unchanged(kept):
    assert visible(kept, keep="\t") == kept


def test_json_escapes_round_trip():
    value = {"k": "tag\U000e0041 bidi\u202e zw\u200b del\x7f"}
    shown = json_safe(json.dumps(value, ensure_ascii=False))
    assert json.loads(shown) == value and "\u202e" not in shown and "\U000e0041" not in shown


def test_diff_lines_read_a_diff_as_git_does():
    diff = ("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1,3 @@\n+++not a header\n ctx\r hidden\n"
            "-gone\n\\ No newline at end of file\n+tail\n")
    assert diff_lines(diff) == [
        ("d-meta", "diff --git a/x b/x"), ("d-meta", "--- a/x"), ("d-meta", "+++ b/x"),
        ("d-hunk", "@@ -1,2 +1,3 @@"), ("d-add", "+++not a header"), ("d-ctx", " ctx\\x0d hidden"),
        ("d-del", "-gone"), ("d-meta", "\\ No newline at end of file"), ("d-add", "+tail")]


def show(fleet, capsys, *args: str) -> str:
    capsys.readouterr()
    assert cli_main(["--db", str(fleet["db"]), "proposals", *args]) == 0
    return capsys.readouterr().out


def test_cli_shows_a_proposal_with_every_character_visible(ops_fleet, capsys):
    patch = ("diff --git a/src/app.py b/src/app.py\n--- a/src/app.py\n+++ b/src/app.py\n@@ -1 +1,2 @@\n"
             " print('one')\n+x = 1\rimport os  # pay\u200bme \u202efdp.sh\n")
    made = propose(ops_fleet, "patch", {"patch": patch})
    out = show(ops_fleet, capsys, "show", made["proposal_id"])
    assert "+x = 1\\x0dimport os  # pay\\u200bme \\u202efdp.sh" in out
    assert not {"\r", "\u200b", "\u202e"} & set(out)
    whole = show(ops_fleet, capsys, "patch", made["proposal_id"])
    assert whole.count("\n") == patch.count("\n") and "\\x0d" in whole and "\r" not in whole


def test_cli_shows_where_a_push_goes_and_what_it_sends(ops_fleet, capsys, tmp_path):
    work = ops_fleet["work"]
    remote, elsewhere = bare_remote(tmp_path / "r.git"), bare_remote(tmp_path / "pushed-here.git")
    git(work, "remote", "add", "origin", str(remote))
    git(work, "push", "-q", "-u", "origin", "main")
    git(work, "config", "remote.origin.pushurl", str(elsewhere))
    commit_file(work, "p.txt", "p\n", "the commit sent")
    made = propose(ops_fleet, "push", {})
    out = show(ops_fleet, capsys, "show", made["proposal_id"])
    assert f"pushes to: {elsewhere}" in out and "commits_sent: " in out and "the commit sent" in out
