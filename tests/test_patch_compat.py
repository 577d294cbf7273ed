"""uni-diff-patch's spec format and habits, through `fleetdeck patch generate` (subprocess) and the MCP
`patch.generate` tool: every change mode and every write mode, `file_path`, top-level `output_path` /
`write_mode` / `project_root_dir`, per-change `encoding`, text_pair without a repo, the per-entry write
report with coded warnings, and `tool_policy_ok`. Every patch is applied with `git apply`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from fleet.index.scan import scan
from fleet.index.store import open_index
from mcp_bridge.server import build_server
from tests.fleets.cli import run_cli
from tests.fleets.gitbuild import commit_file, git, init_repo, write
from tests.fleets.mcp_fleet import call, error_of, ok


def fleetdeck(*args: str, stdin: bytes | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return run_cli(*args, stdin=stdin, text=False, cwd=cwd, timeout=60)  # patches are bytes


def project(base: Path) -> Path:
    repo = init_repo(base / "proj", commits=1)
    commit_file(repo, "src/app.py", "def main():\n    return 1\n")
    commit_file(repo, "docs/notes.md", "# Notes\nold line\n")
    commit_file(repo, "old_name.txt", "moving\n")
    commit_file(repo, "gone.txt", "bye\n")
    write(repo / "run.sh", "#!/bin/sh\necho hi\n")
    git(repo, "add", "run.sh")
    git(repo, "commit", "-q", "-m", "script")
    return repo


def every_mode(root: Path, absolute: bool = False) -> list[dict]:
    """One change per mode, spelled the uni-diff-patch way (`file_path`)."""
    name = (lambda p: str(root / p)) if absolute else (lambda p: p)
    return [
        {"file_path": name("src/app.py"), "mode": "file_content", "new_content": "def main():\n    return 2\n"},
        {"file_path": name("docs/notes.md"), "mode": "search_replace",
         "replacements": [{"search": "old line", "replace": "new line", "line_hint": 2}]},
        {"file_path": name("src/new_mod.py"), "mode": "create_file", "new_content": "X = 1\n"},
        {"file_path": name("gone.txt"), "mode": "delete_file"},
        {"file_path": "virtual/readme.txt", "mode": "text_pair", "old_text": "a\nb\n", "new_text": "a\nc\n"},
        {"file_path": name("old_name.txt"), "mode": "rename_file", "new_path": "new_name.txt"},
        {"file_path": name("run.sh"), "mode": "chmod", "old_mode": "100644", "new_mode": "100755"},
    ]


def applies(repo: Path, patch: Path | bytes, exclude_virtual: bool = True) -> None:
    args = ["apply", "--check"] + (["--exclude=virtual/*"] if exclude_virtual else [])
    if isinstance(patch, Path):
        git(repo, *args, str(patch))
    else:
        git(repo, *args, "-", input=patch)


@pytest.mark.parametrize("write_mode", ["append", "upsert", "overwrite", "create_only"])
def test_cli_runs_the_reference_spec_in_every_write_mode(tmp_path, write_mode):
    repo = project(tmp_path)
    out = tmp_path / "changes.diff"
    spec = {"changes": every_mode(repo, absolute=True), "output_path": str(out), "write_mode": write_mode,
            "project_root_dir": str(repo)}
    proc = fleetdeck("patch", "generate", "--no-check", stdin=json.dumps(spec).encode(), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["files_changed"] == 7
    report = result["patch_file"]
    assert report["write_mode"] == write_mode and report["added_count"] == 7
    assert [e["index"] for e in report["added_entries"]] == list(range(7))
    assert report["entries_before"] == 0 and report["entries_after"] == 7 and report["warnings"] == []
    assert out.read_bytes() == result["patch"].encode()
    applies(repo, out)
    git(repo, "apply", "--exclude=virtual/*", str(out))
    assert (repo / "src/app.py").read_text() == "def main():\n    return 2\n"
    assert (repo / "new_name.txt").exists() and not (repo / "gone.txt").exists()
    assert (repo / "run.sh").stat().st_mode & 0o100


def test_cli_write_modes_report_each_entry(tmp_path):
    repo = project(tmp_path)
    out = tmp_path / "work.patch"

    def run(changes, mode):
        spec = {"changes": changes, "output_path": str(out), "write_mode": mode, "project_root_dir": str(repo)}
        proc = fleetdeck("patch", "generate", stdin=json.dumps(spec).encode())
        return proc, (json.loads(proc.stdout) if proc.returncode == 0 else None)

    _, first = run(every_mode(repo)[:3], "append")
    assert first["git_check"]["ok"] is True
    proc, again = run([every_mode(repo)[0]], "append")
    assert again is None and b"upsert" in proc.stderr  # appending a path already held is refused
    _, up = run([{"file_path": "src/app.py", "mode": "file_content", "new_content": "def main():\n    return 1\n"},
                 {"file_path": "docs/notes.md", "mode": "file_content", "new_content": "# Notes\nnewer\n"},
                 every_mode(repo)[3]], "upsert")
    report = up["patch_file"]
    assert report["removed_entries"] == [{"path": "src/app.py", "old_index": 0, "reason": "empty_diff_upsert"}]
    assert report["replaced_entries"] == [{"path": "docs/notes.md", "index": 0, "old_index": 1}]
    assert report["added_entries"] == [{"path": "gone.txt", "index": 2}]
    assert (report["entries_before"], report["entries_after"]) == (3, 3)
    _, renamed = run([every_mode(repo)[5]], "upsert")
    _, retarget = run([{"file_path": "old_name.txt", "mode": "file_content", "new_content": "moved\n"}], "upsert")
    (row,) = retarget["patch_file"]["replaced_entries"]
    assert row == {"path": "old_name.txt", "index": 3, "old_index": 3, "replaced_path": "new_name.txt"}
    proc, created = run([every_mode(repo)[0]], "create_only")
    assert proc.returncode == 1 and b"already exists" in proc.stderr and b"CONFLICT" in proc.stderr
    _, over = run([every_mode(repo)[0]], "overwrite")
    assert over["patch_file"]["entries_before"] == 4 and over["patch_file"]["removed_count"] == 4
    applies(repo, out)


def test_warnings_are_coded(tmp_path):
    repo = project(tmp_path)
    other = init_repo(tmp_path / "other", commits=1)
    commit_file(other, "elsewhere.txt", "x\n")
    out = tmp_path / "mixed.patch"
    for root, change in ((other, {"file_path": "elsewhere.txt", "mode": "file_content", "new_content": "y\n"}),
                         (repo, every_mode(repo)[0])):
        spec = {"changes": [change], "output_path": str(out), "write_mode": "append", "project_root_dir": str(root)}
        proc = fleetdeck("patch", "generate", "--no-check", stdin=json.dumps(spec).encode())
        assert proc.returncode == 0, proc.stderr
    (warning,) = json.loads(proc.stdout)["patch_file"]["warnings"]
    assert warning["code"] == "POSSIBLE_PROJECT_ROOT_DIR_DRIFT" and "elsewhere.txt" in warning["message"]
    out.write_bytes(b"not a patch\n")
    spec = {"changes": [every_mode(repo)[0]], "output_path": str(out), "write_mode": "overwrite",
            "project_root_dir": str(repo)}
    report = json.loads(fleetdeck("patch", "generate", stdin=json.dumps(spec).encode()).stdout)["patch_file"]
    assert [w["code"] for w in report["warnings"]] == ["OVERWROTE_UNREADABLE_PATCH"]
    assert report["entries_before"] is None


def test_text_pair_needs_no_repo_and_the_cli_works_in_a_plain_folder(tmp_path):
    folder = tmp_path / "plain"
    folder.mkdir()
    spec = {"changes": [{"file_path": "virtual/a.txt", "mode": "text_pair", "old_text": "1\n", "new_text": "2\n"}],
            "output_path": "out.diff"}
    proc = fleetdeck("patch", "generate", stdin=json.dumps(spec).encode(), cwd=folder)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["git_check"] is None and (folder / "out.diff").read_text() == result["patch"]
    assert "+2" in result["patch"] and not (folder / "virtual").exists()
    write(folder / "real.txt", "one\n")  # a plain folder (no git) with a real file: git apply still checks it
    spec = {"changes": [{"file_path": "real.txt", "mode": "file_content", "new_content": "two\n"}]}
    result = json.loads(fleetdeck("patch", "generate", stdin=json.dumps(spec).encode(), cwd=folder).stdout)
    assert result["git_check"]["ok"] is True
    bad = fleetdeck("patch", "generate", stdin=json.dumps({"changes": [], "extra": 1}).encode(), cwd=folder)
    assert bad.returncode == 2 or bad.returncode == 1
    assert "extra" in (bad.stdout + bad.stderr).decode()


def test_encodings_round_trip_through_git_apply(tmp_path):
    repo = init_repo(tmp_path / "enc", commits=1)
    write(repo / "latin.txt", "café\ncrème\n".encode("latin-1"))
    write(repo / "sjis.txt", "日本語\nテスト\n".encode("shift_jis"))
    write(repo / "wide.txt", "wide\n".encode("utf-16"))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "encodings")
    spec = [{"file_path": "latin.txt", "mode": "search_replace", "encoding": "latin-1",
             "replacements": [{"search": "crème", "replace": "brûlée"}]},
            {"file_path": "sjis.txt", "mode": "file_content", "encoding": "shift_jis",
             "new_content": "日本語\n試験\n"}]
    proc = fleetdeck("patch", "generate", "--repo", str(repo), stdin=json.dumps(spec).encode())
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["git_check"]["ok"] is True and "+brûlée" in result["patch"]
    assert [e["encoding"] for e in result["entries"]] == ["iso8859-1", "shift_jis"]
    raw = fleetdeck("patch", "generate", "--repo", str(repo), "--raw", stdin=json.dumps(spec).encode()).stdout
    assert "brûlée".encode("latin-1") in raw and "試験".encode("shift_jis") in raw
    git(repo, "apply", "-", input=raw)
    assert (repo / "latin.txt").read_bytes() == "café\nbrûlée\n".encode("latin-1")
    assert (repo / "sjis.txt").read_bytes() == "日本語\n試験\n".encode("shift_jis")
    wide = [{"file_path": "wide.txt", "mode": "file_content", "encoding": "utf-16", "new_content": "x\n"}]
    proc = fleetdeck("patch", "generate", "--repo", str(repo), stdin=json.dumps(wide).encode())
    assert proc.returncode != 0 and b"binary" in proc.stdout + proc.stderr
    undeclared = [{"file_path": "latin.txt", "mode": "file_content", "new_content": "x\n"}]
    out = fleetdeck("patch", "generate", "--repo", str(repo), stdin=json.dumps(undeclared).encode())
    assert out.returncode != 0 and b"latin-1" in out.stdout + out.stderr  # the error says what to pass


@pytest.fixture
def fleet(tmp_path):
    repo = project(tmp_path / "fleet")
    db = tmp_path / "fleet.db"
    with open_index(db) as index:
        scan(index, [str(tmp_path / "fleet")])
    return {"repo": repo, "db": db, "root": tmp_path / "fleet"}


@pytest.mark.slow
async def test_mcp_runs_the_same_spec_changes(fleet):
    server = build_server(str(fleet["db"]))
    repo = fleet["repo"]
    out = fleet["db"].parent / "patches" / "agent.patch"  # an agent's patch files: fleetdeck's folder only
    for write_mode in ("create_only", "append", "upsert", "overwrite"):
        changes = every_mode(repo)
        if write_mode == "append":
            out.unlink()
        result = ok(await call(server, "patch.generate", {"repo": "proj", "changes": changes,
                                                          "patch_file": str(out), "write_mode": write_mode}))
        assert result["repo"]["name"] == "proj" and result["files_changed"] == 7, write_mode
        report = result["patch_file"]
        assert report["added_count"] + report["replaced_count"] == 7, write_mode
    applies(repo, out)
    listing = ok(await call(server, "patch.inspect", {"patch_file": str(out)}))
    assert listing["tool_policy_ok"] is True and listing["entry_count"] == 7
    valid = ok(await call(server, "patch.validate", {"patch_file": str(out)}))
    assert valid["tool_policy_ok"] is True and valid["valid"] is True
    dup = ok(await call(server, "patch.validate", {"patch": out.read_text() * 2}))
    assert dup["tool_policy_ok"] is False and dup["duplicate_paths"]
    pair = ok(await call(server, "patch.generate", {"changes": [every_mode(repo)[4]]}))
    assert pair["git_check"] is None and "repo" not in pair or pair["repo"] is None
    assert pair["entries"][0]["path"] == "virtual/readme.txt"
    code, message = error_of(await call(server, "patch.generate", {"changes": [every_mode(repo)[0]]}))
    assert code == "BAD_ARGUMENT" and "repository" in message
    outside = {"file_path": "/etc/passwd", "mode": "delete_file"}
    assert error_of(await call(server, "patch.generate", {"repo": "proj", "changes": [outside]}))[0] == "BAD_PATH"
