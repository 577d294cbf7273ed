"""The person's terminal (`/dev/tty`, never stdin, which an agent's shell can pipe) and the one switch that
lets the person's own scripts decide without it (`[approval] noninteractive = true` in the settings file)."""

from __future__ import annotations

import contextlib
import io
from typing import Iterator, TextIO

from fleet.cli.output import shown
from fleet.errors import FleetError
from fleet.ops import confirm
from fleet.settings import load_settings, settings_path

NONINTERACTIVE = "[approval] noninteractive = true"


def noninteractive() -> bool:
    return bool(load_settings()["approval"]["noninteractive"])


@contextlib.contextmanager
def terminal(what: str, hint: str) -> Iterator[TextIO]:
    """The controlling terminal, read and written directly: a person at it answers, a pipe cannot."""
    try:  # unbuffered: a terminal cannot seek, which Python's buffered read-write files need
        tty = io.TextIOWrapper(io.FileIO("/dev/tty", "r+"), encoding="utf-8", errors="replace", write_through=True)
    except OSError:
        raise FleetError("NO_TERMINAL", f"{what} needs your terminal and this process has none; {hint}") from None
    with tty:
        yield tty


def hint(flag: str) -> str:
    """What a script can do instead of a terminal: pass the flag once the person set the switch."""
    if noninteractive():
        return f"a non-interactive approver is set up: pass {flag}"
    return f"for your own scripts set {NONINTERACTIVE} in {settings_path()}" + (f", then pass {flag}" if flag else "")



def ask_decision(verb: str, row: dict, text: str, yes: bool) -> None:
    """The person confirms `verb` (approve, reject, undo) of the proposal `row`, shown as `text`, on the
    terminal: `y`, or `yes` in full for a high-risk one (fleet/ops/confirm.py). `yes` (`--yes`) skips the
    question only for a non-interactive approver."""
    if yes and noninteractive():
        return
    with terminal(f"{verb} (it asks on /dev/tty)", hint("--yes")) as tty:
        if yes:
            tty.write(f"(--yes is ignored unless {NONINTERACTIVE} is set)\n")
        word = confirm.typed_word(confirm.decision_risk(verb, row.get("risk")))
        tty.write(shown(text) + "\n" + shown(f"{verb} this {row.get('risk')}-risk {row['op']}? type '{word}' to confirm: "))
        tty.flush()
        answer = tty.readline().strip().lower()
    if answer != word:
        raise FleetError("BAD_ARGUMENT", f"not confirmed: nothing to {verb}")
