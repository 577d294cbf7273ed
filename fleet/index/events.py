"""Fleet events: every movement of HEAD (per worktree), of every branch and remote-tracking branch, once.

Events live in a table filled at ingest, right after the raw reflog lines are appended, and not in a plain
view over `reflog`, because:
- `rewrote` needs git (`merge-base --is-ancestor`) and must be answered while both commits still exist;
  a view cannot run git, and after a gc the answer is gone for good.
- git writes a commit on the checked-out branch twice (HEAD and the branch); de-duplicating once at ingest
  keeps the digest a plain indexed range scan (100,000 events in a few milliseconds).
- a deleted branch leaves no reflog at all (git deletes the log with the branch): only an ingest step that
  notices the branch went away can record the deletion, and with it the tip that may now be lost.
Events stay after git expires or deletes its reflogs; `prune_events` removes old ones only when asked.

The table (`event_rows`) holds what events are filtered and ordered by plus the id of the reflog line each
one records, not a copy of the line (a deleted branch's event, which has no line, keeps its own); the
`events` view joins the two and is what readers query.
"""

from __future__ import annotations

import re
import time
from itertools import chain, compress, groupby
from operator import itemgetter, not_
from typing import TYPE_CHECKING, Sequence

from fleet.git.run import GitError, run_git
from fleet.index.sqlrows import insert_rows, insert_values
from fleet.index.store import REFLOG_IDS_KEY, next_reflog_id

if TYPE_CHECKING:
    import sqlite3

    from fleet.index.store import Index, Prepared, Stored

KINDS = ("commit", "amend", "merge", "checkout", "pull", "reset", "rebase", "cherry_pick", "revert", "branch",
         "fetch", "other", "discarded")   # discarded: uncommitted work the safety net saw vanish (fleet/snapshot)
# Moves that may drop commits: `rewrote` is computed for these (other kinds only ever add commits).
REWRITE_KINDS = frozenset({"amend", "reset", "rebase", "pull", "other"})
DELETED_MESSAGE = "branch: deleted (seen by fleetdeck: git keeps no reflog of a deleted branch)"
PRUNED_KEY = "events_pruned_before"
REWOUND_KEY = "events_rewound"  # the lowest event id replaced since team mode's outbox last looked (a resend)
# A reflog row as the ingest writes it (fleet.index.store) and `record_events` reads it back: past the id, the
# repo and the ref, a line as `fleet.git.files.reflog_fields` gives it (what `settle_by_lines` reads).
LINE_COLUMNS = "id, repo_id, ref, old_sha, new_sha, identity, at, tz, message, kind"
EVENT_INSERT = "insert into event_rows (repo_id, ref, kind, at, rewrote, reflog_id)"  # an event of a reflog line
# The events of lines stored in the same write (`record_first_events`): (rewrote, line id) bound for each, the
# rest taken from the line's row (what EVENT_INSERT would be given from the line: no text bound per event).
# CROSS JOIN keeps the rows' order as the outer loop, so the events take their ids in that order.
_LINE_EVENT_INSERT = f"{EVENT_INSERT} select r.repo_id, r.ref, r.kind, r.at, v.column1, r.id from ("
_LINE_EVENT_JOIN = ") v cross join reflog r on r.id = v.column2"
HISTORY_CAP = 20_000  # commits one rev-list may list to settle a repo's moves at once
_MOVE = itemgetter(0, 1, 3)  # (old, new, at) of a line: what a HEAD line shares with its branch's twin


def is_head_ref(ref: str) -> bool:
    """HEAD of the main worktree (`HEAD`) or of a linked one (`worktrees/<id>/HEAD`)."""
    return ref == "HEAD" or (ref.startswith("worktrees/") and ref.endswith("/HEAD"))


def is_event_ref(ref: str) -> bool:
    return ref.startswith(("refs/heads/", "refs/remotes/")) or is_head_ref(ref)


