"""The contracts the CLI, the JSON API and the MCP tools share (fleet/views/records.py): the same records with
exactly the typed keys on every surface, and one time representation (ISO 8601 UTC) in every MCP output."""

from __future__ import annotations

import json
import re
from typing import Any, NotRequired, get_origin, get_type_hints

import pytest
from starlette.testclient import TestClient

from fleet.views import records
from mcp_bridge import models
from mcp_bridge.server import build_server
from tests.fleets.cli import run_cli
from tests.fleets.mcp_fleet import call, ok
from web.app import create_app

TOKEN = "contract-token-0123456789abcdefghijklmnop"
ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


@pytest.fixture(scope="module")
def server(mcp_fleet):
    return build_server(str(mcp_fleet["_db"]))


@pytest.fixture(scope="module")
def api(mcp_fleet):
    app = create_app(mcp_fleet["_db"], TOKEN)
    with TestClient(app, base_url="http://127.0.0.1:8765",
                    headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        yield client


def cli_json(mcp_fleet, *args: str) -> Any:
    proc = run_cli(*args, "--json", env={"FLEETDECK_DB": str(mcp_fleet["_db"])}, check=True)
    return json.loads(proc.stdout)


def keys_of(record: type) -> set[str]:
    return set(record.__annotations__)


def check_record(value: dict, record: type) -> None:
    """`value` has exactly the record's required keys (optional ones may be there) and validates against the
    model MCP publishes for it, strictly (no int accepted for a str)."""
    hints = get_type_hints(record, include_extras=True)
    optional = {k for k, h in hints.items() if get_origin(h) is NotRequired}
    assert set(value) - optional == set(hints) - optional, (record.__name__, set(value) ^ set(hints))
    models.derive(record).model_validate_json(json.dumps(value), strict=True)


@pytest.mark.slow
async def test_repo_record_is_one_shape_on_cli_api_and_mcp(mcp_fleet, server, api):
    from_cli = cli_json(mcp_fleet, "repos")
    from_api = api.get("/api/repos").json()
    from_mcp = ok(await call(server, "fleet.repos", {"limit": 1000}))["repos"]
    assert from_cli == from_api == from_mcp
    assert len(from_cli) >= 6
    for record in from_cli:
        check_record(record, records.RepoRecord)
        assert not {"score", "generation", "gitdir", "reasons", "operation_detail"} & set(record)
    rebasing = next(r for r in from_cli if r["name"] == "rebasing")
    assert rebasing["operation"] == "rebase" and rebasing["operation_details"]["branch"]


async def test_radar_is_one_shape_on_cli_api_and_mcp(mcp_fleet, server, api):
    from_cli = cli_json(mcp_fleet, "radar", "--all")
    from_mcp = ok(await call(server, "fleet.radar", {"include_clean": True}))
    assert set(from_mcp.pop("freshness")) >= {"indexed_at", "age_s", "watcher", "refreshed"}
    from_api = api.get("/api/radar?per_page=500").json()
    assert from_cli == from_mcp
    check_record(from_cli, records.RadarView)
    assert {k: from_api[k] for k in keys_of(records.RadarView)} == from_cli
    for entry in from_cli["entries"]:
        for reason in entry["reasons"]:
            check_record(reason, records.Reason)
    capped = cli_json(mcp_fleet, "radar", "--limit", "2")
    assert len(capped["entries"]) == 2 and capped["truncated"] is True
    assert capped["omitted_count"] == capped["total"] - 2
    page = api.get("/api/radar?per_page=1").json()
    assert page["total"] == page["matched"] and page["omitted_count"] == page["total"] - 1


async def test_digest_is_one_shape_on_cli_api_and_mcp(mcp_fleet, server, api):
    proc = run_cli("digest", "--since", "0", "--format", "json", env={"FLEETDECK_DB": str(mcp_fleet["_db"])},
                   check=True)
    from_cli = json.loads(proc.stdout)
    from_mcp = ok(await call(server, "fleet.digest", {"since": 0}))
    assert set(from_mcp.pop("freshness")) >= {"indexed_at", "age_s", "watcher", "refreshed"}
    from_api = api.get("/api/digest?since=0").json()
    assert from_cli == from_mcp == from_api
    check_record(from_cli, records.Digest)


def _time_types(schema: dict, defs: dict, path: str, out: dict[str, set]) -> None:
    """Every property named like a time (records.TIME_KEYS) in an output schema, with its JSON types."""
    if "$ref" in schema:
        schema = defs[schema["$ref"].rsplit("/", 1)[1]]
    for name, prop in (schema.get("properties") or {}).items():
        resolved = defs[prop["$ref"].rsplit("/", 1)[1]] if "$ref" in prop else prop
        if name in records.TIME_KEYS:
            out[f"{path}.{name}"] = {alt.get("type") for alt in resolved.get("anyOf", [resolved])}
        _time_types(resolved, defs, f"{path}.{name}", out)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            _time_types(schema[key], defs, path, out)
    for alt in schema.get("anyOf", []):
        _time_types(alt, defs, path, out)


async def test_every_time_in_every_output_schema_is_an_iso_string(server):
    tools = await server.list_tools()
    found: dict[str, set] = {}
    for tool in tools:  # the root, and every record in $defs (lists of records point there in words only)
        defs = tool.output_schema.get("$defs", {})
        _time_types(tool.output_schema, defs, tool.name, found)
        for name, record in defs.items():
            _time_types(record, defs, f"{tool.name}.{name}", found)
    assert len(found) >= 10
    wrong = {where: types for where, types in found.items() if not types <= {"string", "null"}}
    assert not wrong


def _times_in(value: Any, path: str = "") -> list[tuple[str, Any]]:
    if isinstance(value, dict):
        return [hit for k, v in value.items() for hit in
                ([(f"{path}.{k}", v)] if k in records.TIME_KEYS and not isinstance(v, (dict, list)) else [])
                + _times_in(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [hit for v in value for hit in _times_in(v, path)]
    return []


@pytest.mark.slow
async def test_every_time_in_real_answers_is_iso_utc(mcp_fleet, server):
    calls = [("fleet.repos", {}), ("fleet.radar", {}), ("fleet.digest", {"since": 0}),
             ("fleet.search", {"query": "e"}), ("repo.brief", {"repo": "dirty"}),
             ("repo.history", {"repo": "alpha"}), ("repo.reflog", {"repo": "alpha"}),
             ("repo.refs", {"repo": "dirty"}), ("stash.list", {"repo": "dirty"}),
             ("commit.details", {"repo": "alpha", "rev": "HEAD"}), ("repo.blame", {"repo": "alpha", "file": "src/app.py"}),
             ("agents.presence", {"refresh": False})]
    seen = 0
    for name, args in calls:
        for where, value in _times_in(ok(await call(server, name, args))):
            assert value is None or ISO_UTC.match(value), (name, where, value)
            seen += value is not None
    assert seen > 50


def test_event_kinds_are_one_list():
    """The classifier of reflog messages (fleet/git/files.py) only ever says a kind events.KINDS lists; the
    one kind no reflog line has is the safety net's `discarded`."""
    from fleet.git.files import _KIND_PREFIXES
    from fleet.index.events import KINDS
    from mcp_bridge.tools_fleet import EventKind

    assert {kind for _, kind in _KIND_PREFIXES} | {"other", "discarded"} == set(KINDS)
    assert EventKind.__args__ == KINDS


async def test_no_phantom_write_side(server):
    """What the instructions and the radar say about proposals is backed by the write side (fleet/ops): a
    preview tool per catalogued op, status and cancel, and the radar's pending_proposal reason (raised by
    fleet.ops.attention; tests/test_ops_core.py checks a pending proposal tops the queue)."""
    from fleet.ops.catalog import OPS
    from fleet.attention import SCORES
    from mcp_bridge.server import INSTRUCTIONS

    tools = {t.name for t in await server.list_tools()}
    assert "operation.preview" in INSTRUCTIONS and "operation.status" in INSTRUCTIONS
    assert {f"operation.preview.{op}" for op in OPS} | {"operation.status", "operation.cancel"} <= tools
    assert "pending_proposal" in SCORES


def test_integer_arguments_are_parsed_one_way():
    """fleet.caps is the one integer parser: typed values (check_int) and text (parse_int) alike."""
    from fleet.caps import check_int, parse_int
    from fleet.errors import FleetError
    from fleet.views.queue import QueueFilter

    assert parse_int(None, "n", 7, 1, 10) == 7 and parse_int(" 3 ", "n", 7, 1, 10) == 3
    for bad in ("x", "1.5", "1e3", "9" * 30):
        with pytest.raises(FleetError) as raised:
            parse_int(bad, "n", 7, 1, 10)
        assert raised.value.code == "BAD_ARGUMENT"
    for bad in (True, 1.0, "1", 0, 11):
        with pytest.raises(FleetError):
            check_int(bad, "n", 1, 10)
    f = QueueFilter.from_params({"page": "-3", "per_page": "x"})
    assert (f.page, f.per_page) == (1, 100)
    assert QueueFilter.from_params({"per_page": "100000"}).per_page == 500


def test_iso_times_converts_only_times_and_survives_absurd_ones():
    value = {"at": 0, "author_time": 1.5e9, "count": 3, "nested": [{"committer_time": 10**22, "at": None}],
             "since": "2026-01-01T00:00:00Z", "flag": True}
    assert records.iso_times(value) == {
        "at": "1970-01-01T00:00:00Z", "author_time": "2017-07-14T02:40:00Z", "count": 3,
        "nested": [{"committer_time": None, "at": None}], "since": "2026-01-01T00:00:00Z", "flag": True}
