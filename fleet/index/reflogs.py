"""Reading git's reflog files for the ingest: the lines appended to each since the index last read it.

Storage (`fleet.index.store`) never touches git's files; the ingest reads the new lines before it takes the
write lock (`read`), and once it holds the lock checks that the index still stands as it was read against,
reading again where another process stored the repo meanwhile (`recheck`).
"""

from __future__ import annotations

from operator import itemgetter
from typing import TYPE_CHECKING

from fleet.git import files as gitfiles
from fleet.repo.record import reflog_stats

if TYPE_CHECKING:
    from fleet.index.store import Index, Prepared

Logs = list[tuple[str, int, int, list[tuple]]]  # (ref, inode, end, new lines) of each reflog file read
_TWIN = itemgetter(0, 1, 3, 5)  # what makes two lines one: (old, new, time, message)


def read(prepared: list["Prepared"]) -> list["Prepared"]:
    """`prepared` with each repo's reflog stats and new lines (none for a vanished repo, nor for one whose
    history is deferred), read outside any lock against what the index held when it was prepared."""
    out = []
    for p in prepared:
        if p.deferred:
            out.append(p)
            continue
        vanished = p.record.get("vanished")
        stats = None if vanished else p.record.get("reflog_files")
        if stats is None and not vanished:
            stats = reflog_stats(p.found.gitdir, p.found.commondir)
        logs = None if stats is None else read_new_lines(stats, p.known, first=p.repo_id is None)
        out.append(p._replace(stats=stats, logs=logs))
    return out


def recheck(index: "Index", prepared: list["Prepared"]) -> tuple[list["Prepared"], set[int]]:
    """Under the write lock: `prepared` as the index stands now (each repo's id and read files), its lines
    read again where another process stored the repo since it was read; and the positions read again."""
    now = index.reflog_state([p.found.path for p in prepared])
    out, reread = [], set()
    for n, p in enumerate(prepared):
        repo_id, known = now.get(p.found.path, (None, {}))
        if p.stats is not None and (repo_id != p.repo_id or known != p.known):
            p = p._replace(logs=read_new_lines(p.stats, known, first=repo_id is None))
            reread.add(n)
        out.append(p._replace(repo_id=repo_id, known=known))
    return out, reread


def read_new_lines(stats: list[tuple], known: dict[str, tuple[int, int]], first: bool) -> Logs:
    """(ref, inode, end, lines) of each reflog file changed since `known`: only what was appended, or all of
    it when git rewrote the file (`reflog expire`, a branch deleted and made again). For a repo stored the
    `first` time a line repeated within its file is kept once; otherwise the write drops lines already held."""
    files, datas = [], []
    for ref, path, inode, size, _mtime in stats:
        old_inode, old_size = known.get(ref, (None, None))
        if old_inode == inode and old_size == size:
            continue
        offset = old_size if old_inode == inode and old_size is not None and old_size < size else 0
        try:
            data, end, _ = gitfiles.read_reflog(path, offset)  # a regular file, a bounded step
        except gitfiles.BrokenRepo:
            continue
        files.append((ref, inode, end))
        datas.append(data)
    out = []
    for (ref, inode, end), lines in zip(files, gitfiles.logs_fields(datas)):  # the repo's logs parsed together
        if first and len(set(map(_TWIN, lines))) < len(lines):
            lines = once(lines, set())
        out.append((ref, inode, end, lines))
    return out


def once(lines: list[tuple], held: set) -> list[tuple]:
    """`lines` without those whose (old, new, time, message) is in `held` or came before (git wrote a line
    twice, or the index holds it already)."""
    kept = []
    for line in lines:
        key = _TWIN(line)
        if key not in held:
            held.add(key)
            kept.append(line)
    return kept
