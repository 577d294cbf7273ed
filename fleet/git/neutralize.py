"""The config overrides that keep a repository's own drivers from running, per working directory, cached.

For the folder a git call runs in, find the git dir git will use (walking up as git does), read that repo's
config files (fleet/git/config.py), and turn every filter/diff driver name they define into overrides
passed as command-scope config (`GIT_CONFIG_COUNT`/`KEY_n`/`VALUE_n`, which beats every config file and,
unlike `-c`, cannot be confused by a name holding `=`). Each override restores the value the person's
global or system config gives that key (git-lfs keeps working) or empties it (the driver is gone).
Results are cached per folder and re-checked with one `stat` per file they were built from.
"""

from __future__ import annotations

import os
import threading

from fleet.git.command import UNGUARDED, base_env, execute, git_command
from fleet.git.config import ConfigError, RepoConfig, read_config_file, read_repo_config
from fleet.git.files import MAX_POINTER_BYTES

# Per driver section: the keys that name commands, and the value that disables each when nothing trusted
# defines it (`required=false`, or git fails the whole read once the filter is gone).
DRIVER_KEYS = {b"filter": {b"clean": b"", b"smudge": b"", b"process": b"", b"required": b"false"},
               b"diff": {b"textconv": b"", b"command": b""}}

_Sig = tuple[int, int, int, int] | None


def _sig(path: str, follow: bool = False) -> _Sig:
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except (OSError, ValueError):
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)


class _Watched:
    """The files (present or not) a cached answer depends on, with their stat signatures."""

    def __init__(self) -> None:
        self.sigs: dict[str, _Sig] = {}

    def add(self, path: str) -> _Sig:
        sig = self.sigs[path] = _sig(path)
        return sig

    def fresh(self) -> bool:
        return all(_sig(path) == sig for path, sig in self.sigs.items())


def _is_dir(sig: _Sig, path: str) -> bool:
    return sig is not None and os.path.isdir(path)


def find_git_dirs(cwd: str, watched: _Watched) -> tuple[str, str] | None:
    """(git dir, common dir) git would use in `cwd`, or None outside any repository.

    Walks up like git's discovery: a `.git` directory, a `.git` file (`gitdir: …`), or a bare repo.
    Ceilings and filesystem boundaries that would stop git earlier are ignored (more config read is safe).
    """
    folder = os.path.abspath(cwd)
    while True:
        dotgit = os.path.join(folder, ".git")
        sig = watched.add(dotgit)
        gitdir = None
        if sig is not None and os.path.isfile(dotgit):
            gitdir = _gitfile_target(dotgit, folder)
        elif _is_dir(sig, dotgit) and os.path.exists(os.path.join(dotgit, "HEAD")):
            gitdir = dotgit
        elif watched.add(os.path.join(folder, "HEAD")) is not None and \
                watched.add(os.path.join(folder, "config")) is not None:
            gitdir = folder
        if gitdir is not None:
            return gitdir, _common_dir(gitdir, watched)
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def _gitfile_target(path: str, folder: str) -> str:
    line = (read_config_file(path, MAX_POINTER_BYTES) or b"").split(b"\n", 1)[0].strip()
    if not line.startswith(b"gitdir:"):
        raise ConfigError(f"{path} is not a gitfile")
    return os.path.normpath(os.path.join(folder, os.fsdecode(line[7:].strip())))


def _common_dir(gitdir: str, watched: _Watched) -> str:
    pointer = os.path.join(gitdir, "commondir")
    if watched.add(pointer) is None:
        return gitdir
    target = (read_config_file(pointer, MAX_POINTER_BYTES) or b"").split(b"\n", 1)[0].strip()
    return os.path.normpath(os.path.join(gitdir, os.fsdecode(target)))


class Guard:
    """The answer for one folder: the repo's config summary and the environment overrides it needs."""

    def __init__(self, config: RepoConfig | None, env: dict[str, str], watched: _Watched) -> None:
        self.config = config
        self.env = env
        self.watched = watched


_CACHE: dict[str, Guard] = {}
_LOCK = threading.Lock()


def guard_for(cwd: str) -> Guard:
    """The cached Guard for `cwd`, rebuilt when any file it was built from changed. Raises ConfigError."""
    key = os.fspath(cwd)
    guard = _CACHE.get(key)
    if guard is not None and guard.watched.fresh():
        return guard
    guard = _build(key)
    with _LOCK:
        if len(_CACHE) > 65536:
            _CACHE.clear()
        _CACHE[key] = guard
    return guard


