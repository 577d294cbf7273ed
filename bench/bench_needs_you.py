"""Needs you's costs: the hook command that records a state, and a hook event to a webhook delivered.

    python bench/bench_needs_you.py [--runs 20]

- the hook command (`python -m fleet.agenthooks claude-code`, process start included) for a `Notification`
  (permission prompt): p50 and p95 over `--runs` (the issue's bound: p95 <= 300 ms);
- a hook event -> the inbox -> a local HTTP receiver on 127.0.0.1 (a Dispatcher ticking every 0.25 s as
  `serve` does): p50 and p95 (bound: p95 <= 1 s).
Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from fleet.inbox.items import inbox  # noqa: E402
from fleet.index.scan import scan  # noqa: E402
from fleet.index.store import open_index  # noqa: E402
from fleet.notify.config import load  # noqa: E402
from fleet.notify.dispatch import TICK_S, Dispatcher  # noqa: E402


def p95(values: list[float]) -> float:
    return sorted(values)[max(0, int(len(values) * 0.95) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-needs-you-"))
    repo = base / "fleet" / "api"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    db = base / "fleet.db"
    with open_index(db) as index:
        scan(index, [str(base / "fleet")])
    arrived: list[float] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            arrived.append(time.monotonic())
            self.send_response(200)
            self.end_headers()

        def log_message(self, *a) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    settings = base / "settings.toml"
    settings.write_text(f'[notify]\nslack = "http://127.0.0.1:{server.server_address[1]}/s"\nburst = 1000\n')
    os.chmod(settings, 0o600)
    os.environ["FLEETDECK_SETTINGS"] = str(settings)
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    dispatcher = Dispatcher(str(db), load())
    stop = threading.Event()

    def ticks() -> None:
        with open_index(db) as index:
            while not stop.wait(TICK_S):
                dispatcher.tick(inbox(index)["items"], None)

    threading.Thread(target=ticks, daemon=True).start()
    hook_ms, deliver_ms = [], []
    for n in range(args.runs):
        payload = {"session_id": f"bench-{n}", "cwd": str(repo), "hook_event_name": "Notification",
                   "notification_type": "permission_prompt", "message": "x"}
        started = time.monotonic()
        subprocess.run([sys.executable, "-m", "fleet.agenthooks", "claude-code", "--db", str(db)],
                       input=json.dumps(payload), text=True, env=env, check=True, capture_output=True)
        hook_ms.append((time.monotonic() - started) * 1000)
        while len(arrived) <= n and time.monotonic() - started < 10:
            time.sleep(0.005)
        deliver_ms.append((arrived[n] - started) * 1000 if len(arrived) > n else float("inf"))
    stop.set()
    dispatcher.stop()
    server.shutdown()
    print(json.dumps({"hook_record_ms": {"p50": round(statistics.median(hook_ms)), "p95": round(p95(hook_ms))},
                      "hook_to_webhook_ms": {"p50": round(statistics.median(deliver_ms)),
                                             "p95": round(p95(deliver_ms))}, "runs": args.runs}, indent=2))


if __name__ == "__main__":
    main()
