"""Writing a file so that no reader ever sees half of it, and a killed process leaves no stray temp file
under the final name: the bytes go to a temp file beside the target, which is then renamed over it."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def replace_file(target: str | os.PathLike[str], data: bytes, mode: int) -> None:
    """`target` now holds `data` with permission bits `mode` (a temp file in its folder, renamed over it)."""
    folder = os.path.dirname(os.fspath(target)) or "."
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{Path(target).name[:40]}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
