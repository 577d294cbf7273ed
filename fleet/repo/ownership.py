"""Who works where in a repository: churn under a path (commits, authors, most-changed files in a window)
and its owners from CODEOWNERS, for agents working inside a monorepo.

CODEOWNERS is read from HEAD (the committed file, as the forges read it; nothing from the working tree) at
every place GitHub (`.github/`, root, `docs/`) and GitLab (root, `docs/`, `.gitlab/`) look, GitHub's order
first. Patterns are gitignore-style (`/` anchors, `*`, `**`, `?`, a trailing `/` for directory contents) and
the last matching line wins; a GitLab `[Section]` has its own last match and the owners of all sections add
up. Churn is `git log --no-renames --name-only` over the window, capped in commits walked.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from typing import Any, NotRequired, TypedDict

from fleet.caps import Capped, cap, check_int
from fleet.errors import FleetError
from fleet.git.revs import has_head
from fleet.git.run import out, run, text
from fleet.repo.scope import resolve_file_in_repo
from fleet.timespec import parse_since

# Where each forge looks, in its order (the first file found is the one it uses).
GITHUB_PLACES = (".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS")
GITLAB_PLACES = ("CODEOWNERS", "docs/CODEOWNERS", ".gitlab/CODEOWNERS")
MAX_CODEOWNERS = 3 * 1024 * 1024  # GitHub ignores larger files
MAX_COMMITS = 10000
_SECTION = re.compile(r"^\^?\[([^\]]+)\](?:\[\d+\])?(?:\s+(.*))?$")


class ScopeAuthor(TypedDict):
    name: str
    email: str
    commits: int


class ScopeFile(TypedDict):
    path: str
    commits: int
    owners: NotRequired[list[str] | None]


class CodeOwners(TypedDict):
    file: str
    read_by: list[str]
    files_found: list[str]
    owners: list[str]
    rules: list[dict]


class Scope(Capped):
    path: str | None
    since: str | None
    commit_count: int
    commits_truncated: bool
    first_commit_at: str | None
    last_commit_at: str | None
    authors: list[ScopeAuthor]
    author_count: int
    authors_truncated: bool
    files: list[ScopeFile]
    file_count: int
    files_truncated: bool
    codeowners: CodeOwners | None


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    """gitignore-style pattern → regex over repo-relative paths; a match on a directory covers its contents."""
    dir_only = pattern.endswith("/")
    body = pattern.strip("/") if pattern != "/" else ""
    anchored = pattern.startswith("/") or "/" in body
    out_ = []
    i = 0
    while i < len(body):
        if body.startswith("**/", i):
            out_.append("(?:.*/)?")
            i += 3
        elif body.startswith("**", i):
            out_.append(".*")
            i += 2
        elif body[i] == "*":
            out_.append("[^/]*")
            i += 1
        elif body[i] == "?":
            out_.append("[^/]")
            i += 1
        elif body[i] == "\\" and i + 1 < len(body):
            out_.append(re.escape(body[i + 1]))
            i += 2
        else:
            out_.append(re.escape(body[i]))
            i += 1
    prefix = "^" if anchored else "^(?:.*/)?"
    return re.compile(prefix + "".join(out_) + ("/.*$" if dir_only else "(?:/.*)?$"))


def _split(line: str) -> list[str]:
    """Whitespace-separated tokens, `\\ ` kept inside a token, a `#` token ending the line."""
    tokens = re.findall(r"(?:\\.|[^\s\\])+", line)
    for n, token in enumerate(tokens):
        if token.startswith("#"):
            return tokens[:n]
    return tokens


def parse_codeowners(content: str) -> list[dict[str, Any]]:
    """Rules in file order: `{pattern, owners, line, section, regex}`."""
    rules = []
    section, defaults = None, []
    for number, raw in enumerate(content.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        header = _SECTION.match(line)
        if header:
            section, defaults = header.group(1), _split(header.group(2) or "")
            continue
        tokens = _split(line)
        if not tokens:
            continue
        rules.append({"pattern": tokens[0], "owners": tokens[1:] or list(defaults), "line": number,
                      "section": section, "regex": _pattern_regex(tokens[0])})
    return rules


def owners_of(rules: list[dict[str, Any]], path: str, is_dir: bool = False) -> dict[str, Any]:
    """`{owners, rules}` for a repo-relative path: per section the last matching rule wins, owners add up."""
    target = path.rstrip("/") + "/" if is_dir else path
    last: dict[str | None, dict[str, Any]] = {}
    for rule in rules:
        if rule["regex"].match(target):
            last[rule["section"]] = rule
    owners: list[str] = []
    for rule in last.values():
        owners.extend(o for o in rule["owners"] if o not in owners)
    return {"owners": owners, "rules": [{"pattern": r["pattern"], "line": r["line"], "section": r["section"]}
                                        for r in last.values()]}


def read_codeowners(path: str) -> dict[str, Any] | None:
    """The CODEOWNERS file the forges use at HEAD: `{file, read_by, files_found, content}`, or None."""
    if not has_head(path):
        return None
    places = list(dict.fromkeys(GITHUB_PLACES + GITLAB_PLACES))
    checked = text(out(path, ["cat-file", "--batch-check=%(objecttype) %(objectsize) %(rest)"],
                       input_bytes="".join(f"HEAD:{p} {p}\n" for p in places).encode()))
    found = []
    for line in checked.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[0] == "blob":
            found.append((parts[2], int(parts[1])))
    if not found:
        return None
    names = [name for name, _ in found]
    github = next((p for p in GITHUB_PLACES if p in names), None)
    gitlab = next((p for p in GITLAB_PLACES if p in names), None)
    chosen = github or gitlab
    size = dict(found)[chosen]
    if size > MAX_CODEOWNERS:
        raise FleetError("LIMIT", f"{chosen} is {size} bytes; forges ignore CODEOWNERS over {MAX_CODEOWNERS}")
    content = text(out(path, ["cat-file", "blob", f"HEAD:{chosen}"]))
    read_by = [forge for forge, used in (("github", github), ("gitlab", gitlab)) if used == chosen]
    return {"file": chosen, "read_by": read_by, "files_found": names, "content": content}


def _churn(path: str, spec: str | None, since: float) -> tuple[list[dict[str, Any]], bool]:
    """Commits in the window touching `spec`: [{sha, author, email, at, files}], and whether the walk was cut."""
    window = [f"--since=@{int(since)}"] if since >= 1 else []  # git reads `@0` as no date at all
    args = ["log", "-z", "--no-renames", "--name-only", f"--max-count={MAX_COMMITS + 1}", *window,
            "--format=%x01%H%x00%aN%x00%aE%x00%ct", "HEAD", "--"]
    data = text(run(path, args + ([spec] if spec else []), max_bytes=64 * 1024 * 1024).stdout)
    commits: list[dict[str, Any]] = []
    tokens = data.split("\0")
    i = 0
    while i < len(tokens):
        token = tokens[i].lstrip("\n")
        if token.startswith("\x01") and len(token) in (41, 65) and i + 3 < len(tokens):
            commits.append({"sha": token[1:], "author": tokens[i + 1], "email": tokens[i + 2],
                            "at": int(tokens[i + 3]), "files": []})
            i += 4
            continue
        if token and commits:
            commits[-1]["files"].append(token)
        i += 1
    cut = len(commits) > MAX_COMMITS
    return commits[:MAX_COMMITS], cut


def repo_scope(path: str, scope_path: str | None = None, since: str | int = "90d",
               max_files: int = 20, max_authors: int = 20) -> Scope:
    """Churn under `scope_path` (default: the whole repo) since `since`, and its CODEOWNERS owners."""
    check_int(max_files, "max_files", 1, 200)
    check_int(max_authors, "max_authors", 1, 200)
    spec = resolve_file_in_repo(path, scope_path) if scope_path not in (None, "", ".") else None
    start = parse_since(since)
    commits, cut = _churn(path, spec, start) if has_head(path) else ([], False)
    authors = Counter((c["author"], c["email"]) for c in commits)
    files = Counter(f for c in commits for f in c["files"]
                    if spec is None or f == spec or f.startswith(spec + "/"))
    codeowners = read_codeowners(path)
    rules = parse_codeowners(codeowners["content"]) if codeowners else []
    is_dir = spec is None or os.path.isdir(os.path.join(path, spec))
    top_files = [{"path": f, "commits": n, **({"owners": owners_of(rules, f)["owners"]} if codeowners else {})}
                 for f, n in sorted(files.items(), key=lambda kv: (-kv[1], kv[0]))]
    top_authors = [{"name": a, "email": e, "commits": n}
                   for (a, e), n in sorted(authors.items(), key=lambda kv: (-kv[1], kv[0]))]
    files_kept, files_info = cap(top_files, max_files)
    authors_kept, authors_info = cap(top_authors, max_authors)
    owned = owners_of(rules, spec or "", is_dir) if codeowners else None
    return {
        "path": spec, "since": start, "commit_count": len(commits), "commits_truncated": cut,
        "first_commit_at": min((c["at"] for c in commits), default=None),
        "last_commit_at": max((c["at"] for c in commits), default=None),
        "authors": authors_kept, "author_count": len(top_authors), "authors_truncated": authors_info["truncated"],
        "files": files_kept, "file_count": len(top_files), "files_truncated": files_info["truncated"],
        "codeowners": None if codeowners is None else {
            "file": codeowners["file"], "read_by": codeowners["read_by"], "files_found": codeowners["files_found"],
            "owners": owned["owners"], "rules": owned["rules"]},
        "truncated": cut or files_info["truncated"] or authors_info["truncated"],
        "omitted_count": files_info["omitted_count"] + authors_info["omitted_count"],
    }
