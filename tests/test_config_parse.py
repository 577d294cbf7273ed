"""The one-regex-a-line config reader gives exactly what the byte-by-byte parser (git's config.c, step for
step) gives, and hands every file it cannot read whole to that parser."""

from __future__ import annotations

import random

import pytest

from fleet.git import config

PIECES = [b"[core]", b"[Remote \"origin\"]", b"[branch \"Feat/x\"]", b"[branch.Main]", b"[a.b \"c.d\"]",
          b"\tbare = true", b"bare", b"  url = /srv/x.git  ", b"fetch = +refs/heads/*:refs/remotes/o/*",
          b"merge=refs/heads/main ; trailing", b"name = two  spaces", b"# comment", b"; other", b"",
          b"k = \"quoted ; not a comment\"", b"k = a\\\\b", b"k = a\tb", b"k = x \\", b"  y", b"k = v\r",
          b"[x \"unterminated]", b"k = ", b"key", b"[core] bare", b"9bad = 1", b"k = caf\xc3\xa9",
          b"[.dot]", b"k = a#b", b"[s \"with \\\" quote\"]"]


def _full(data: bytes):
    try:
        return config._parse_full(data, "t")
    except config.ConfigError:
        return "error"


def test_simple_reader_agrees_with_the_full_parser():
    rng = random.Random(7)
    simple_seen = 0
    for _ in range(3000):
        lines = [rng.choice(PIECES) for _ in range(rng.randrange(1, 8))]
        if rng.random() < 0.8:
            lines.insert(0, b"[core]")
        data = b"\n".join(lines) + rng.choice([b"", b"\n"])
        fast = config._parse_simple(data)
        if fast is not None:
            simple_seen += 1
            assert fast == _full(data), data
        try:
            got = config.parse(data)
        except config.ConfigError:
            got = "error"
        assert got == _full(data), data
    assert simple_seen > 300


@pytest.mark.parametrize("data", [b"[core]\n\tbare = false\n[remote \"origin\"]\n\turl = /x\n",
                                  b"[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n"])
def test_what_git_writes_takes_the_simple_path(data):
    assert config._parse_simple(data) is not None
