"""The repo page's working-tree files: conflicted, staged, modified and untracked paths, capped with full
counts, equal to what `git status` says (git is the oracle: porcelain v1, parsed here on its own)."""

from __future__ import annotations

from fleet.index.scan import scan
from fleet.index.store import open_index
from fleet.views.detail import FILES_SHOWN, repo_detail
from tests.fleets.gitbuild import commit_file, git, init_repo, write


def _oracle(repo) -> dict[str, list[str]]:
    """staged / unstaged / untracked / conflicted paths from `git status --porcelain -z` (v1)."""
    out = {"staged": [], "unstaged": [], "untracked": [], "conflicted": []}
    fields = git(repo, "status", "--porcelain", "-z").split("\0")  # as `git status` shows them
    i = 0
    while i < len(fields):
        item = fields[i]
        i += 1
        if not item:
            continue
        xy, path = item[:2], item[3:]
        if xy[0] in "RC":
            i += 1  # the rename's source
        if xy == "??":
            out["untracked"].append(path)
        elif "U" in xy or xy in ("AA", "DD"):
            out["conflicted"].append(path)
        else:
            if xy[0] != " ":
                out["staged"].append(path)
            if xy[1] != " ":
                out["unstaged"].append(path)
    return {k: sorted(v) for k, v in out.items()}


def test_the_repo_page_lists_every_kind_of_file_as_git_status_does(tmp_path) -> None:
    root = tmp_path / "fleet"
    repo = init_repo(root / "app", commits=1)
    commit_file(repo, "app.py", "def handler():\n    return 200\n", "add app")
    commit_file(repo, "old_name.txt", "rename me\n", "add a file to rename")
    git(repo, "checkout", "-q", "-b", "topic")
    commit_file(repo, "app.py", "def handler():\n    return 429\n", "topic side")
    git(repo, "checkout", "-q", "main")
    commit_file(repo, "app.py", "def handler():\n    return 204\n", "main side")
    git(repo, "merge", "-q", "topic", check=False)  # app.py conflicts
    git(repo, "mv", "old_name.txt", "new name.txt")
    write(repo / "README.md", "modified, not staged\n")
    write(repo / "staged.txt", "new and staged\n")
    git(repo, "add", "staged.txt")
    write(repo / "scratch" / "note.txt", "x\n")  # git shows the folder: `scratch/`
    for n in range(FILES_SHOWN + 6):
        write(repo / f"note-{n:03}.txt", "x\n")
    index = open_index(tmp_path / "fleet.db")
    scan(index, [str(root)])
    files = repo_detail(index, str(repo.resolve()))["files"]
    truth = _oracle(repo)
    assert truth["conflicted"] == ["app.py"] and len(truth["untracked"]) == FILES_SHOWN + 7
    assert "scratch/" in truth["untracked"]
    for key in ("staged", "unstaged", "untracked", "conflicted"):
        shown = [f if isinstance(f, str) else f["path"] for f in files[key]]
        assert files["counts"][key] == len(truth[key]), key
        assert shown == truth[key][:FILES_SHOWN], key
    renamed = next(f for f in files["staged"] if f["path"] == "new name.txt")
    assert (renamed["status"], renamed["old_path"]) == ("renamed", "old_name.txt")
    assert files["truncated"] and files["omitted_count"] == 7
    assert files["conflicted"][0]["kind"] == "both_modified"
    index.close()