def rewrote(path: str, old: str | None, new: str | None, kind: str) -> int | None:
    """1 when the old tip is not an ancestor of the new one, 0 when it is (or the kind cannot drop commits),
    None when git cannot tell (an object is already gone)."""
    if kind not in REWRITE_KINDS or old is None or new is None or old == new:
        return 0
    try:
        result = run_git(path, ["merge-base", "--is-ancestor", old, new], ok_codes=(0, 1), timeout=10)
    except GitError:
        return None
    return int(result.returncode == 1)


def rewrote_all(path: str, moves: list[tuple[str | None, str | None, str]]) -> list[int | None]:
    """`rewrote` for many (old, new, kind) moves of one repo, asking git as little as possible.

    Usually one `rev-list --parents` lists the whole ancestry of every commit the moves name, and each
    answer is a walk in that graph. A repo with more than HISTORY_CAP such commits, or where an object is gone,
    has the commits the moves name read in one `cat-file --batch` instead: a path from new down to old proves
    old is an ancestor (0); a path from old down to new, or an amend (same parents, other commit), proves it
    cannot be (1: the graph is acyclic); only the moves left (a rebase onto commits no reflog line names)
    cost one `merge-base --is-ancestor` each.
    """
    asked = [i for i, (old, new, kind) in enumerate(moves)
             if kind in REWRITE_KINDS and old is not None and new is not None and old != new]
    verdicts: list[int | None] = [0] * len(moves)
    if not asked:
        return verdicts
    tips = {sha for i in asked for sha in moves[i][:2]}
    history = _history(path, tips)
    if history is not None:
        olds = sorted({moves[i][0] for i in asked})
        reach, position = _reach_sets(history, olds), {sha: n for n, sha in enumerate(olds)}
        for i in asked:
            verdicts[i] = int(not reach[moves[i][1]] >> position[moves[i][0]] & 1)
        return verdicts
    parents = _parents(path, {sha for old, new, _ in moves for sha in (old, new) if sha})
    for i in asked:
        old, new, kind = moves[i]
        if parents.get(old) is None or parents.get(new) is None:
            verdicts[i] = None  # an object is gone (or never was a commit): merge-base could not tell either
        elif _reaches(parents, new, old):
            verdicts[i] = 0
        elif _reaches(parents, old, new) or parents[old] == parents[new]:
            verdicts[i] = 1
        else:
            verdicts[i] = rewrote(path, old, new, kind)
    return verdicts


# What git's own reflog messages say about a move, settled without asking git (see `settle_by_lines`).
_BACK_TO_ANCESTOR = re.compile(r"reset: moving to (?:HEAD|@)(?:~(?:[1-9][0-9]*)?|\^(?:[1-9][0-9]*)?)+")
_PICK = re.compile(r"[a-z -]*\(pick\): ")
_AMEND = re.compile(r"commit \(amend\): |[a-z -]*\((?:fixup|squash)\): ")
_START = re.compile(r"[^:]*\(start\): ")  # broad on purpose: it only ever withholds a verdict
_FAST_FORWARD = re.compile(r"pull(?: [^:]*)?: Fast-forward|(?:pull|fetch)(?: [^:]*)?: fast-forward")
_CREATES_COMMIT = ("commit: ", "commit (amend): ", "commit (merge): ", "commit (initial): ")
_COMMIT_KINDS = frozenset({"commit", "amend", "merge"})  # the kinds of the messages in _CREATES_COMMIT
UNSETTLED = -1
WALK_BUDGET = 4096  # known-ancestry steps one repo's lines may take before the rest is left to git


