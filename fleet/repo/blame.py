"""`git blame --porcelain` as line ranges grouped by the commit that last touched them.

A binary file (a NUL byte in its first 8,000 bytes: git's own test for "binary") is answered with
`binary: true` and no lines instead of raw bytes cut at newlines.
"""

from __future__ import annotations

import os
import re
from json.encoder import encode_basestring as _string
from typing import Any

from fleet.caps import Capped, check_int
from fleet.errors import FleetError
from fleet.git.revs import resolve_commit
from fleet.git.run import run, text
from fleet.repo.scope import resolve_file_in_repo
from fleet.repo.jsonbudget import Rows, Timeless, encode

_ONLY = re.compile(r"has only (\d+) lines?")
_INT_KEYS = {"author-time", "committer-time"}
_BOOL = {True: "true", False: "false"}
BINARY_PROBE = 8000  # bytes git looks at for a NUL byte (xdiff's buffer_is_binary)


# One blamed line: its header `<sha> <orig> <final>[ <count>]`, the `key value` lines git adds (the commit's
# details the first time it appears: git's usual ones matched field by field, any other lines as a block),
# then the line itself after a tab.
_ENTRY = re.compile(r"^([0-9a-f]{40,64}) (\d+) (\d+)(?: \d+)?\n"
                    r"(?:author (.*)\nauthor-mail (.*)\nauthor-time (\d+)\nauthor-tz (.*)\ncommitter (.*)\n"
                    r"committer-mail .*\ncommitter-time (\d+)\ncommitter-tz .*\nsummary (.*)\n"
                    r"(boundary\n)?(?:previous ([0-9a-f]+) (.*)\n)?filename (.*)\n"
                    r"|((?:[^\t\n].*\n|\n)*))"
                    r"\t(.*)$", re.M)


class Blame(Capped):
    file: str
    ref: str | None
    ref_sha: str | None
    binary: bool
    line_count: int | None
    start_line: int
    end_line: int | None
    ranges: list[dict]
    commits: list[dict]


def parse_porcelain(data: bytes) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """(line ranges in order: {start_line, end_line, sha, orig_start_line, lines}, the commits as answered
    (`_new_commit`) by sha in the order they first blame a line).

    Decoded once and matched in one pass at C speed (a commit's details too, when git printed its usual
    ones); a line joins the range before it when it has the same commit and follows it, so no per-line
    record is built."""
    ranges: list[dict[str, Any]] = []
    commits: dict[str, dict[str, Any]] = {}
    last_sha, next_line, lines = None, 0, []   # the range being built: its commit, the line that extends it
    for (sha, orig, final, author, mail, author_time, author_tz, committer, committer_time, summary,
         boundary, prev_sha, prev_file, filename, block, line_text) in _ENTRY.findall(text(data)):
        if author_time and sha not in commits:   # a commit's first line, with git's usual details in git's order
            commits[sha] = _new_commit(
                sha, author, mail.strip("<>") or None, int(author_time), author_tz, committer,
                int(committer_time), summary, bool(boundary),
                {"sha": prev_sha, "filename": prev_file} if prev_sha else None, filename)
        elif block or sha not in commits:   # details printed otherwise than usual, or none (not seen yet)
            commit = commits.get(sha)
            if commit is None:
                commit = commits[sha] = _new_commit(sha)
            _read_block(commit, block)
        line = int(final)
        if sha == last_sha and line == next_line:
            lines.append(line_text)
            ranges[-1]["end_line"] = line
        else:
            last_sha, lines = sha, [line_text]
            ranges.append({"start_line": line, "end_line": line, "sha": sha, "orig_start_line": int(orig),
                           "lines": lines})
        next_line = line + 1
    return ranges, commits


def _read_block(commit: dict[str, Any], block: str) -> None:
    """Fill `commit` from details git printed otherwise than usual (any order, other keys: skipped)."""
    for raw in block.split("\n"):
        key, _, value = raw.partition(" ")
        if key == "boundary":
            commit["boundary"] = True
        elif key == "previous":
            prev_sha, _, prev_file = value.partition(" ")
            commit["previous"] = {"sha": prev_sha, "filename": prev_file}
        elif key == "author-mail":
            commit["author_email"] = value.strip("<>") or None
        elif key in _FIELDS:
            commit[_FIELDS[key]] = int(value) if key in _INT_KEYS else value


# git's details that the answer keeps (author-mail is handled apart: its <> are dropped).
_FIELDS = {"author": "author", "author-time": "author_time", "author-tz": "author_tz", "committer": "committer",
           "committer-time": "committer_time", "summary": "summary", "filename": "filename"}


def _new_commit(sha: str, author: str | None = None, author_email: str | None = None,
                author_time: int | None = None, author_tz: str | None = None, committer: str | None = None,
                committer_time: int | None = None, summary: str | None = None, boundary: bool = False,
                previous: dict[str, str] | None = None, filename: str | None = None) -> dict[str, Any]:
    return {"sha": sha, "uncommitted": not sha.strip("0"), "author": author, "author_email": author_email,
            "author_time": author_time, "author_tz": author_tz, "committer": committer,
            "committer_time": committer_time, "summary": summary, "boundary": boundary, "previous": previous,
            "filename": filename}


