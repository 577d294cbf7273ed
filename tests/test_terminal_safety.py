"""Text from repositories reaches the terminal as text: no rich markup, no raw ESC/OSC/C1/bidi controls.

A fleet of hostile names and messages built with real git: a repo named `[/x]` (a rich markup error), one
named `[link=…]…[/link]` (markup), one whose folder name carries an OSC 52 clipboard write, commit messages
with CSI, OSC 52, a one-byte C1 CSI and a bidi override. Every printing command is run as a user runs it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet.safetext import md_code, md_text, visible
from tests.fleets.cli import run_cli
from tests.fleets.gitbuild import commit_file, git, init_repo, write

OSC52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"
CSI_CLEAR = "\x1b[2J"
C1_CSI = "\u009b31m"
BIDI = "\u202eevil"
RAW = ("\x1b", "\x07", "\u009b", "\u202e")
MARKUP_NAME = "[link=https:∕∕evil.example]click[/link]".replace("/", "∕")  # one folder: no "/" in it
OSC_NAME = f"clip{OSC52}board"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("hostile-text")
    root = base / "fleet"
    init_repo(root / "[" / "x]", commits=1)  # fleet name "[/x]"
    closing = init_repo(root / "[" / "x]" / ".." / ".." / "[slash]", commits=1)
    write(closing / "dirty.txt", "x\n")
    markup = init_repo(root / MARKUP_NAME, commits=1)
    write(markup / "dirty.txt", "x\n")
    osc = init_repo(root / OSC_NAME, commits=1)
    write(osc / "dirty.txt", "x\n")
    msgs = init_repo(root / "messages", commits=1)
    commit_file(msgs, "a.txt", "a\n", f"subject {OSC52} {CSI_CLEAR} {C1_CSI} {BIDI}")
    commit_file(msgs, "b.txt", "b\n", f"dropped {OSC52}{BIDI}")
    git(msgs, "reset", "-q", "--hard", "HEAD~1")  # the second commit is now recoverable (`lost`)
    write(msgs / "dirty.txt", "x\n")
    db = base / "fleet.db"
    run("scan", str(root), db=db)
    return db


def run(*args: str, db: Path) -> str:
    proc = run_cli(*args, db=db, text=False, env={"COLUMNS": "500"})
    out = proc.stdout.decode("utf-8") + proc.stderr.decode("utf-8")
    assert proc.returncode == 0, out
    return out


def assert_inert(out: str) -> None:
    for raw in RAW:
        assert raw not in out, f"raw {raw!r} reached the terminal"


@pytest.mark.parametrize("command", [("repos",), ("repos", "--all"), ("radar",), ("radar", "--all"),
                                     ("lost",), ("digest", "--since", "0", "--format", "md"), ("roots",)])
def test_every_printer_is_inert(hostile, command):
    out = run(*command, db=hostile)
    assert_inert(out)
    assert "\\x1b" in out or command == ("roots",)  # controls are shown, not dropped


def test_markup_in_names_prints_as_text(hostile):
    for command in (("repos",), ("radar",)):
        out = run(*command, db=hostile)
        assert "[/x]" in out and MARKUP_NAME in out and "[slash]" in out
        assert "\\x1b]52;c;ZWNobyBwd25lZA==\\x07" in out


def test_lost_and_digest_show_hostile_messages_visibly(hostile):
    lost = run("lost", db=hostile)
    assert "dropped \\x1b]52;c;ZWNobyBwd25lZA==\\x07\\u202eevil" in lost
    md = run("digest", "--since", "0", "--format", "md", db=hostile)
    assert "\\\\x1b\\]52;c;ZWNobyBwd25lZA==\\\\x07" in md  # visible, and Markdown-escaped
    assert "\\[link=https:∕∕evil.example\\]click\\[∕link\\]" in md
    assert "\\u202eevil" in md and "\\x9b31m" in md


def test_json_keeps_the_values_and_escapes_the_controls(hostile):
    for args in (("repos", "--json"), ("radar", "--json"), ("lost", "--json"),
                 ("digest", "--since", "0", "--format", "json")):
        out = run(*args, db=hostile)
        assert_inert(out)
        json.loads(out)
    names = {r["name"] for r in json.loads(run("repos", "--json", db=hostile))}
    assert {"[/x]", OSC_NAME, MARKUP_NAME} <= names
    events = json.loads(run("digest", "--since", "0", "--format", "json", db=hostile))["events"]
    assert any(BIDI in (e["message"] or "") and C1_CSI in (e["message"] or "") for e in events)


def test_the_helpers():
    assert visible("a\x1bb\u009bc\u202ed\te\x7f") == "a\\x1bb\\x9bc\\u202ed\\x09e\\x7f"
    assert visible(None) == "" and visible("café ✓") == "café ✓"
    assert md_text("[x](javascript:y) *b* <i>|") == "\\[x\\](javascript:y) \\*b\\* \\<i>\\|"  # a lone > is inert
    # plain text in a plain-text mail stays plain: nothing here can start markup
    assert md_text("reset: moving to HEAD~1 (a < b && c > d)") == "reset: moving to HEAD~1 (a < b && c > d)"
    assert md_text("~~gone~~ <b>&amp;") == "\\~\\~gone\\~\\~ \\<b>\\&amp;"
    assert md_code("a`b") == "``a`b``" and md_code("`x") == "`` `x ``"