def settle_by_lines(groups: Sequence[tuple[str, Sequence[tuple]]]) -> list[int]:
    """`rewrote` for the moves git's own reflog lines already answer, UNSETTLED for the rest (git decides).

    `groups` are (ref, lines) runs, each ref's lines in file order, the lines as `fleet.git.files.reflog_fields`
    gives them: (old, new, identity, at, tz, message, kind), `kind` the message's `reflog_kind`; the verdicts
    follow the lines of all runs in turn. What git writes settles most moves a cold scan meets, with no git
    process:
    - `commit (amend)`, a rebase's `fixup`/`squash`: the new commit has the old one's parents, so the old one
      is not its ancestor (1);
    - `reset: moving to HEAD~n` / `HEAD^n`: the new tip is a proper ancestor of the old one (1);
    - a fast-forward of `pull` or its fetch: the new tip descends from the old one (0); so does a `rebase
      (pick)`'s new commit from the old one (0) — unless the old commit first appeared at the rebase's start
      (a `--root` rebase starts on a commit it makes itself, and its first pick replaces that one);
    - a move away from a commit `git commit` made (at its first line in that log) to a commit the log named
      at or before that line, or to a chain of `git commit` children of one: the new commit's ancestry
      existed before the old commit did, so cannot hold it (1);
    - a move whose old tip the lines show to be an ancestor of the new one (a chain of commits, fast-forwards,
      picks and resets back), e.g. a reset forward again after a reset back (0).
    """
    rewrite_kinds = REWRITE_KINDS
    if not any(kind in rewrite_kinds and old is not None and new is not None and old != new
               for _ref, lines in groups for old, new, _who, _at, _tz, _message, kind in lines):
        return [0] * sum(len(lines) for _ref, lines in groups)  # nothing that could drop commits
    # What a ref's lines say of a commit, keyed by sha in one set of tables per ref (the lines come in runs
    # of one ref: no (ref, sha) key to build for each of a fleet's lines): the first line naming it, the
    # `git commit` line that made it, whether it was first named as where a rebase or pull --rebase started.
    tables: dict[str, tuple[dict[str, int], dict[str, int], set[str]]] = {}
    parent: dict[str, str] = {}                    # commit -> its only parent, from a plain `git commit` line
    below: dict[str, list[str]] = {}               # commit -> commits the lines show to be its ancestors
    moves: list[tuple] = []                        # (position, old, new, kind, message, its ref's tables)
    # Every line of a fleet's history passes here: a message is matched against a pattern only when its kind
    # (the prefix `reflog_kind` read) and its text hold the pattern's literal part (necessary conditions: the
    # verdicts are the ones the patterns alone give).
    start = 0
    for ref, lines in groups:
        mine = tables.setdefault(ref, ({}, {}, set()))
        first_seen, created_at, from_start = mine
        for n, (old, new, _who, _at, _tz, message, kind) in enumerate(lines, start):
            if old is not None and old not in first_seen:
                first_seen[old] = n
            if new is None:
                continue
            if new not in first_seen:
                first_seen[new] = n
                if old != new:
                    if kind in _COMMIT_KINDS and message.startswith(_CREATES_COMMIT):
                        created_at[new] = n
                    elif "(start): " in message and _START.match(message):
                        from_start.add(new)
            if old is None or old == new:
                continue
            if kind in rewrite_kinds:  # settled once every line is read
                moves.append((n, old, new, kind, message, mine))
                continue
            if kind == "commit":
                if message.startswith("commit: "):
                    below.setdefault(new, []).append(old)
                    parent[new] = old
            elif kind == "merge":
                if message.startswith("commit (merge): "):
                    below.setdefault(new, []).append(old)
            elif kind == "fetch" and "ast-forward" in message and _FAST_FORWARD.fullmatch(message):
                below.setdefault(new, []).append(old)
        start += len(lines)
    verdicts = [0] * start
    unsettled: list[tuple[int, str, str]] = []     # (position, new, old) of the moves left, in line order
    for n, old, new, kind, message, (first_seen, created_at, from_start) in moves:
        verdicts[n] = verdict = _settle(old, new, kind, message, n, first_seen, created_at, from_start, parent)
        if verdict == 0:
            below.setdefault(new, []).append(old)
            continue
        if verdict == UNSETTLED:
            unsettled.append((n, new, old))
        if kind == "reset" and _BACK_TO_ANCESTOR.fullmatch(message):
            below.setdefault(old, []).append(new)
    budget = [WALK_BUDGET]
    for n, new, old in unsettled:
        if _descends(below, new, old, budget):
            verdicts[n] = 0
    return verdicts


