"""The throwaway object store merge-tree runs in (fleet/git/mergetree.py): the repository's loose objects read
into one pack of its own, its packs linked as cruft, no alternates left; the answer is still git's."""

from __future__ import annotations

import os
import tempfile
import zlib
from pathlib import Path

import pytest

from fleet.git import neutralize
from fleet.git.loosepack import write_pack
from fleet.git.mergetree import merge_tree, scratch_repo
from fleet.git.run import run_git
from fleet.repo.record import predict_merge
from tests.fleets.gitbuild import clone, commit_file, git, init_repo
from tests.fleets.hostile import age_git_dir, snapshot, snapshot_diff
from tests.fleets.repo_states import forked_edits


def _conflicted_in_a_real_merge(repo: Path, tmp_path: Path, theirs: str) -> list[str]:
    """The oracle: `git merge` in a throwaway clone, and the paths it leaves unmerged."""
    trial = clone(repo, tmp_path / "trial")
    git(trial, "merge", "-q", f"origin/{theirs}", "-m", "trial", check=False)
    return sorted(set(git(trial, "diff", "--name-only", "--diff-filter=U").split()))


def test_prediction_matches_a_real_merge_over_loose_and_packed_objects(tmp_path: Path):
    """Conflicts in several folders, a rename on one side, history packed and the recent work loose (some of
    it loose and packed at once): the predicted paths are the ones `git merge` leaves, nothing changes."""
    repo = init_repo(tmp_path / "r", commits=2)
    for folder in ("a", "b/c", "d"):
        commit_file(repo, f"{folder}/f.txt", "one\ntwo\nthree\n", f"add {folder}")
    commit_file(repo, "moved.txt", "".join(f"line {i}\n" for i in range(30)), "to be renamed")
    git(repo, "repack", "-adq")
    git(repo, "checkout", "-q", "-b", "topic")
    commit_file(repo, "a/f.txt", "one\nTOPIC\nthree\n", "topic a")
    commit_file(repo, "b/c/f.txt", "one\nTOPIC\nthree\n", "topic b/c")
    git(repo, "mv", "moved.txt", "d/renamed.txt")
    git(repo, "commit", "-q", "-m", "rename")
    git(repo, "repack", "-aq")                           # packed, and still loose (no -d)
    git(repo, "checkout", "-q", "main")
    commit_file(repo, "a/f.txt", "one\nMAIN\nthree\n", "main a")
    commit_file(repo, "b/c/f.txt", "one\nMAIN\nthree\n", "main b/c")
    commit_file(repo, "moved.txt", "".join(f"line {i}\n" for i in range(29)) + "main end\n", "edit the renamed")
    commit_file(repo, "d/f.txt", "one\ntwo\nthree\nfour\n", "main d")
    assert any(len(d) == 2 for d in os.listdir(repo / ".git" / "objects"))
    age_git_dir(repo)
    before = snapshot(repo)

    ours, theirs = git(repo, "rev-parse", "main", "topic").split()
    got = predict_merge(str(repo), str(repo / ".git"), ours, theirs)

    assert snapshot_diff(before, snapshot(repo)) == []
    assert got == {"clean": False, "paths": _conflicted_in_a_real_merge(repo, tmp_path, "topic"), "ours": ours,
                   "theirs": theirs}
    assert got["paths"] == ["a/f.txt", "b/c/f.txt"]


def test_the_throwaway_has_no_alternates_even_for_a_folder_named_with_a_newline_and_colon(tmp_path: Path):
    """The repository's objects are reachable only through the throwaway's own pack and cruft-marked links
    (an alternate would let git freshen the repository's loose files); the alternate `pack-objects` reads them
    through is C-quoted, so a separator or a newline in the path still works."""
    repo = init_repo(tmp_path / "new\nline:colon", commits=1)
    commit_file(repo, "x.txt", "base\n", "base")
    git(repo, "checkout", "-q", "-b", "side")
    commit_file(repo, "y.txt", "side\n", "side")
    git(repo, "checkout", "-q", "main")
    commit_file(repo, "z.txt", "main\n", "main")
    with scratch_repo(str(repo), str(repo / ".git")) as gitdir:
        info = Path(gitdir) / "objects" / "info"
        assert not (info / "alternates").exists()
        packs = sorted(os.listdir(Path(gitdir) / "objects" / "pack"))
        assert [p for p in packs if p.endswith(".pack")] and not [p for p in packs if p.endswith(".mtimes")]
        head = git(repo, "rev-parse", "HEAD").strip()
        assert run_git(gitdir, ["cat-file", "-t", head]).stdout == b"commit\n"
    res = merge_tree(str(repo), str(repo / ".git"), ["--name-only", "-z", "main", "side"])
    assert res.returncode == 0
    assert res.stdout.split(b"\0")[0].decode() == git(repo, "merge-tree", "--write-tree", "main", "side").split()[0]


