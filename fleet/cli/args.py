"""What commands take from their arguments: the index they name, bounded integers, directories that exist."""

from __future__ import annotations

import argparse
import os
from typing import Callable

from fleet.errors import FleetError
from fleet.index.store import Index, default_db_path, open_index


def index_for(args: argparse.Namespace, *, create: bool = False) -> Index:
    """The index named by --db / $FLEETDECK_DB / the default. Only commands that add roots (scan ROOT,
    watch ROOT, serve, roots add) create it: a read of a missing index creates nothing and says so."""
    path = args.db or default_db_path()
    if not create and not os.path.exists(path):
        raise FleetError("NOT_FOUND", f"no index yet: run `fleetdeck scan ROOT` (looked for {path})")
    return open_index(path)


def bounded(low: int, high: int) -> Callable[[str], int]:
    """An argparse type for an integer option within [low, high]: anything else is a usage error (exit 2)."""
    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer from {low} to {high}, not {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be from {low} to {high}, got {value}")
        return value

    parse.__name__ = f"integer {low}..{high}"
    return parse


def require_dirs(paths: list[str]) -> None:
    bad = [p for p in paths if not os.path.isdir(p)]
    if bad:
        raise FleetError("BAD_PATH", f"not a directory: {', '.join(bad)}")