def _settle(old: str, new: str, kind: str, message: str, n: int, first_seen: dict, created_at: dict,
            from_start: set, parent: dict) -> int:
    """`settle_by_lines`' verdict on the move of line `n` from what its ref's lines say (`first_seen`,
    `created_at`, `from_start`) and the `git commit` parents of all."""
    if kind == "amend" and message.startswith("commit (amend): ") or "): " in message and _AMEND.match(message):
        return 1
    if kind == "reset" and _BACK_TO_ANCESTOR.fullmatch(message):
        return 1
    if kind == "pull" and "ast-forward" in message and _FAST_FORWARD.fullmatch(message):
        return 0
    if "(pick): " in message and _PICK.match(message) and first_seen.get(old, n) < n and old not in from_start:
        return 0
    made = created_at.get(old)
    if made is not None:
        sha: str | None = new
        for _ in range(64):  # new, its parent, ... while each is a plain commit's child
            if first_seen.get(sha, n) <= made:
                return 1
            sha = parent.get(sha)
            if sha is None or sha == old:
                break
    return UNSETTLED


def _descends(below: dict[str, list[str]], start: str, target: str, budget: list[int]) -> bool:
    """True when the lines' known ancestry leads from `start` down to `target` (within the shared budget)."""
    seen, todo = {start}, [start]
    while todo and budget[0] > 0:
        budget[0] -= 1
        for parent in below.get(todo.pop(), ()):
            if parent == target:
                return True
            if parent not in seen:
                seen.add(parent)
                todo.append(parent)
    return False


def rewrote_lines(path: str, groups: Sequence[tuple[str, Sequence[tuple]]]) -> list[int | None]:
    """`rewrote` for every line of one repo's (ref, lines) runs (`settle_by_lines`' `groups`), in turn:
    settled from the lines where git's messages tell, by `rewrote_all` (one git batch) for the rest."""
    verdicts: list[int | None] = list(settle_by_lines(groups))
    if UNSETTLED in verdicts:  # most repos have every move settled: a scan in C before listing the others
        open_ = [n for n, verdict in enumerate(verdicts) if verdict == UNSETTLED]
        lines = [line for _ref, run in groups for line in run]
        for n, verdict in zip(open_, rewrote_all(path, [(lines[n][0], lines[n][1], lines[n][6]) for n in open_])):
            verdicts[n] = verdict
    return verdicts


def _history(path: str, tips: set[str]) -> dict[str, tuple[str, ...]] | None:
    """Every ancestor of `tips` with its parents (one `rev-list --parents`), or None when an object is gone or
    there are more than HISTORY_CAP of them."""
    if not all(len(sha) == 40 and sha.isalnum() for sha in tips):
        return None
    try:
        data = run_git(path, ["rev-list", "--parents", "--topo-order", f"--max-count={HISTORY_CAP + 1}", *sorted(tips), "--"],
                       timeout=30).stdout
    except GitError:
        return None
    lines = data.decode().splitlines()
    if len(lines) > HISTORY_CAP:
        return None
    graph: dict[str, tuple[str, ...]] = {}
    for line in lines:
        sha, *parents = line.split()
        graph[sha] = tuple(parents)
    return graph if tips <= graph.keys() else None


def _reach_sets(history: dict[str, tuple[str, ...]], targets: list[str]) -> dict[str, int]:
    """For every commit, the `targets` it reaches (itself included) as bit n for targets[n]: one pass over the
    graph, parents before children (`history` is in rev-list's topological order, children first)."""
    bit = {sha: 1 << n for n, sha in enumerate(targets)}
    reach: dict[str, int] = {}
    for sha in reversed(history):
        mask = bit.get(sha, 0)
        for parent in history[sha]:
            mask |= reach.get(parent, 0)
        reach[sha] = mask
    return reach