def test_the_throwaway_goes_to_the_temp_dir_the_person_chose_else_to_ram(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch):
    repo = init_repo(tmp_path / "r", commits=1)
    chosen = tmp_path / "my-tmp"
    chosen.mkdir()
    monkeypatch.setenv("TMPDIR", str(chosen))
    tempfile.tempdir = None                              # tempfile caches its choice: look again
    try:
        with scratch_repo(str(repo), str(repo / ".git")) as gitdir:
            assert Path(gitdir).parent.parent == chosen
        assert list(chosen.iterdir()) == []              # removed afterwards
        monkeypatch.delenv("TMPDIR")
        tempfile.tempdir = None
        with scratch_repo(str(repo), str(repo / ".git")) as gitdir:
            expected = Path("/dev/shm") if os.access("/dev/shm", os.W_OK) else Path(tempfile.gettempdir())
            assert Path(gitdir).parent.parent == expected
        assert not Path(gitdir).exists()
    finally:
        tempfile.tempdir = None


def _loose_objects(repo: Path) -> dict[str, str]:
    """Every loose object of the repository with its type, as git reads it."""
    objects = repo / ".git" / "objects"
    oids = [d + name for d in os.listdir(objects) if len(d) == 2 for name in os.listdir(objects / d)]
    types = git(repo, "cat-file", "--batch-check=%(objectname) %(objecttype)", input="\n".join(oids).encode())
    return dict(line.split() for line in types.splitlines())


@pytest.mark.parametrize("object_format", ["sha1", "sha256"])
def test_the_loose_pack_is_one_git_verifies_and_holds_every_loose_object(tmp_path: Path, object_format: str):
    """Commits, trees, an annotated tag, blobs of 0 bytes, of a multi-byte size and past one stored deflate
    block: `git verify-pack` accepts the pack, which holds exactly the loose objects, each as git reads it."""
    repo = tmp_path / object_format
    repo.mkdir()
    git(repo, "init", "-q", f"--object-format={object_format}", "-b", "main")
    commit_file(repo, "empty.txt", "", "empty")
    commit_file(repo, "sub/mid.txt", "m" * 300, "mid")
    commit_file(repo, "big.bin", "".join(f"{i:08x}" for i in range(40_000)), "past 64 KiB")
    git(repo, "tag", "-a", "v1", "-m", "annotated")
    want = _loose_objects(repo)
    assert set(want.values()) == {"commit", "tree", "blob", "tag"}
    files = sorted((oid, str(repo / ".git" / "objects" / oid[:2] / oid[2:])) for oid in want)
    out = tmp_path / "out"
    out.mkdir()

    assert write_pack(files, str(out), hash_name=object_format) == len(want)

    (idx,) = out.glob("loose-*.idx")
    listing = git(repo, "verify-pack", "-v", str(idx))
    got = {line.split()[0]: line.split()[1] for line in listing.splitlines() if line.split()[0] in want}
    assert got == want
    bare = tmp_path / f"{object_format}-reader.git"        # and git reads the contents back from it
    git(tmp_path, "init", "-q", "--bare", f"--object-format={object_format}", str(bare))
    for name in os.listdir(out):
        os.link(out / name, bare / "objects" / "pack" / name)
    for oid in want:
        assert git(bare, "cat-file", "-p", oid) == git(repo, "cat-file", "-p", oid)


