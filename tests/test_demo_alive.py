"""`fleetdeck demo` is alive while it runs: agents the real presence detectors find (from session files
written as the agents write them), git activity in the last hours and as it runs, proposals that outlive
the demo, its policy followed by `fleetdeck mcp --db`, and its folder deleted on exit unless `--keep`.
Time is injected (the demo "started three hours ago"), never waited for."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.types import Implementation

from fleet.cli import build_parser
from fleet.cli.serve import HUB_OPTIONS
from fleet.demo import build_demo_fleet, seed_proposals
from fleet.demolife import SCHEDULE, DemoLife, agent_env
from fleet.index.scan import scan
from fleet.index.store import open_index
from fleet.presence.refresh import refresh_presence
from fleet.views.digest import digest
from tests.fleets.cli import fleetdeck_argv, fleetdeck_env
from tests.fleets.gitbuild import git
from tests.fleets.mcp_fleet import ok

pytestmark = pytest.mark.slow

HOURS = 3600


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    base = tmp_path_factory.mktemp("demo-alive")
    target = base / "demo"
    roots = build_demo_fleet(target)
    saved = os.environ.get("FLEETDECK_POLICY")
    ids = seed_proposals(target / "fleet.db", roots)
    assert os.environ.get("FLEETDECK_POLICY") == saved  # seeding leaves the caller's environment alone
    now = time.time()
    life = DemoLife(target, start=now - 3 * HOURS)  # the demo has been running for three hours
    index = open_index(target / "fleet.db")
    yield {"target": target, "roots": roots, "ids": ids, "life": life, "index": index, "now": now,
           "home": base / "person-home"}
    index.close()
    life.close()


def _presence(demo, now: float) -> dict[tuple[str, str], dict]:
    """What the real detectors find with the demo's agent homes (and a person's empty HOME)."""
    environ = {**agent_env(demo["target"]), "HOME": str(demo["home"])}
    rows = refresh_presence(demo["index"], now=now, environ=environ)
    return {(r["agent"], Path(r["repo"]).name): r for r in rows}


def test_the_demo_shows_work_an_agent_discarded_and_how_to_get_it_back(demo):
    from fleet.snapshot.events import discarded_in_fleet

    [event] = discarded_in_fleet(demo["index"])
    assert event["repo"] == "landing-page" and event["agents"] == ["claude-code"]
    assert set(event["files"]) == {"index.html", "style.css", "pricing.md"}
    assert event["restore"].startswith("fleetdeck restore landing-page ")
    assert git(Path(event["path"]), "status", "--porcelain") == ""      # the commands really ran


def test_activity_in_the_last_hours_and_while_it_runs(demo):
    life, target = demo["life"], demo["target"]
    dotfiles = target / "fleet" / "oss" / "dotfiles"
    # built with the last hours in it: dotfiles rebased onto a teammate's change
    assert any(line.startswith("rebase") for line in git(dotfiles, "reflog", "--format=%gs").splitlines())
    done = []
    for minutes in range(0, 3 * 60 + 1, 5):  # the demo's ticks over three hours, time injected
        done += life.tick(life.start + minutes * 60)
    assert done[:len(SCHEDULE)] == [name for _, name, _ in SCHEDULE]
    assert len([n for n in done if n.startswith("scratch-")]) >= 3  # and more commits later, one a tick
    assert git(target / "fleet" / "work" / "cli-tools", "log", "-1", "--format=%s").strip() == "cli: --version flag"
    assert git(target / "fleet" / "oss" / "infra", "rev-parse", "origin/main").strip() == \
        git(target / "seeds" / "infra", "rev-parse", "HEAD").strip()
    scan(demo["index"], demo["roots"])
    events = digest(demo["index"], "24h", max_events=1000)
    kinds = {e["kind"] for e in events["events"]}
    assert {"commit", "fetch", "rebase"} <= kinds, kinds


def test_the_real_detectors_find_the_demos_agents_all_the_while(demo):
    life, start = demo["life"], demo["life"].start
    for now in (start, start + 2 * HOURS, demo["now"]):  # at the start, hours later, and now
        life.tick(now)
        found = _presence(demo, now)
        states = {key: row["state"] for key, row in found.items()}
        assert states == {("claude-code", "web-frontend"): "working", ("codex", "mobile-app"): "recent",
                          ("claude-code", "monorepo"): "open"}
        assert found[("claude-code", "web-frontend")]["files"] == ["styles/part1.css"]
        assert found[("claude-code", "web-frontend")]["branch"] == "redesign"
        assert found[("claude-code", "monorepo")]["pids"] == [life.stand_in.pid]
        assert "session" in found[("codex", "mobile-app")]["sources"]
    # no row was written by hand: an empty agent home finds nobody
    empty = refresh_presence(demo["index"], now=start, environ={"HOME": str(demo["home"])})
    assert not [r for r in empty if r["agent"] in ("claude-code", "codex")]


def test_the_demos_proposals_outlive_the_demo(demo):
    rows = demo["index"].conn.execute("select expires_at from proposals where id in (%s)" %
                                      ",".join("?" * len(demo["ids"])), demo["ids"]).fetchall()
    assert len(rows) == len(demo["ids"]) == 4
    assert all(at > demo["now"] + 6 * 24 * HOURS for (at,) in rows)  # a week, not 30 minutes


async def test_fleetdeck_mcp_over_the_demos_index_follows_the_demos_policy(demo, tmp_path):
    env = fleetdeck_env(FLEETDECK_DB=str(demo["target"] / "fleet.db"), XDG_CONFIG_HOME=str(tmp_path / "config"))
    env.pop("FLEETDECK_POLICY", None)
    (tmp_path / "config" / "fleetdeck").mkdir(parents=True)
    (tmp_path / "config" / "fleetdeck" / "policy.toml").write_text("[settings]\nexpiry_minutes = 5\n")
    argv = fleetdeck_argv("mcp")
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env)
    async with Client(params, client_info=Implementation(name="claude-code", version="1")) as client:
        made = ok(await client.call_tool("operation.preview.branch", {
            "repo": str(demo["target"] / "fleet" / "oss" / "scratch"), "reason": "try the demo",
            "name": "from-mcp"}))
    row = demo["index"].conn.execute("select expires_at - created_at from proposals where id = ?",
                                     (made["proposal_id"],)).fetchone()
    assert row[0] == pytest.approx(10080 * 60)  # the demo's week, not the person's 5 minutes


def _run_demo(tmp_path, *extra: str) -> tuple[subprocess.CompletedProcess, Path]:
    target = tmp_path / "fleet-dir"
    env = fleetdeck_env(XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_DATA_HOME=str(tmp_path / "data"))
    proc = subprocess.Popen(fleetdeck_argv("demo", "--dir", str(target), "--port", "0", "--no-watch", *extra),
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    lines = []
    for line in proc.stdout:  # the dashboard's address comes once it serves
        lines.append(line)
        if line.startswith("fleetdeck dashboard: http://127.0.0.1:"):
            break
    proc.send_signal(signal.SIGINT)  # Ctrl-C
    out, err = proc.communicate(timeout=60)
    assert lines and lines[-1].startswith("fleetdeck dashboard: http://127.0.0.1:"), err  # it served
    return subprocess.CompletedProcess(proc.args, proc.returncode, "".join(lines) + out, err), target


def test_the_demo_says_where_it_is_and_deletes_itself_on_ctrl_c(tmp_path):
    done, target = _run_demo(tmp_path)
    db = target / "fleet.db"
    assert f"index:  {db}" in done.stderr and f"fleetdeck mcp --db {db}" in done.stderr
    assert f"fleetdeck demo: deleted {target}" in done.stderr
    assert not target.exists()
    stand_ins = subprocess.run(["pgrep", "-f", "sleep 2147483647"], capture_output=True, text=True).stdout.split()
    assert not [p for p in stand_ins if os.path.realpath(f"/proc/{p}/cwd").startswith(str(target))]


def test_the_demo_keeps_its_fleet_with_keep(tmp_path):
    done, target = _run_demo(tmp_path, "--keep")
    assert f"fleetdeck demo: kept {target}" in done.stderr
    assert (target / "fleet.db").exists() and (target / "fleet" / "oss" / "scratch").is_dir()


def test_the_demo_sets_every_option_serve_reads():
    """`cmd_demo` serves through `cmd_serve` with a parser of its own: every option serve has that the demo's
    parser lacks must be one the demo sets itself (`fleet.cli.serve.local_only`), or the demo dies at start
    (twice so far: `--team`, then `--key`/`--as`)."""
    serve, demo = (vars(build_parser([name]).parse_args([name])) for name in ("serve", "demo"))
    assert set(serve) - set(demo) - {"roots"} == set(HUB_OPTIONS)