def _parents(path: str, shas: set[str]) -> dict[str, tuple[str, ...] | None]:
    """Each commit's parents as its object says (None: missing or not a commit), one `cat-file --batch`."""
    listing = "".join(sorted(sha + "\n" for sha in shas if len(sha) == 40 and sha.isalnum())).encode()
    try:
        data = run_git(path, ["cat-file", "--batch"], input_bytes=listing, timeout=30).stdout
    except GitError:
        return {}
    found: dict[str, tuple[str, ...] | None] = {}
    pos = 0
    while pos < len(data):
        end = data.index(b"\n", pos)
        header = data[pos:end].split()
        pos = end + 1
        if len(header) != 3:  # "<sha> missing"
            if header:
                found[header[0].decode()] = None
            continue
        size = int(header[2])
        body = data[pos:pos + size]
        pos += size + 1
        if header[1] != b"commit":
            found[header[0].decode()] = None
            continue
        head_part = body.split(b"\n\n", 1)[0]
        found[header[0].decode()] = tuple(line[7:47].decode() for line in head_part.split(b"\n")
                                          if line.startswith(b"parent "))
    return found


def _reaches(parents: dict[str, tuple[str, ...] | None], start: str, target: str) -> bool:
    """True when `target` is `start` or one of its ancestors through the commits in `parents`."""
    seen, todo = {start}, [start]
    while todo:
        sha = todo.pop()
        if sha == target:
            return True
        for parent in parents.get(sha) or ():
            if parent not in seen:
                seen.add(parent)
                todo.append(parent)
    return False


def record_events(index: "Index", repos: list[tuple[int, str]]) -> int:
    """Turn the new reflog lines of `repos` ((repo_id, path) pairs) into events; returns how many were added.

    Batched: one read of all new lines, the `rewrote` checks (git) outside any transaction, then one write
    transaction (a scan records a repo stored for the first time with its lines instead: `first_events`).
    Idempotent and safe to run from two processes: each repo's cursor (the last line turned into events) is
    read again under the write lock, and lines another process recorded meanwhile are left out.
    An event of a reflog line stores the line's id, not a copy of it (the `events` view joins them).
    """
    if not repos:
        return 0
    conn = index.conn
    paths = dict(repos)
    marks = ", ".join("?" * len(paths))
    lines = conn.execute(
        f"select {LINE_COLUMNS} from reflog r where r.repo_id in ({marks}) and r.id > ifnull((select reflog_id"
        " from event_cursor c where c.repo_id = r.repo_id), 0) order by r.id", list(paths)).fetchall()
    if not lines:
        with index.write() as conn:
            return _record_deleted_branches(conn, list(paths))
    cut = pruned_before(index)
    fresh = [ln for ln in lines if ln[6] >= cut and is_event_ref(ln[2])]
    by_repo: dict[int, list[tuple]] = {}
    for ln in fresh:
        by_repo.setdefault(ln[1], []).append(ln)
    verdicts: dict[int, int | None] = {}
    for repo_id, mine in by_repo.items():
        runs = [(ref, [ln[3:] for ln in run]) for ref, run in groupby(mine, itemgetter(2))]
        verdicts.update(zip((ln[0] for ln in mine), rewrote_lines(paths[repo_id], runs)))
    # A commit on the checked-out branch is written to HEAD's log and the branch's: keep the branch's line.
    branch_moves = {(ln[1], ln[3], ln[4], ln[6]) for ln in fresh if ln[2].startswith("refs/heads/")}
    renamed = {ln[1] for ln in fresh if ln[8].startswith("Branch: renamed ")}
    with index.write() as conn:
        # A repo never turned into events before has all its lines here: no need to look for older twins.
        cursors = dict(conn.execute(f"select repo_id, reflog_id from event_cursor where repo_id in ({marks})",
                                    list(paths)).fetchall())
        inserts: list[tuple] = []
        twins: list[tuple] = []
        for rid, repo_id, ref, old, new, _identity, at, _tz, message, kind in fresh:
            seen_before = repo_id in cursors
            if seen_before and rid <= cursors[repo_id]:
                continue  # another process turned this line into an event meanwhile
            if is_head_ref(ref):
                if (repo_id, old, new, at) in branch_moves or seen_before and conn.execute(
                        "select 1 from reflog where repo_id = ? and at = ? and ref like 'refs/heads/%' and"
                        " old_sha is ? and new_sha is ? limit 1", (repo_id, at, old, new)).fetchone():
                    continue  # the branch's own line says it (and names the branch)
            elif ref.startswith("refs/heads/") and seen_before:
                if repo_id in renamed and conn.execute(
                        "select 1 from events where repo_id = ? and at = ? and ref like 'refs/heads/%' and"
                        " ref != ? and old_sha is ? and new_sha is ? and message = ? limit 1",
                        (repo_id, at, ref, old, new, message)).fetchone():
                    continue  # history carried over by `git branch -m`: already recorded under the old name
                twins.append((repo_id, at, old, new))
            inserts.append((repo_id, ref, kind, at, verdicts[rid], rid))
        # HEAD's twin may have been read first, in an earlier pass: the branch's line replaces it
        gone: list[int] = []
        for twin in twins:
            gone += [r[0] for r in conn.execute(
                "delete from event_rows where id in (select id from events where repo_id = ? and at = ? and"
                " (ref = 'HEAD' or ref like 'worktrees/%/HEAD') and old_sha is ? and new_sha is ?) returning id",
                twin).fetchall()]
        removed = len(gone)
        if gone:  # a pushed twin must leave the hub too, and its id may be reused now: resend from it
            conn.execute("insert into meta (key, value) values (?, ?) on conflict (key) do update set"
                         " value = min(cast(value as integer), excluded.value)", (REWOUND_KEY, min(gone)))
        insert_rows(conn, EVENT_INSERT, inserts)
        added = len(inserts) - removed + _record_deleted_branches(conn, list(paths))
        last: dict[int, int] = {}
        for ln in lines:  # each repo's lines in id order
            last[ln[1]] = ln[0]
        conn.executemany("insert or replace into event_cursor (repo_id, reflog_id) values (?, ?)",
                         [(repo_id, max(rid, cursors.get(repo_id, 0))) for repo_id, rid in last.items()])
    return added


