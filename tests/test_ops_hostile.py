"""A preview is a read: proposing against a hostile repository (its own config aiming every filter, driver,
hook and helper at a marker folder) runs nothing and writes nothing there. Only the approved run behaves as
git would in the person's hands."""

from __future__ import annotations

import pytest

from fleet.index.scan import scan
from fleet.index.store import open_index
from fleet.ops import service
from tests.fleets.hostile import age_git_dir, fired, hostile_repo, snapshot, snapshot_diff

PREVIEWS = [
    ("stage", {"all": True}),
    ("discard", {"paths": ["data.txt", "new.txt"], "include_untracked": True}),
    ("merge", {"source": "origin/main"}),
    ("rebase", {"onto": "origin/main"}),
    ("stash", {"include_untracked": True}),
    ("patch", {"patch": "diff --git a/data.txt b/data.txt\n--- a/data.txt\n+++ b/data.txt\n@@ -1 +1 @@\n"
                        "-data changed\n+data again\n"}),
]


@pytest.fixture
def hostile(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    root = tmp_path / "fleet"
    root.mkdir()
    marker = tmp_path / "marker"
    repo = hostile_repo(tmp_path, "evil", marker, root=root)
    index = open_index(tmp_path / "fleet.db")
    scan(index, [str(root)])
    age_git_dir(repo)
    for name in list(marker.iterdir()):
        name.unlink()  # what the builder's own git calls fired does not count
    yield index, repo, marker
    index.close()


@pytest.mark.parametrize("op,args", PREVIEWS, ids=[p[0] for p in PREVIEWS])
def test_previews_run_and_write_nothing(hostile, op, args):
    index, repo, marker = hostile
    before = snapshot(repo)
    dry = service.propose(index, "codex", op, str(repo), args, "look", dry_run=True)
    made = service.propose(index, "codex", op, str(repo), args, "do it")
    assert dry["status"] == "dry_run" and made["status"] == "pending"
    assert fired(marker) == []
    assert snapshot(repo) == before, snapshot_diff(before, snapshot(repo))


def test_the_approved_run_behaves_as_git_would(hostile):
    """Once a person approves, git runs as in their hands: the repository's hooks and filters too."""
    index, repo, marker = hostile
    made = service.propose(index, "codex", "stage", str(repo), {"all": True}, "stage everything")
    assert fired(marker) == []
    done = service.approve(index, made["proposal_id"], "cli")
    assert done["status"] in ("completed", "failed") and done["restore_point"]  # it ran, after its restore point
    assert "hook-post-index-change" in fired(marker) or "fsmonitor" in fired(marker), fired(marker)
