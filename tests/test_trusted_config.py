"""The person's config read once and cached (fleet.git.neutralize.trusted_values): the cache must follow an
edit of the file a linked `~/.gitconfig` names (a dotfiles manager's link stays the same when it is edited)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fleet.git.neutralize import trusted_values


def test_an_edit_through_a_linked_gitconfig_is_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    target = dotfiles / "gitconfig"
    target.write_text('[filter "lfs"]\n\tclean = first\n')
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").symlink_to(target)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert trusted_values()[(b"filter", b"lfs", b"clean")] == b"first"
    link = os.lstat(home / ".gitconfig")
    target.write_text('[filter "lfs"]\n\tclean = second one\n')
    assert os.lstat(home / ".gitconfig") == link   # the link itself did not change
    assert trusted_values()[(b"filter", b"lfs", b"clean")] == b"second one"