def first_events(path: str, logs: list[tuple[str, int, int, list[tuple]]],
                 cut: int) -> list[tuple[Sequence[int], list[int | None]]]:
    """The events of a repo's lines as it is stored for the first time, decided before the write (git may be
    asked whether a move rewrote history): per ref with events, (the positions of its event lines among all
    of `logs`' lines, whether each rewrote), in the lines' order; `record_first_events` makes the rows, the
    rest of each taken from its line's row. What `record_events` would record for them: with nothing held
    before, a HEAD line is left out only for its branch's twin among these same lines. `logs` are
    `fleet.index.reflogs.read_new_lines`'s."""
    groups: list[tuple[str, Sequence[int], list[tuple]]] = []  # (ref, positions, lines) of the event refs
    pos = 0
    for ref, _inode, _end, lines in logs:
        count = len(lines)
        if count and is_event_ref(ref):
            if cut:
                keep = [k for k, line in enumerate(lines) if line[3] >= cut]
                spots: Sequence[int] = [pos + k for k in keep]
                lines = [lines[k] for k in keep]
            else:
                spots = range(pos, pos + count)
            groups.append((ref, spots, lines))
        pos += count
    if not any(lines for _ref, _spots, lines in groups):
        return []
    verdicts = rewrote_lines(path, [(ref, lines) for ref, _spots, lines in groups])
    # A commit on the checked-out branch is written to HEAD's log and the branch's: keep the branch's line.
    branch_moves: set[tuple] = set()
    for ref, _spots, lines in groups:
        if ref.startswith("refs/heads/"):
            branch_moves.update(map(_MOVE, lines))
    events: list[tuple[Sequence[int], list[int | None]]] = []
    done = 0
    for ref, spots, lines in groups:
        mine = verdicts[done:done + len(lines)]
        done += len(lines)
        if is_head_ref(ref):  # which lines are not a twin, told in C (a cold scan's HEAD lines are most)
            kept = list(map(not_, map(branch_moves.__contains__, map(_MOVE, lines))))
            spots, mine = list(compress(spots, kept)), list(compress(mine, kept))
        if spots:
            events.append((spots, mine))
    return events