def _build(cwd: str) -> Guard:
    watched = _Watched()
    dirs = find_git_dirs(cwd, watched)
    if dirs is None:
        return Guard(None, {}, watched)
    gitdir, common = dirs
    files = [os.path.join(common, "config")]
    if os.path.normpath(gitdir) != os.path.normpath(common):
        files.append(os.path.join(gitdir, "config.worktree"))
    else:
        files.append(os.path.join(common, "config.worktree"))
    config = read_repo_config(files)
    for path in config.files:
        watched.add(path)
    return Guard(config, overrides(config), watched)


def overrides(config: RepoConfig) -> dict[str, str]:
    """GIT_CONFIG_COUNT/KEY/VALUE variables that replace every command key the repo's config sets.

    A key the repo sets gets the person's value or is emptied. A filter the repo names gets `required`
    from the person's config, or false once it cannot work: git skips `clean`/`smudge` whenever `process`
    is set, even to the empty string, so a repo-set `process` the person does not define turns it off.
    """
    pairs: list[tuple[bytes, bytes]] = []
    trusted = trusted_values() if any(config.drivers.values()) else {}
    for section, names in config.drivers.items():
        for name in sorted(names):
            keys = names[name]
            for key, off in DRIVER_KEYS[section].items():
                if key in keys and key != b"required":
                    pairs.append((section + b"." + name + b"." + key, trusted.get((section, name, key), off)))
            if section == b"filter":
                broken = b"process" in keys and not trusted.get((section, name, b"process"))
                required = b"false" if broken else trusted.get((section, name, b"required"), b"false")
                pairs.append((b"filter." + name + b".required", required))
    if not pairs:
        return {}
    env = {"GIT_CONFIG_COUNT": str(len(pairs))}
    for i, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{i}"] = os.fsdecode(key)
        env[f"GIT_CONFIG_VALUE_{i}"] = os.fsdecode(value)
    return env


# --- the person's own config: trusted --------------------------------------------------------------------

_TRUSTED: dict[tuple, dict[tuple[bytes, bytes, bytes], bytes]] = {}


def git_config_dir() -> str:
    """Git's own per-user folder, as git finds it at each run: `$XDG_CONFIG_HOME/git`, else `~/.config/git`
    (git's rule, not the XDG spec's: a relative XDG_CONFIG_HOME is used as given)."""
    home = os.environ.get("HOME", "")
    return os.path.join(os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config"), "git")


def global_config_files() -> list[str]:
    """The person's global config files, in the order git reads them (the later wins)."""
    return [os.path.join(git_config_dir(), "config"), os.path.join(os.environ.get("HOME", ""), ".gitconfig")]


def trusted_files() -> list[str]:
    """The config files git reads besides a repository's: the system's, then the person's."""
    return ["/etc/gitconfig", *global_config_files()]


def trusted_signature() -> tuple[tuple[str, _Sig, _Sig], ...]:
    """`trusted_files` with the stat signature of each, as it is and through a link (a dotfiles manager's
    `~/.gitconfig` link stays the same when the file it names is edited): what an answer cached from them
    depends on (`trusted_values`, the in-process merge verdict's reading of the person's config)."""
    return tuple((path, _sig(path), _sig(path, follow=True)) for path in trusted_files())


def trusted_values() -> dict[tuple[bytes, bytes, bytes], bytes]:
    """Driver keys as the person's system and global config (with their includes) define them, via git.

    Asked only when a repo defines a driver name, then cached until one of those files changes.
    """
    key = trusted_signature()
    values = _TRUSTED.get(key)
    if values is None:
        values = {}
        for record in trusted_config_listing().split(b"\0"):
            name, newline, value = record.partition(b"\n")
            section, _, rest = name.partition(b".")
            sub, _, key_name = rest.rpartition(b".")
            if section in DRIVER_KEYS and sub and key_name in DRIVER_KEYS[section]:
                values[(section, sub, key_name)] = value if newline else b"true"
        _TRUSTED.clear()
        _TRUSTED[key] = values
    return values




def trusted_config_listing() -> bytes:
    """`git config -z --list --includes` of the person's system and global config only (no repository).

    The two global files are listed one by one, in git's order: `git config --global` of git before 2.46
    reads only `~/.gitconfig` when it exists, though every other git command reads `$XDG_CONFIG_HOME/git/
    config` before it."""
    listing = _trusted_run(["config", "--system", "--includes", "-z", "--list"])
    for path in global_config_files():
        if os.path.isfile(path):
            listing += _trusted_run(["config", "--file", path, "--includes", "-z", "--list"])
    return listing


def _trusted_run(args: list[str]) -> bytes:
    """git on the person's own config files: it reads no repository, so it needs (and must not recurse into) no
    guard."""
    return execute(git_command(os.sep, args, UNGUARDED), base_env(UNGUARDED), args, os.sep,
                   ok_codes=(0, 1)).stdout
