"""How fresh the index is, said honestly: when it was last written, and whether a watcher keeps it current.

The watcher (in `serve` or `fleetdeck watch`, possibly another process) records its state under the `meta`
key `watcher` as JSON ({pid, mode, heartbeat_at, repos, backlog, stopped_at, ...}), beating every few
seconds; a heartbeat older than `STALE_AFTER` means it died without saying so. A watcher that starts over a
known fleet re-checks every repo first and records how far it got (`reverify`).
"""

from __future__ import annotations

import time
from datetime import datetime

STALE_AFTER = 30.0
REVERIFY_DONE_SHOWN_S = 120.0  # how long pages say a finished re-check is finished
WATCHER_KEY = "watcher"  # the meta key the watcher writes its state under


def _seconds(stamp: object) -> float | None:
    if isinstance(stamp, (int, float)):
        return float(stamp)
    if isinstance(stamp, str) and stamp:
        try:
            return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def watcher_state(index, now: float | None = None) -> dict:
    """`{state, mode, repos, polled, backlog, heartbeat_age_s, reverify}` from the watcher's `meta` record.

    `state`: `running` (file events), `polling` (inotify ran out: `polled` of the `repos` are polled, which
    is slower), `stale` (no heartbeat for `STALE_AFTER` seconds: it died without saying so), `stopped`, or
    `absent` (no watcher ever ran here). `reverify` is the running watcher's start-up re-check
    (`reverify_progress`), or None.
    """
    now = now or time.time()
    value = index.meta(WATCHER_KEY)
    if not isinstance(value, dict):
        return {"state": "absent", "mode": None, "repos": None, "polled": None, "backlog": None,
                "heartbeat_age_s": None, "reverify": None}
    beat = _seconds(value.get("heartbeat_at"))
    age = None if beat is None else round(max(0.0, now - beat), 1)
    if value.get("stopped_at"):
        state = "stopped"
    elif age is None or age > STALE_AFTER:
        state = "stale"
    else:
        state = "polling" if value.get("mode") == "polling" else "running"
    repos = value.get("repos")
    polled = value.get("polled", repos if value.get("mode") == "polling" else 0)  # older watchers: all or none
    return {"state": state, "mode": value.get("mode"), "repos": repos, "polled": polled,
            "backlog": value.get("backlog"), "heartbeat_age_s": age,
            "reverify": reverify_progress(value, now) if state in ("running", "polling") else None}


def reverify_progress(value: object, now: float | None = None) -> dict | None:
    """The start-up re-check in a watcher record: `{total, done, figures_from, started_at, finished_at,
    running}`; None when there is none to show (no re-check, or one that finished over
    REVERIFY_DONE_SHOWN_S ago)."""
    progress = value.get("reverify") if isinstance(value, dict) else None
    if not isinstance(progress, dict) or not isinstance(progress.get("total"), int):
        return None
    finished = _seconds(progress.get("finished_at"))
    if finished is not None and (now or time.time()) - finished > REVERIFY_DONE_SHOWN_S:
        return None
    return {"total": progress["total"], "done": min(int(progress.get("done") or 0), progress["total"]),
            "figures_from": progress.get("figures_from"), "started_at": progress.get("started_at"),
            "finished_at": progress.get("finished_at"), "running": finished is None}


def history_progress(index, repo_id: int | None = None) -> dict:
    """`{complete, read, total}`: whether the index holds the reflog history (and events) of every repo, or
    of `repo_id` when given; `read` of the `total` repos stored before their history (a cold start's state
    pass, `fleet.index.store.Index.history_backlog`) have it now. A page built on events (the digest, a repo's
    timeline, lost commits) says it is incomplete while it is not."""
    return _progress(index.history_backlog(), "read", repo_id)


def prediction_progress(index) -> dict:
    """`{complete, made, total}`: whether every diverged repo's merge prediction is made; `made` of the
    `total` repos stored before theirs (a cold start's state pass, `fleet.index.store.Index.prediction_backlog`)
    have it now. Until it is complete the queue says which repos are still to be predicted (their `diverged`
    reason), and that the order may still change."""
    return _progress(index.prediction_backlog(), "made")


def _progress(backlog: dict, done: str, repo_id: int | None = None) -> dict:
    """`{complete, <done>, total}` of a second pass's backlog (`{total, ids}`): all of it, or `repo_id`'s part."""
    waiting = backlog["ids"]
    complete = not waiting if repo_id is None else repo_id not in waiting
    return {"complete": complete, done: backlog["total"] - len(waiting), "total": backlog["total"]}


def freshness(index, now: float | None = None) -> dict:
    """When the index last changed (newest `scanned_at`), its change counter, the watcher's state, how
    many agent presence rows there are as of which refresh (presence refreshes replace rows, not repos), and
    whether every repo's history is read (`history_progress`) and every merge predicted (`prediction_progress`)."""
    now = now or time.time()
    conn = index.conn
    newest = conn.execute("select max(scanned_at) from repos where gone = 0").fetchone()[0]
    agents, presence_at = conn.execute("select count(*), max(refreshed_at) from presence").fetchone()
    when = _seconds(newest)
    return {
        "indexed_at": newest,
        "age_s": None if when is None else round(max(0.0, now - when), 1),
        "generation": index.generation(),
        "watcher": watcher_state(index, now),
        "presence": {"agents": agents, "refreshed_at": presence_at},
        "history": history_progress(index),
        "predictions": prediction_progress(index),
    }
