"""Team mode is optional: without psycopg every `fleetdeck team` command says how to install it, in one line,
and the rest of fleetdeck never imports it."""

from __future__ import annotations

import subprocess
import sys

from tests.fleets.cli import fleetdeck_env

BLOCKED = ("import sys; sys.modules['psycopg'] = None\n"  # `import psycopg` now raises ImportError
           "from fleet.cli import main; sys.exit(main(sys.argv[1:]))")


def test_without_psycopg_team_commands_say_how_to_install_it(tmp_path):
    for argv in (["team", "init", "postgresql://admin@127.0.0.1:1/hub"],
                 ["team", "join", "postgresql://m:pw@127.0.0.1:1/hub", "--machine", "laptop"]):
        proc = subprocess.run([sys.executable, "-c", BLOCKED, *argv], capture_output=True, text=True, timeout=120,
                              env=fleetdeck_env(HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "c")))
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.strip() == ("fleetdeck: error: team mode needs psycopg: pip install 'fleetdeck[team]' "
                                       "[UNAVAILABLE]")
        assert "pw" not in proc.stderr


def test_the_watcher_and_the_bridge_do_not_import_psycopg():
    code = ("import sys, fleet.watch.service, fleet.cli.roots, mcp_bridge.server, web.app; "
            "print('psycopg' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=fleetdeck_env())
    assert proc.stdout.strip() == "False", proc.stderr
