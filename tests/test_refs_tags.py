"""repo.refs on a repository with 500 tags: newest first by creator date by default (so the cap keeps the
latest releases), other orders on request; a gone upstream has the repo record's shape."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fleet.git.revs import found_of
from fleet.errors import FleetError
from fleet.index.scan import scan
from fleet.index.store import open_index
from fleet.repo.refs import repo_refs
from fleet.views.repos import public_records
from tests.fleets.gitbuild import git, with_upstream

TAGS = 500


@pytest.fixture(scope="module")
def tagged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """500 commits, each tagged v1.0.<n> (odd n annotated, with a tagger date out of commit order)."""
    repo = tmp_path_factory.mktemp("tags") / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    stream = []
    for n in range(TAGS):
        when = 1_600_000_000 + n * 3600
        stream.append(f"commit refs/heads/main\nmark :{n + 1}\ncommitter T <t@e> {when} +0000\n"
                      f"data <<EOF\nrelease {n}\nEOF\nM 644 inline f.txt\ndata <<EOF\n{n}\nEOF\n")
        if n % 2:   # annotated: its own date (a day later) is the creator date
            stream.append(f"tag v1.0.{n}\nfrom :{n + 1}\ntagger T <t@e> {when + 86400} +0000\n"
                          f"data <<EOF\nv1.0.{n}\nEOF\n")
        else:
            stream.append(f"reset refs/tags/v1.0.{n}\nfrom :{n + 1}\n\n")
    git(repo, "fast-import", "--quiet", input="".join(stream).encode())
    git(repo, "reset", "-q", "--hard", "main")
    return repo


def _oracle(repo: Path, *keys: str) -> list[str]:
    return git(repo, "for-each-ref", *[f"--sort={k}" for k in keys], "--format=%(refname:short)",
               "refs/tags").split()


def test_tags_are_newest_first_by_creator_date_and_the_cap_keeps_the_newest(tagged: Path):
    result = repo_refs(found_of(str(tagged)))
    assert result["tag_sort"] == "newest" and result["counts"]["tags"] == TAGS
    names = [t["name"] for t in result["tags"]]
    assert len(names) == 200 and result["truncated"] and result["omitted_count"] == TAGS - 200
    assert names == _oracle(tagged, "refname", "-creatordate")[:200]
    assert names[0] == "v1.0.499" and "v1.0.2" not in names   # alphabetical order would have cut v1.0.499
    created = [t["created"] for t in result["tags"]]
    assert created == sorted(created, reverse=True)


@pytest.mark.parametrize("sort,keys", [("oldest", ("refname", "creatordate")), ("name", ("refname",)),
                                       ("version", ("refname", "-version:refname"))])
def test_other_tag_orders_match_git(tagged: Path, sort: str, keys: tuple[str, ...]):
    result = repo_refs(found_of(str(tagged)), max_entries=TAGS, sort=sort)
    assert [t["name"] for t in result["tags"]] == _oracle(tagged, *keys)
    assert not result["truncated"]


def test_a_bad_sort_is_a_clear_error(tagged: Path):
    with pytest.raises(FleetError) as err:
        repo_refs(found_of(str(tagged)), sort="--upload-pack=x")
    assert err.value.code == "BAD_ARGUMENT"


def test_a_gone_upstream_has_one_shape_in_refs_and_the_repo_record(tmp_path: Path):
    repo = with_upstream(tmp_path, "gone", ahead=1)
    git(repo, "branch", "-q", "-r", "-d", "origin/main")
    branch = next(b for b in repo_refs(found_of(str(repo)))["branches"] if b["name"] == "main")
    index = open_index(tmp_path / "fleet.db")
    scan(index, [str(repo)])
    record = next(r for r in public_records(index) if r["path"] == os.path.realpath(repo))
    index.close()
    shape = ("upstream", "upstream_gone", "ahead", "behind")
    assert {k: branch[k] for k in shape} == {k: record[k] for k in shape} == {
        "upstream": "origin/main", "upstream_gone": True, "ahead": None, "behind": None}
