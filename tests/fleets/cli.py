"""How tests run this checkout's CLI: `run_cli`, the one way, in this process or in a subprocess of its own.

In this process (the default) `fleet.cli.main` runs as `python -m fleet` would run it, without the ~0.3 s of
Python start-up and imports a subprocess costs: its own stdin, stdout and stderr (bytes, in the encodings
and error handlers a child's would have, read back as `subprocess.run` reads a child's), its `argv`, its
environment, its working directory, logging as `main` sets it up, and a fresh audit log; everything it
changed in this process is put back afterwards. `process=True` runs a real process: for tests of what only
a process shows (its exit status as the shell sees it, a signal, a controlling terminal or none, resource
limits, stdout purity of a server, the interpreter's own environment handling).
"""

from __future__ import annotations

import contextlib
import faulthandler
import io
import locale
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Iterator

PROJECT_ROOT = Path(__file__).resolve().parent.parent.parent
_NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", "venv", "__pycache__", "build", "dist", "*.egg-info",
                                     ".pytest_cache", ".hypothesis", "node_modules")


def copy_checkout(dest: Path) -> Path:
    """This checkout's source at `dest`, without what a build or an install left in it: what a fresh clone
    builds and installs (a stale `build/` would put files the tree no longer has into a wheel), and the build
    writes its own `build/` and egg-info there instead of into the checkout."""
    shutil.copytree(PROJECT_ROOT, dest, ignore=_NOT_SOURCE)
    return dest


def fleetdeck_argv(*args: str) -> list[str]:
    """argv that runs this checkout's CLI in a subprocess (`python -m fleet` == the `fleetdeck` script)."""
    return [sys.executable, "-m", "fleet", *args]


def fleetdeck_env(**extra: str | None) -> dict[str, str]:
    """Environment for CLI subprocesses: this checkout first on sys.path, the test HOME, plus `extra` (a
    variable given None is not set at all)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(PROJECT_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return {name: value for name, value in env.items() if value is not None}


HANG_GRACE_S = 300  # past its timeout, an in-process call is taken as hung (see run_cli)

# What a subprocess call may pass through to subprocess.run that a call in this process honours too.
_IN_PROCESS_POPEN = {"cwd", "check"}


def run_cli(*args: str, db: Path | str | None = None, stdin: str | bytes | None = None, text: bool = True,
            env: dict[str, str | None] | None = None, timeout: float = 120, process: bool = False,
            **popen: Any) -> subprocess.CompletedProcess:
    """Run this checkout's CLI as a person's shell or an agent's would: `--db db` first when given, `stdin` as
    its input (else no input at all: /dev/null, never the test runner's terminal), output captured (text
    unless `text=False`), `env` added to `fleetdeck_env()` (None: not set). In this process unless `process=True` (see the
    module's docstring); `popen` passes through to the subprocess (`cwd`, `check`, `start_new_session`,
    `preexec_fn`), and only `cwd` and `check` mean anything in this process. A call in this process that
    takes longer than `timeout` fails as a subprocess's would (after it returns: nothing here can kill it; one that
    hangs ends the test process HANG_GRACE_S later, with every thread's stack)."""
    argv = [*(("--db", str(db)) if db is not None else ()), *args]
    if process:
        return subprocess.run(fleetdeck_argv(*argv), input=stdin, stdin=subprocess.DEVNULL if stdin is None else None,
                              capture_output=True, text=text, env=fleetdeck_env(**(env or {})), timeout=timeout,
                              **popen)
    unknown = set(popen) - _IN_PROCESS_POPEN
    if unknown:
        raise TypeError(f"run_cli: {sorted(unknown)} need a process of its own: pass process=True")
    started = time.monotonic()
    # Nothing here can stop a call that hangs: well past its timeout, every thread's stack is printed and the
    # test process ends, rather than the run waiting for CI's own limit.
    faulthandler.dump_traceback_later(timeout + HANG_GRACE_S, exit=True)
    try:
        with _isolated(env or {}, popen.get("cwd")):
            code, out, err = _call_main(argv, stdin)
    finally:
        faulthandler.cancel_dump_traceback_later()
    if time.monotonic() - started > timeout:
        raise subprocess.TimeoutExpired(fleetdeck_argv(*argv), timeout, out, err)
    if text:
        out, err = _decoded(out), _decoded(err)
    done = subprocess.CompletedProcess(fleetdeck_argv(*argv), code, out, err)
    if popen.get("check"):
        done.check_returncode()
    return done


