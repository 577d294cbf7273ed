"""Which shell commands would destroy uncommitted work: found by splitting the command line, never by running
anything.

The documented list (docs/safety-net.md): `git reset --hard`, `git checkout -- <paths>` / `git checkout .`,
`git checkout [<tree-ish>] <existing path>`, `git switch -f|--discard-changes`, `git restore` without `--staged`
(or with `--worktree`), `git clean -f…`, `git stash drop|clear`, `git worktree remove --force`, `git branch -D`,
`git push --force` (also `-f`, `--force-with-lease`, a `+refspec`), and `rm -r…` of a path inside the repository.
A command line is split with shlex and cut at `&&`, `||`, `;`, `|`, `&`, parentheses and new lines outside
quotes (a commit message that mentions `git reset --hard` is not a reset); leading `VAR=value`, `sudo`, `env`,
`command`, `exec`, `time` and `nohup` are dropped, and the script of `sh|bash|zsh -c '…'` is judged itself. A
line that shlex cannot split (an open quote) is cut at those operators and judged by its blank-separated words.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass

_SEPARATORS = re.compile(r"&&|\|\||[;|&\n()]")
_OPERATORS = "();|&\n"
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh"})
_PREFIXES = frozenset({"sudo", "env", "command", "exec", "time", "nohup", "builtin"})
_GIT_VALUED = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path"})


@dataclass(frozen=True)
class Danger:
    """One destructive part of a command line: what it does, and the folder it names (for `rm`)."""

    kind: str          # reset-hard, checkout-paths, switch-discard, restore, clean, stash-drop, worktree-remove,
                       # branch-delete, push-force, rm-recursive
    text: str          # the part as written, for the person
    target: str | None = None


def _parts(command: str) -> list[list[str]]:
    """The simple commands of a command line, each as its words (operators inside quotes are words)."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=_OPERATORS + "<>")
    lexer.whitespace, lexer.whitespace_split = " \t\r", True
    try:
        tokens = list(lexer)
    except ValueError:          # an open quote: the words as they stand
        return [part.split() for part in _SEPARATORS.split(command)]
    parts: list[list[str]] = [[]]
    for token in tokens:
        if token and all(ch in _OPERATORS for ch in token):
            parts.append([])
        else:
            parts[-1].append(token)
    return parts


def _strip_prefixes(words: list[str]) -> list[str]:
    while words and (words[0] in _PREFIXES or re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0])):
        words = words[1:]
    return words


def _git_subcommand(words: list[str]) -> tuple[str | None, list[str]]:
    """`git [global options] sub args` -> (sub, args)."""
    i = 1
    while i < len(words) and words[i].startswith("-"):
        i += 2 if words[i] in _GIT_VALUED else 1
    return (words[i], words[i + 1:]) if i < len(words) else (None, [])


def _short_flags(args: list[str]) -> set[str]:
    return {ch for a in args if re.fullmatch(r"-[A-Za-z]+", a) for ch in a[1:]}


def _checkout_paths(args: list[str], flags: set[str], cwd: str) -> bool:
    """`git checkout` that overwrites files: paths after `--`, `.`, `-f`, a tree-ish and paths, or one word
    that names an existing path (a branch name that is no path is a switch)."""
    if "--" in args:
        return args.index("--") < len(args) - 1
    if "." in args or "f" in flags or "--force" in args:
        return True
    if {"-b", "-B", "--orphan"} & set(args):
        return False            # a new branch, from a start point
    positional = [a for a in args if not a.startswith("-")]
    return len(positional) > 1 or (len(positional) == 1 and os.path.lexists(os.path.join(cwd, positional[0])))


def _git_danger(sub: str, args: list[str], cwd: str) -> str | None:
    flags = _short_flags(args)
    if sub == "reset":
        return "reset-hard" if "--hard" in args else None
    if sub == "checkout":
        return "checkout-paths" if _checkout_paths(args, flags, cwd) else None
    if sub == "switch":
        return "switch-discard" if "f" in flags or {"--force", "--discard-changes"} & set(args) else None
    if sub == "restore":
        staged_only = ("--staged" in args or "S" in flags) and not ("--worktree" in args or "W" in flags)
        return None if staged_only else "restore"
    if sub == "clean":
        return "clean" if "f" in flags or "--force" in args else None
    if sub == "stash":
        return "stash-drop" if args[:1] in (["drop"], ["clear"]) else None
    if sub == "worktree":
        return "worktree-remove" if args[:1] == ["remove"] and ("--force" in args or "f" in flags) else None
    if sub == "branch":
        forced = "D" in flags or ("--delete" in args and ("--force" in args or "f" in flags))
        return "branch-delete" if forced else None
    if sub == "push":
        forced = "f" in flags or any(a in ("--force", "--mirror", "--delete") or a.startswith("--force-with-lease")
                                     or (a.startswith("+") and len(a) > 1) for a in args)
        return "push-force" if forced else None
    return None


def dangers(command: str, cwd: str, repo: str) -> list[Danger]:
    """The destructive parts of `command` run in `cwd`, for the repository at `repo`."""
    found = []
    for words in _parts(command or ""):
        words = _strip_prefixes(words)
        if not words:
            continue
        name = os.path.basename(words[0])
        part = shlex.join(words)
        script = _shell_script(words) if name in _SHELLS else None
        if script is not None:
            found += dangers(script, cwd, repo)
        elif name == "git":
            sub, args = _git_subcommand(words)
            kind = _git_danger(sub, args, cwd) if sub else None
            if kind:
                found.append(Danger(kind, part))
        elif name == "rm":
            args = [w for w in words[1:] if w != "--"]
            flags = _short_flags(args)
            if "r" in flags or "R" in flags or "--recursive" in args:
                for target in (a for a in args if not a.startswith("-")):
                    path = os.path.realpath(os.path.join(cwd, os.path.expanduser(target)))
                    if path == repo or path.startswith(repo.rstrip("/") + "/") or repo.startswith(path + "/"):
                        found.append(Danger("rm-recursive", part, path))
    return found


def _shell_script(words: list[str]) -> str | None:
    """The script of `bash -c SCRIPT` (also `-lc`, `-ec` …), else None."""
    for i, word in enumerate(words[1:-1], 1):
        if re.fullmatch(r"-[A-Za-z]*c[A-Za-z]*", word):
            return words[i + 1]
        if not word.startswith("-"):
            return None
    return None