@pytest.mark.parametrize("size", [0, 1, 65_534, 65_535, 65_536, 131_070, 131_071, 200_000])
def test_stored_blocks_inflate_to_the_data_at_every_block_boundary(size: int):
    """The pack's entries are zlib streams of stored blocks written without zlib: zlib inflates each to exactly
    its data, to the stream's end (adler32 checked), with nothing left over."""
    from fleet.git.loosepack import stored_zlib

    data = os.urandom(size)
    inflate = zlib.decompressobj()
    assert inflate.decompress(stored_zlib(data)) == data and inflate.eof and not inflate.unused_data
    assert stored_zlib(data[:100]) == zlib.compress(data[:100], 0)   # what zlib itself writes, byte for byte


def test_files_that_are_no_whole_loose_object_are_left_out(tmp_path: Path):
    repo = init_repo(tmp_path / "r", commits=1)
    real = _loose_objects(repo)
    folder = repo / ".git" / "objects" / "ab"
    folder.mkdir(exist_ok=True)
    fakes = {"link": "ab" + "1" * 38, "garbage": "ab" + "2" * 38, "cut": "ab" + "3" * 38, "long": "ab" + "4" * 38}
    (folder / fakes["link"][2:]).symlink_to(repo / ".git" / "HEAD")
    (folder / fakes["garbage"][2:]).write_bytes(b"not zlib at all")
    some = next(oid for oid, kind in real.items() if kind == "blob")
    whole = (repo / ".git" / "objects" / some[:2] / some[2:]).read_bytes()
    (folder / fakes["cut"][2:]).write_bytes(whole[:-6])
    (folder / fakes["long"][2:]).write_bytes(zlib.compress(b"blob 3\0abcdef"))
    files = sorted((oid, str(repo / ".git" / "objects" / oid[:2] / oid[2:])) for oid in [*real, *fakes.values()])
    out = tmp_path / "out"
    out.mkdir()
    assert write_pack(files, str(out)) == len(real)


def test_a_loose_set_too_large_for_memory_is_packed_by_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Past the bound (here: a few bytes), `git pack-objects` packs the loose objects instead; the merge is
    still git's, and the repository is left as it was."""
    from fleet.git import loosepack

    repo = init_repo(tmp_path / "r", commits=1)
    forked_edits(repo, "x.txt", "side", "side\n", "main\n", ("side", "main"))
    files = sorted((oid, str(repo / ".git" / "objects" / oid[:2] / oid[2:])) for oid in _loose_objects(repo))
    monkeypatch.setattr(loosepack, "MAX_PACK_BYTES", 8)
    with pytest.raises(loosepack.TooLarge):
        write_pack(files, str(tmp_path))
    age_git_dir(repo)
    before = snapshot(repo)
    with scratch_repo(str(repo), str(repo / ".git")) as gitdir:
        packs = os.listdir(Path(gitdir) / "objects" / "pack")
        assert any(name.startswith("loose-") and name.endswith(".pack") for name in packs)
        assert not (Path(gitdir) / "objects" / "info" / "alternates").exists()
    ours, theirs = git(repo, "rev-parse", "main", "side").split()
    got = predict_merge(str(repo), str(repo / ".git"), ours, theirs)
    assert snapshot_diff(before, snapshot(repo)) == []
    assert got == {"clean": False, "paths": _conflicted_in_a_real_merge(repo, tmp_path, "side"), "ours": ours,
                   "theirs": theirs}
    assert got["paths"] == ["x.txt"]


def test_git_in_the_throwaway_gets_no_guard_of_its_own(tmp_path: Path):
    """The throwaway's only config is fleetdeck's own (no driver to override): git runs there in the
    UNGUARDED mode (fleet.git.command), so no guard is built or cached under a throwaway's path (one dead
    entry per prediction)."""
    repo = init_repo(tmp_path / "r", commits=1)
    forked_edits(repo, "x.txt", "side", "side\n", "main\n", ("side", "main"))
    ours, theirs = git(repo, "rev-parse", "main", "side").split()
    before = set(neutralize._CACHE)
    assert predict_merge(str(repo), str(repo / ".git"), ours, theirs)["paths"] == ["x.txt"]
    assert [key for key in set(neutralize._CACHE) - before if "fleetdeck-mt-" in key] == []