def _commit_json(commit: dict[str, Any]) -> str:
    """A commit's compact JSON once its times are ISO strings, byte for byte what encode() gives, written at
    once rather than key by key. Its sha (hex: the entry pattern's) and ISO times have nothing to escape and
    are written as they are; a commit with any other value (a time no calendar
    holds is None, a commit git described otherwise may lack details) is left to encode()."""
    author_time, committer_time, previous = commit["author_time"], commit["committer_time"], commit["previous"]
    if type(author_time) is not str or type(committer_time) is not str:
        return encode(commit)
    try:
        return (f'{{"sha":"{commit["sha"]}","uncommitted":{_BOOL[commit["uncommitted"]]},'
                f'"author":{_string(commit["author"])},"author_email":{_string(commit["author_email"])},'
                f'"author_time":"{author_time}","author_tz":{_string(commit["author_tz"])},'
                f'"committer":{_string(commit["committer"])},"committer_time":"{committer_time}",'
                f'"summary":{_string(commit["summary"])},"boundary":{_BOOL[commit["boundary"]]},'
                f'"previous":{"null" if previous is None else _previous_json(previous)},'
                f'"filename":{_string(commit["filename"])}}}')
    except TypeError:   # a None where a string usually is: encode_basestring takes only strings
        return encode(commit)


def _previous_json(previous: dict[str, str]) -> str:
    """git's `previous <sha> <file>` as JSON (its sha escaped too: one read from a details block in another
    shape than git's usual is not checked to be hex)."""
    return f'{{"sha":{_string(previous["sha"])},"filename":{_string(previous["filename"])}}}'


def _range_json(line_range: dict[str, Any]) -> str:
    """A range's compact JSON, byte for byte what encode() gives (its sha is hex: written as it is)."""
    lines = ",".join(map(_string, line_range["lines"]))
    return (f'{{"start_line":{line_range["start_line"]},"end_line":{line_range["end_line"]},'
            f'"sha":"{line_range["sha"]}","orig_start_line":{line_range["orig_start_line"]},'
            f'"lines":[{lines}]}}')


def repo_blame(path: str, file: str, ref: str | None = None, start_line: int | None = None,
               end_line: int | None = None, ignore_whitespace: bool = False, detect_moves: bool = False,
               max_lines: int = 200) -> Blame:
    """Who last changed each line of `file` (at `ref`, or in the working tree when `ref` is None).

    An `end_line` past the end of the file is clamped (as git does); a `start_line` past it is an error.
    At most `max_lines` lines are blamed from `start_line` on; `truncated` says when the range was cut.
    """
    rel = resolve_file_in_repo(path, file)
    check_int(max_lines, "max_lines", 1, 5000)
    start = check_int(start_line, "start_line", 1, 10**9) if start_line is not None else 1
    end = check_int(end_line, "end_line", 1, 10**9) if end_line is not None else None
    if end is not None and end < start:
        raise FleetError("BAD_ARGUMENT", "end_line must not be before start_line")
    asked_end = end
    end = start + max_lines - 1 if end is None else min(end, start + max_lines - 1)
    args = ["blame", "--porcelain", "--no-textconv", f"-L{start},{end}"]
    if ignore_whitespace:
        args.append("-w")
    if detect_moves:
        args += ["-M", "-C"]
    sha = resolve_commit(path, ref, "ref") if ref is not None else None
    data = _content(path, sha, rel)
    if data is not None and b"\0" in data[:BINARY_PROBE]:
        return {"file": rel, "ref": ref, "ref_sha": sha, "binary": True, "line_count": None, "start_line": start,
                "end_line": None, "ranges": [], "commits": [], "truncated": False, "omitted_count": 0,
                "note": "binary file: git blame has no lines to show"}
    args += ([sha] if sha else []) + ["--", rel]
    result = run(path, args, check=False)
    if result.returncode != 0:
        only = _ONLY.search(result.stderr)
        if only:
            raise FleetError("BAD_ARGUMENT", f"start_line {start} is past the end of {rel} "
                                             f"({only.group(1)} lines)")
        if "no such path" in result.stderr or "no such file" in result.stderr.lower():
            raise FleetError("NOT_FOUND", f"{rel} does not exist at {ref or 'the working tree'}")
        message = result.stderr.strip().splitlines()[0] if result.stderr.strip() else "git blame failed"
        raise FleetError("GIT_FAILED", message)
    ranges, commits = parse_porcelain(result.stdout)
    last_line = ranges[-1]["end_line"] if ranges else None
    total = 0 if not ranges or data is None else data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
    wanted_last = min(asked_end, total) if asked_end is not None else total
    omitted = max(0, wanted_last - (last_line if ranges else start - 1))
    return {"file": rel, "ref": ref, "ref_sha": sha, "binary": False, "line_count": total,
            "start_line": start, "end_line": last_line, "ranges": Timeless(ranges, _range_json),
            "commits": Rows(commits.values(), ("author_time", "committer_time"), _commit_json),
            "truncated": omitted > 0, "omitted_count": omitted}


def _content(path: str, sha: str | None, rel: str) -> bytes | None:
    """The blamed version of the file (working tree or `sha`), or None when it does not exist there (blame
    then says so itself)."""
    if sha is None:
        try:
            with open(os.path.join(path, rel), "rb") as fh:
                return fh.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise FleetError("NOT_FOUND", f"cannot read {rel}: {exc.strerror}") from exc
    result = run(path, ["cat-file", "blob", f"{sha}:{rel}"], check=False)
    return result.stdout if result.returncode == 0 else None
