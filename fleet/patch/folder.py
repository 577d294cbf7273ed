"""Where an agent's patch files go: a folder fleetdeck owns, outside every repository.

A `.patch` file inside a repository is not inert: patch-package applies `patches/*.patch` on `npm install`,
quilt and distro packaging apply theirs on build. An agent writing one there (patch.generate with
`patch_file`, patch.remove) changed a repository with no proposal. So agents write patch files only into
`patches/` beside fleetdeck's index (its data folder, mode 0700, refused when it lies inside a git work
tree); putting one into a repository is a `patch_file_write` proposal a person approves, like every write.
Reading a patch file (patch.inspect, patch.validate) may still name one inside a fleet root.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from fleet.errors import FleetError
from fleet.index.store import Index
from fleet.index.target import scoped_patch_file

FOLDER = "patches"


def patch_folder(index_path: str | os.PathLike[str]) -> Path:
    """fleetdeck's patch folder for the index at `index_path`, created 0700 on first use; BAD_PATH when it is
    a symlink, not ours, open to others, or inside a git work tree."""
    folder = Path(os.path.realpath(os.path.dirname(os.path.abspath(index_path)))) / FOLDER
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise FleetError("BAD_PATH", f"fleetdeck's patch folder {str(folder)!r} must be a directory of yours "
                                     "with mode 0700")
    for parent in folder.parents:
        if os.path.lexists(parent / ".git"):
            raise FleetError("BAD_PATH", f"fleetdeck's patch folder {str(folder)!r} is inside the git repository "
                                         f"{str(parent)!r}: move the index (--db / FLEETDECK_DB) out of it")
    return folder


def agent_patch_file(index_path: str | os.PathLike[str], patch_file: str) -> str:
    """The patch file an agent may write: a file name (`fix.patch`), or an absolute path, in the patch folder.
    Anything else is BAD_PATH, saying where patch files go and how one gets into a repository."""
    folder = patch_folder(index_path)
    if not isinstance(patch_file, str) or not patch_file or "\0" in patch_file:
        raise FleetError("BAD_PATH", "patch_file must be a file name or an absolute path")
    if "/" not in patch_file:
        return str(folder / patch_file)
    if os.path.isabs(patch_file) and os.path.realpath(os.path.dirname(patch_file)) == str(folder):
        return str(folder / os.path.basename(patch_file))
    raise FleetError("BAD_PATH", f"patch_file {patch_file!r}: agents write patch files only into fleetdeck's "
                                 f"patch folder {str(folder)!r} (give a file name such as fix.patch); to put a "
                                 "patch file into a repository, propose patch_file_write (a person approves it)")


def readable_patch_file(index: Index, patch_file: str) -> str:
    """A patch file an agent may read: one in the patch folder (by name or path), or one inside a fleet root."""
    try:
        return agent_patch_file(index.path, patch_file)
    except FleetError:
        return scoped_patch_file(index, patch_file)