def record_first_events(conn: "sqlite3.Connection", stored: list["Stored"],
                        firsts: dict[int, list[tuple]]) -> set[int]:
    """Inside the store's transaction: the events `first_events` decided (`firsts`, by position in `stored`),
    for the repos stored for the first time with the lines they were decided on; returns those repo ids.
    The others (another process stored the repo meanwhile) are left to `record_events`; the caller checks
    that no `prune_events` came in between."""
    if not firsts:
        return set()
    values: list = []  # (rewrote, line id) of each event laid end to end: no tuple kept per event
    cursors: list[tuple[int, int]] = []
    done: set[int] = set()
    for n, item in enumerate(stored):
        events = firsts.get(n)
        if events is None or not item.first:
            continue
        done.add(item.repo_id)
        if item.lines:
            base = item.first_line
            for spots, verdicts in events:
                values += chain.from_iterable(zip(verdicts, map(base.__add__, spots)))
            cursors.append((item.repo_id, base + item.lines - 1))
    insert_values(conn, _LINE_EVENT_INSERT, 2, values, _LINE_EVENT_JOIN)
    conn.executemany("insert or replace into event_cursor (repo_id, reflog_id) values (?, ?)", cursors)
    # only a branch's log without the branch can make a deleted-branch event here
    orphans = [item.repo_id for item in stored if item.repo_id in done and _logs_without_branch(item.prepared)]
    if orphans:
        _record_deleted_branches(conn, orphans)
    return done


def _logs_without_branch(prepared: "Prepared") -> bool:
    names = {"refs/heads/" + b["name"] for b in prepared.record.get("branches", ())}
    return any(lines and ref.startswith("refs/heads/") and ref not in names
               for ref, _inode, _end, lines in prepared.logs)


def repo_events(index: "Index", repo_id: int, limit: int = 60) -> list[dict]:
    """One repo's newest `limit` events, newest first (`at` in unix seconds, `rewrote` None when unknown)."""
    rows = index.digest.repo_events(repo_id, limit)
    stashes = stash_times(index, [repo_id])
    return [as_stash({"id": r[0], "ref": r[1], "kind": r[2], "old_sha": r[3], "new_sha": r[4], "at": r[5],
                      "identity": r[6], "message": r[7], "rewrote": None if r[8] is None else bool(r[8])},
                     stashes.get((repo_id, r[5]))) for r in rows]


STASH_RESET = "reset: moving to HEAD"  # what `git stash` writes in HEAD's reflog as it saves a stash


def stash_times(index: "Index", repo_ids: list[int] | None) -> dict[tuple[int, int], str]:
    """(repo id, unix second) -> the message of each stash the repo still holds, made at that second."""
    from datetime import datetime

    out = {}
    for repo_id, at, message in index.digest.stashes(repo_ids):
        try:
            out[(repo_id, int(datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()))] = message or ""
        except (AttributeError, ValueError):
            continue
    return out


def as_stash(event: dict, stash_message: str | None) -> dict:
    """The `reset: moving to HEAD` that `git stash` writes (HEAD does not move) shown as the stash it was,
    when a stash made at that second is still there; any other event as it is."""
    if (stash_message is not None and event["kind"] == "reset" and event["message"] == STASH_RESET
            and event["old_sha"] == event["new_sha"]):
        return {**event, "kind": "stash", "message": f"stash: {stash_message}", "rewrote": False}
    return event


