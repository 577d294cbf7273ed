"""The ranked queue kept in memory (fleet/views/ranking.py) always equals one ranked from scratch: after a
repo changes, after one goes, across connections and processes writing the same index, and when the index
file is replaced. Callers' changes to what they are handed never reach the cache."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from fleet.index.scan import refresh_repo, scan
from fleet.index.store import open_index
from fleet.views.queue import QueueFilter, attention_queue, radar_view
from fleet.views.radar import _clean, _entry, radar
from fleet.views.ranking import RankedRows, sort_key
from tests.fleets.gitbuild import commit_file, init_repo, write


def from_scratch(index, include_clean: bool = True) -> list[str]:
    """The ranking a fresh table computes: every live row decoded now."""
    ranked = RankedRows().ranked(index, _entry, _clean)
    return [r.entry["name"] for r in ranked if include_clean or r.stored_score > 0]


def names(index, include_clean: bool = True) -> list[str]:
    return [e["name"] for e in radar(index, include_clean=include_clean)]


def test_the_cached_queue_follows_every_change(tmp_path: Path):
    root = tmp_path / "root"
    repos = {name: init_repo(root / name, commits=1) for name in ("alpha", "beta", "gamma")}
    with open_index(tmp_path / "f.db") as index:
        scan(index, [str(root)])
        assert names(index) == from_scratch(index)
        before = {e["name"]: e["status"] for e in radar(index, include_clean=True)}

        write(repos["beta"] / "new.txt", "dirty\n")  # beta becomes the most urgent
        refresh_repo(index, str(repos["beta"].resolve()))
        after = radar(index, include_clean=True)
        assert after[0]["name"] == "beta" and after[0]["status"] == "local_changes" != before["beta"]
        assert names(index) == from_scratch(index)
        assert names(index, include_clean=False) == from_scratch(index, include_clean=False)

        shutil.rmtree(repos["gamma"])  # gone: out of the queue
        refresh_repo(index, str(repos["gamma"].resolve()))
        assert "gamma" not in names(index) and names(index) == from_scratch(index)


def test_a_write_from_another_process_is_seen(tmp_path: Path):
    root = tmp_path / "root"
    repo = init_repo(root / "solo", commits=1)
    db = tmp_path / "f.db"
    with open_index(db) as index:
        scan(index, [str(root)])
        assert radar(index, include_clean=True)[0]["status"] != "local_changes"
        commit_file(repo, "a.txt", "a\n")
        write(repo / "a.txt", "changed\n")
        subprocess.run([sys.executable, "-m", "fleet", "--db", str(db), "scan", str(root)], check=True,
                       capture_output=True)
        assert radar(index, include_clean=True)[0]["status"] == "local_changes"


def test_a_replaced_index_file_is_read_anew(tmp_path: Path):
    db = tmp_path / "f.db"
    for name in ("first", "second"):
        root = tmp_path / name
        init_repo(root / name, commits=1)
        if db.exists():
            db.unlink()
        with open_index(db) as index:
            scan(index, [str(root)])
            assert names(index) == [name]


def test_what_callers_change_never_reaches_the_cache(tmp_path: Path):
    root = tmp_path / "root"
    repo = init_repo(root / "one", commits=1)
    write(repo / "x.txt", "x\n")
    with open_index(tmp_path / "f.db") as index:
        scan(index, [str(root)])
        pristine = json.dumps(radar(index), sort_keys=True)
        view = radar_view(index, limit=1)
        view["entries"][0]["status"] = "tampered"
        view["entries"][0]["agents"].append({"agent": "x", "state": "working"})
        page = attention_queue(index, QueueFilter.from_params({}))
        page["entries"][0]["name"] = "tampered"
        assert json.dumps(radar(index), sort_keys=True) == pristine
        assert "agents" not in radar(index)[0]


def test_sort_key_ranks_score_then_newest_activity_then_name():
    entries = [{"score": 60, "last_activity": "2026-01-01T00:00:00Z", "name": "b"},
               {"score": 60, "last_activity": "2026-02-01T00:00:00Z", "name": "c"},
               {"score": 60, "last_activity": "2026-02-01T00:00:00Z", "name": "a"},
               {"score": 80, "last_activity": None, "name": "z"}]
    assert [e["name"] for e in sorted(entries, key=sort_key)] == ["z", "a", "c", "b"]