def _call_main(argv: list[str], stdin: str | bytes | None) -> tuple[int, bytes, bytes]:
    """`sys.exit(main())` of `python -m fleet argv` in this process: (exit status, stdout, stderr)."""
    from fleet.cli import main

    streams = _child_stdio()
    raw = stdin.encode(*streams[0]) if isinstance(stdin, str) else stdin
    saved = sys.stdin, sys.stdout, sys.stderr, sys.argv
    with _std_fds(raw) as written:
        sys.stdin, sys.stdout, sys.stderr = (  # as Python makes a child's (POSIX: newline "\n")
            io.TextIOWrapper(open(fd, mode, closefd=False), encoding, errors, newline="\n", write_through=fd > 0)
            for fd, mode, (encoding, errors) in zip((0, 1, 2), ("rb", "wb", "wb"), streams))
        sys.argv = [str(PROJECT_ROOT / "fleet" / "__main__.py"), *argv]  # what `python -m fleet` sees
        try:
            with _fresh_logging(), _fresh_audit():
                try:
                    code = _exit_status(main(argv))
                except SystemExit as exc:
                    code = _exit_status(exc.code)
                except Exception:  # as the interpreter does with an uncaught exception: its traceback, status 1
                    traceback.print_exc(file=sys.stderr)
                    code = 1
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            for stream in (sys.stdin, sys.stdout, sys.stderr):
                with contextlib.suppress(OSError, ValueError):
                    stream.close()
            sys.stdin, sys.stdout, sys.stderr, sys.argv = saved
    return code, written[0], written[1]


@contextlib.contextmanager
def _std_fds(stdin: bytes | None) -> Iterator[list[bytes]]:
    """File descriptors 0, 1 and 2 as a child's are: its input (none: /dev/null), and two files that collect
    what it writes, programs it starts with inherited output included; this process's own back afterwards,
    and what was written to 1 and 2 in the list yielded."""
    written: list[bytes] = []
    saved = [os.dup(fd) for fd in (0, 1, 2)]
    with contextlib.ExitStack() as files:
        if stdin is None:
            source = files.enter_context(open(os.devnull, "rb"))
        else:
            source = files.enter_context(tempfile.TemporaryFile())
            source.write(stdin)
            source.seek(0)
        out, err = (files.enter_context(tempfile.TemporaryFile()) for _ in range(2))
        try:
            for fd, target in zip((0, 1, 2), (source, out, err)):
                os.dup2(target.fileno(), fd)
            yield written
        finally:
            for fd, kept in zip((0, 1, 2), saved):
                os.dup2(kept, fd)
                os.close(kept)
        for file in (out, err):
            file.seek(0)
            written.append(file.read())


def _exit_status(code: object) -> int:
    """The status `sys.exit(code)` gives a process (a message is printed to stderr and is status 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


_STDIO: dict[tuple, list[tuple[str, str]]] = {}
_LOCALE_VARS = ("LC_ALL", "LC_CTYPE", "LANG", "PYTHONIOENCODING", "PYTHONUTF8", "PYTHONCOERCECLOCALE")


def _child_stdio() -> list[tuple[str, str]]:
    """(encoding, errors) of stdin, stdout and stderr in a child started now with pipes: asked of one child
    per locale setting, since Python's rules for them (locale coercion, UTF-8 mode) are its own."""
    key = tuple(os.environ.get(name) for name in _LOCALE_VARS)
    if key not in _STDIO:
        probe = "import sys; print(*(f'{s.encoding} {s.errors}' for s in (sys.stdin, sys.stdout, sys.stderr)), sep='\\n')"
        lines = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True, check=True,
                               stdin=subprocess.DEVNULL, env=dict(os.environ)).stdout.split("\n")
        _STDIO[key] = [tuple(line.split()) for line in lines[:3]]
    return _STDIO[key]


def _decoded(data: bytes) -> str:
    """A child's output as `subprocess.run(text=True)` gives it: the locale's encoding, universal newlines."""
    encoding = "utf-8" if sys.flags.utf8_mode else locale.getencoding()
    return data.decode(encoding).replace("\r\n", "\n").replace("\r", "\n")


@contextlib.contextmanager
def _isolated(extra: dict[str, str | None], cwd: str | os.PathLike[str] | None) -> Iterator[None]:
    """The environment `fleetdeck_env(**extra)` and the folder `cwd` for the call, then this process's own
    again (whatever the call set: `--policy` sets FLEETDECK_POLICY for the rest of its process)."""
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    child = fleetdeck_env(**extra)
    os.environ.clear()
    os.environ.update(child)
    try:
        if cwd is not None:
            os.chdir(cwd)
        yield
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)


@contextlib.contextmanager
def _fresh_logging() -> Iterator[None]:
    """The root logger as a new process has it (no handler, WARNING), so `main`'s basicConfig logs to the
    call's stderr; pytest's own handlers and level back afterwards."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    root.handlers.clear()
    root.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for handler in root.handlers:
            handler.close()
        root.handlers[:] = handlers
        root.setLevel(level)


@contextlib.contextmanager
def _fresh_audit() -> Iterator[None]:
    """No audit log open at the start, as in a new process; the ones the call opened closed at its end, as
    its process's exit would (their final counted entries written), and this process's own back."""
    import atexit

    from fleet import audit

    opened, current = dict(audit._logs), audit._current
    audit._logs.clear()
    audit._current = None
    try:
        yield
    finally:
        for log in audit._logs.values():
            atexit.unregister(log.close)
            log.close()
        audit._logs.clear()
        audit._logs.update(opened)
        audit._current = current


def noninteractive_approver(config_home: Path) -> Path:
    """The person's settings file under `config_home` (their XDG_CONFIG_HOME) with `[approval] noninteractive
    = true`: the CLI's `--yes` then decides without asking on a terminal, as a person's own script would."""
    path = config_home / "fleetdeck" / "settings.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("[approval]\nnoninteractive = true\n", encoding="utf-8")
    return path
