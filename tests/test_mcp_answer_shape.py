"""What a real client does with a large answer, through the official client over stdio (`fleetdeck mcp`):
the output schema it checks every answer against publishes a list of records as a list of objects (the record's
fields kept in `$defs`), so the check is cheap and the answer the same; and a client that reads only
`structuredContent` (Claude Code, Codex: mcp_bridge/envelope.py) gets a large answer once, every other client
(and every failure) the text mirror too. git is the oracle for the answer itself."""

from __future__ import annotations

import json
import time

import pytest
from jsonschema.validators import validator_for
from mcp import Client, StdioServerParameters
from mcp.types import Implementation

from fleet.index.scan import scan
from fleet.index.store import open_index
from fleet.repo.jsonbudget import encode_answer
from mcp_bridge.envelope import MIRROR_MIN_BYTES
from mcp_bridge.server import build_server
from mcp_bridge.toolkit import shallow_lists
from tests.fleets.cli import fleetdeck_argv, fleetdeck_env
from tests.fleets.gitbuild import git, init_repo, write

FILES = 300


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    """A repo whose HEAD commit changes FILES files (an answer of about 100 KB), in a fresh index."""
    base = tmp_path_factory.mktemp("wide")
    repo = init_repo(base / "fleet" / "wide")
    for n in range(FILES):
        write(repo / f"src/d{n % 30:02d}/f{n:03d}.txt", "".join(f"file {n} line {i}\n" for i in range(12)))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "touch many files")
    db = base / "fleet.db"
    with open_index(db) as index:
        scan(index, [str(base / "fleet")])
    return repo, db


def client(db, declared: tuple[str, str] | None = None) -> Client:
    argv = fleetdeck_argv("mcp")
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=fleetdeck_env(FLEETDECK_DB=str(db)))
    me = Implementation(name=declared[0], version=declared[1]) if declared else None
    return Client(params, client_info=me)


def cpu_of(check, runs: int = 3) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.process_time()
        check()
        best = min(best, time.process_time() - start)
    return best


@pytest.mark.slow
async def test_lists_of_records_are_published_shallow_with_their_records_in_defs(wide):
    repo, db = wide
    async with client(db) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        schema = tools["commit.details"].output_schema
        assert schema["properties"]["changes"]["items"] == {
            "type": "object", "description": "one Change: its fields are #/$defs/Change"}
        assert {"path", "status", "insertions", "hunks"} <= set(schema["$defs"]["Change"]["properties"])
        assert tools["repo.history"].output_schema["properties"]["commits"]["items"]["type"] == "object"
        for tool in tools.values():  # no top-level list of records is checked item by item any more
            for name, prop in (tool.output_schema or {}).get("properties", {}).items():
                for alt in prop.get("anyOf", [prop]):
                    assert "$ref" not in (alt.get("items") or {}), (tool.name, name)
        result = await c.call_tool("commit.details", {"repo": str(repo), "rev": "HEAD", "max_files": FILES})  # validated by the client
    answer = result.structured_content
    oracle = git(repo, "diff-tree", "--no-commit-id", "--name-only", "-r", "HEAD").split()
    assert sorted(ch["path"] for ch in answer["changes"]) == sorted(oracle) and len(oracle) == FILES
    assert answer["changes"][0]["hunks"][0]["lines"]  # the answer itself is as deep as before


async def test_the_published_schema_is_far_cheaper_for_a_client_to_check(wide):
    """The client's own check (jsonschema, as mcp.client.session does) against the published schema and against
    the full schema the SDK generates from the same model (what was published before)."""
    repo, db = wide
    server = build_server(str(db))
    server.ensure_tools()
    spec = server.kit.specs["commit.details"]
    full = server.kit.output_model(spec).model_json_schema(mode="serialization")
    published = next(t for t in await server.list_tools() if t.name == "commit.details").output_schema
    assert published == shallow_lists(json.loads(json.dumps(full))) | {"title": published["title"]}
    answer = (await server.call_tool("commit.details", {"repo": str(repo), "rev": "HEAD", "max_files": FILES})).structured_content
    deep, shallow = (validator_for(s)(s) for s in (full, published))
    assert not list(deep.iter_errors(answer)) and not list(shallow.iter_errors(answer))
    assert cpu_of(lambda: list(deep.iter_errors(answer))) > 10 * cpu_of(lambda: list(shallow.iter_errors(answer)))


@pytest.mark.parametrize("declared,once", [
    (None, False),                                  # the official Python client: hands both to its caller
    (("claude-code", "2.1.280"), True),             # reads structuredContent alone since 2.0.21
    (("claude-code", "2.0.20"), False),             # before that, the text
    (("codex-mcp-client", "0.46.0"), True),         # Codex: structured_content when not null
    (("gemini-cli-mcp-client", "0.9.0"), False),    # Gemini CLI reads `content` only
])
@pytest.mark.slow
async def test_a_large_answer_travels_once_only_to_clients_that_read_structured_content_alone(wide, declared, once):
    repo, db = wide
    async with client(db, declared) as c:
        big = await c.call_tool("commit.details", {"repo": str(repo), "rev": "HEAD", "max_files": FILES})
        small = await c.call_tool("repo.status", {"repo": str(repo)})
        failed = await c.call_tool("commit.details", {"repo": str(repo), "rev": "no-such-rev"})
    full = encode_answer(big.structured_content)
    assert len(full) > MIRROR_MIN_BYTES
    assert len(big.structured_content["changes"]) == FILES
    if once:
        assert json.loads(big.content[0].text) == {"answer": "structuredContent",
                                                   "text_mirror": "omitted for this client", "bytes": len(full)}
    else:
        assert big.content[0].text == full
    assert small.content[0].text == encode_answer(small.structured_content)  # small answers: mirrored for all
    assert failed.is_error and json.loads(failed.content[0].text) == failed.structured_content  # failures too