def _record_deleted_branches(conn, repo_ids: list[int]) -> int:
    """One `branch` event (new_sha null) for each branch with events that no longer exists."""
    marks = ", ".join("?" * len(repo_ids))
    gone = conn.execute(
        "select e.repo_id, e.ref, e.new_sha, e.message from events e join"
        f" (select max(id) id from event_rows where repo_id in ({marks}) and ref like 'refs/heads/%'"
        " group by repo_id, ref) last on last.id = e.id"
        " where not exists (select 1 from branches b where b.repo_id = e.repo_id and 'refs/heads/' || b.name = e.ref)",
        list(repo_ids)).fetchall()
    now = int(time.time())
    added = 0
    for repo_id, ref, tip, message in gone:
        if message == DELETED_MESSAGE or tip is None:
            continue
        renamed = conn.execute("select 1 from reflog where repo_id = ? and message like ? limit 1",
                               (repo_id, f"Branch: renamed {ref} to %")).fetchone()
        if renamed:
            continue
        conn.execute("insert into event_rows (repo_id, ref, kind, old_sha, new_sha, at, identity, message, rewrote)"
                     " values (?, ?, 'branch', ?, null, ?, null, ?, 0)", (repo_id, ref, tip, now, DELETED_MESSAGE))
        added += 1
    return added


def pruned_before(index: "Index") -> int:
    """The cut-off of the last `prune_events` (0: never pruned)."""
    try:
        return int(index.meta(PRUNED_KEY, 0))
    except (TypeError, ValueError):
        return 0


def prune_events(index: "Index", older_than_s: int, now: float | None = None) -> dict:
    """Delete events and raw reflog lines older than `older_than_s` seconds: the only way events go away.

    The cut-off is remembered, so lines git still holds (re-read after a reflog rewrite) do not come back.
    """
    cutoff = int((time.time() if now is None else now) - older_than_s)

    with index.write() as conn:
        upto = next_reflog_id(conn) - 1   # the highest id ever given
        events = conn.execute("delete from event_rows where at < ?", (cutoff,)).rowcount
        lines = conn.execute("delete from reflog where at < ?", (cutoff,)).rowcount
        index.set_meta(PRUNED_KEY, max(cutoff, pruned_before(index)))
        if lines:  # new lines must not take the ids of deleted ones (see fleet.index.store.next_reflog_id)
            index.set_meta(REFLOG_IDS_KEY, upto)
    return {"cutoff": cutoff, "events_deleted": events, "reflog_lines_deleted": lines}


def add_seen_event(index: "Index", repo_id: int, ref: str, kind: str, at: int, old_sha: str | None,
                   new_sha: str | None, identity: str | None, message: str | None) -> None:
    """Store an event fleetdeck saw itself, with no reflog line behind it (discarded work)."""
    with index.write() as conn:
        conn.execute("INSERT INTO event_rows (repo_id, ref, kind, at, rewrote, reflog_id, old_sha, new_sha,"
                     " identity, message) VALUES (?, ?, ?, ?, 0, NULL, ?, ?, ?, ?)",
                     (repo_id, ref, kind, at, old_sha, new_sha, identity, message))


def events_of_kind(index: "Index", kind: str, since: float | None = None,
                   repo_ids: list[int] | None = None) -> list[tuple]:
    """(repo name, repo path, at, old, new, identity, message) of every `kind` event, newest first."""
    return index.digest.of_kind(kind, since, repo_ids)


def count_of_kind(index: "Index", kind: str, since: int) -> int:
    """How many `kind` events happened at or after `since`."""
    return index.conn.execute("SELECT count(*) FROM event_rows WHERE kind = ? AND at >= ?", (kind, since)).fetchone()[0]


def newest_of_kind(index: "Index", kind: str) -> int | None:
    """The id of the newest `kind` event (None: there is none): it moves when one is added."""
    return index.conn.execute("SELECT max(id) FROM event_rows WHERE kind = ?", (kind,)).fetchone()[0]
