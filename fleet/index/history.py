"""Commit subjects from recent history, for fleet search.

Reflogs record only what happened in this clone (the person's own commits, checkouts, fetches); a subject
from history (a colleague's commit, a merged PR) is found here: the last `WINDOW_DAYS` days of every local
and remote-tracking branch, at most `MAX_PER_REPO` commits a repo. It is indexed incrementally: a repo is
re-read with one `git log` only when its signature (its branch heads and newest reflog line in the index)
moved since the last time, and a sync stops after `BUDGET_S` seconds (the rest waits for the next search;
the result says how many repos are pending).
"""

from __future__ import annotations

import hashlib
import logging
import time

from fleet.git.run import GitError, run_git
from fleet.index.store import Index

WINDOW_DAYS = 90
MAX_PER_REPO = 5000
BUDGET_S = 3.0
_FORMAT = "--format=%H%x00%ct%x00%an%x00%s"
log = logging.getLogger("fleetdeck.history")


def _signatures(index: Index) -> dict[int, tuple[str, str]]:
    """{repo id: (path, signature)} for every readable repo on disk (one whose last read failed, out of scope
    included, is left alone): what its history rows must reflect."""
    rows = index.conn.execute(
        "select r.id, r.path, r.head, (select group_concat(b.name || '=' || ifnull(b.head, ''), ',') from"
        " (select name, head from branches where repo_id = r.id order by name) b),"
        " (select max(id) from reflog where repo_id = r.id) from repos r where r.gone = 0 and r.error is null"
    ).fetchall()
    return {rid: (path, hashlib.sha1(f"{head}|{heads}|{top}".encode()).hexdigest())
            for rid, path, head, heads, top in rows}


def _read(path: str, cutoff: int) -> tuple[list[tuple[str, int, str, str]], bool]:
    """(sha, committer time, author, subject) of the window's commits, newest first; and whether capped."""
    data = run_git(path, ["log", "--branches", "--remotes", f"--since={cutoff}", f"--max-count={MAX_PER_REPO + 1}",
                          "--no-decorate", "-z", _FORMAT], timeout=20).stdout
    fields = data.split(b"\0")
    rows = []
    for i in range(0, len(fields) - 3, 4):
        sha, when, author, subject = (f.decode("utf-8", "replace") for f in fields[i:i + 4])
        if len(sha) >= 40 and when.isdigit():
            rows.append((sha, int(when), author, subject))
    return rows[:MAX_PER_REPO], len(rows) > MAX_PER_REPO


def sync_history(index: Index, budget_s: float = BUDGET_S) -> dict:
    """Bring every repo's history rows up to date (oldest first when over budget); returns
    `{repos, read, pending, since}` (`since`: unix seconds of the window's start)."""
    started = time.monotonic()
    cutoff = int(time.time()) - WINDOW_DAYS * 86400
    state = dict(index.conn.execute("select repo_id, signature from history_state"))
    wanted = _signatures(index)
    stale = [rid for rid, (_, sig) in wanted.items() if state.get(rid) != sig]
    pending = read = 0
    for rid in stale:
        if time.monotonic() - started > budget_s:
            pending += 1
            continue
        path, sig = wanted[rid]
        try:
            rows, capped = _read(path, cutoff)
        except GitError as exc:   # an unborn or broken repo has no history to add; try again when it moves
            log.debug("history of %s: %s", path, exc.message)
            rows, capped = [], False
        _store(index, rid, sig, rows, capped, cutoff)
        read += 1
    return {"repos": len(wanted), "read": read, "pending": pending, "since": cutoff}


def _store(index: Index, repo_id: int, signature: str, rows: list[tuple[str, int, str, str]], capped: bool,
           cutoff: int) -> None:
    """Add the new commits (FTS rows with them) and drop this repo's commits that left the window."""
    with index.write() as conn:
        old = conn.execute("select id, subject from commits where repo_id = ? and at < ?", (repo_id, cutoff)).fetchall()
        conn.executemany("insert into commit_search (commit_search, rowid, subject) values ('delete', ?, ?)", old)
        conn.executemany("delete from commits where id = ?", [(r[0],) for r in old])
        known = {r[0] for r in conn.execute("select sha from commits where repo_id = ?", (repo_id,))}
        for sha, at, author, subject in rows:
            if sha in known:
                continue
            cur = conn.execute("insert into commits (repo_id, sha, at, author, subject) values (?, ?, ?, ?, ?)",
                               (repo_id, sha, at, author, subject))
            conn.execute("insert into commit_search (rowid, subject) values (?, ?)", (cur.lastrowid, subject))
        conn.execute("insert or replace into history_state (repo_id, signature, indexed_at, capped) values (?, ?, ?, ?)",
                     (repo_id, signature, int(time.time()), int(capped)))
