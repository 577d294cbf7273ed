"""A pack (with its .idx) holding copies of a repository's loose objects, written without starting git.

The throwaway object store merge-tree runs in (fleet/git/mergetree.py) must read the repository's loose
objects without being able to freshen them, so it gets them inside a pack of its own. `git pack-objects`
spends most of its time setting up zlib per object; here each object is inflated once (bounded: a small file
cannot inflate past the cap) and stored uncompressed, in git's pack v2 and idx v2 formats (Documentation/
gitformat-pack.txt). Files that are not regular, not a loose object, or cut short are left out: git reading
such an object from the repository would fail as well.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import struct
import zlib
from stat import S_ISREG

MAX_PACK_BYTES = 16 << 20   # the objects, inflated (held in memory); a larger set is left to `git pack-objects`
_TYPES = {b"commit": 1, b"tree": 2, b"blob": 3, b"tag": 4}
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_ZLIB_HEADER = b"\x78\x01"   # deflate, 32K window, no dictionary, fastest (header check: 0x7801 % 31 == 0)
_ZLIB_LAST = _ZLIB_HEADER + b"\x01"   # and a stored block that is the last


class TooLarge(Exception):
    """The loose objects inflate past MAX_PACK_BYTES."""


def write_pack(objects: list[tuple[str, str]], pack_dir: str, *, hash_name: str = "sha1") -> int:
    """Write `loose-<hash>.pack` and `.idx` into `pack_dir` holding the loose objects `(oid, file)` (each oid
    once); returns how many it holds (nothing is written for none). Raises TooLarge past MAX_PACK_BYTES."""
    entries: list[tuple[bytes, int, int]] = []    # (binary oid, crc32 of the entry, offset)
    chunks: list[bytes] = [b""]                   # the pack's header goes first, once the count is known
    offset, budget = 12, MAX_PACK_BYTES
    for oid, path in objects:
        found = _read_loose(path, budget)
        if found is None:
            continue
        kind, body = found
        budget -= len(body)
        entry = _entry_header(kind, len(body)) + stored_zlib(body)
        entries.append((bytes.fromhex(oid), zlib.crc32(entry), offset))
        chunks.append(entry)
        offset += len(entry)
    if not entries:
        return 0
    if offset >= 1 << 31:   # idx v2 needs its large-offset table past 2 GiB
        raise TooLarge()
    chunks[0] = b"PACK" + struct.pack(">II", 2, len(entries))
    pack = b"".join(chunks)
    trailer = hashlib.new(hash_name, pack).digest()
    entries.sort()
    counts = [0] * 256
    for oid, _, _ in entries:
        counts[oid[0]] += 1
    idx = b"".join([b"\xfftOc", struct.pack(">I", 2), struct.pack(">256I", *itertools.accumulate(counts)),
                    *(oid for oid, _, _ in entries),
                    struct.pack(f">{len(entries)}I", *(crc for _, crc, _ in entries)),
                    struct.pack(f">{len(entries)}I", *(off for _, _, off in entries)), trailer])
    idx += hashlib.new(hash_name, idx).digest()
    base = os.path.join(pack_dir, "loose-" + trailer.hex())
    write_file(base + ".pack", (pack, trailer))   # the pack first: git finds packs by their .idx
    write_file(base + ".idx", (idx,))
    return len(entries)


def write_file(path: str, parts: tuple[bytes, ...]) -> None:
    """A file of `parts` (created, or emptied first), written with plain system calls: a buffered file object
    costs more to set up than a small file costs to write."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
    try:
        for part in parts:
            view = memoryview(part)
            while view:
                view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def stored_zlib(data: bytes) -> bytes:
    """`data` as a zlib stream of stored (uncompressed) deflate blocks, what `zlib.compress(data, 0)` writes in
    substance, built without zlib: each `compress` call sets up a deflate state (hash tables and window of
    hundreds of KB, zeroed), which cost more than the rest of a pack of small objects."""
    size = len(data)
    if size <= 0xFFFF:    # one block, the last (most loose objects)
        return b"".join((_ZLIB_LAST, struct.pack("<HH", size, size ^ 0xFFFF), data,
                         struct.pack(">I", zlib.adler32(data))))
    blocks = [_ZLIB_HEADER]
    step = 0xFFFF
    for start in range(0, size, step):
        chunk = data[start:start + step]
        last = start + step >= size
        blocks.append(struct.pack("<BHH", int(last), len(chunk), len(chunk) ^ 0xFFFF))
        blocks.append(chunk)
    blocks.append(struct.pack(">I", zlib.adler32(data)))
    return b"".join(blocks)


def _entry_header(kind: int, size: int) -> bytes:
    """A pack entry's type and inflated size: 4 bits of size in the first byte, then 7 per byte."""
    if size < 0x10:
        return bytes(((kind << 4) | size,))
    if size < 0x800:   # two bytes: most loose objects
        return bytes(((kind << 4) | 0x80 | (size & 0x0F), size >> 4))
    out = bytearray()
    byte = (kind << 4) | (size & 0x0F)
    size >>= 4
    while size:
        out.append(byte | 0x80)
        byte = size & 0x7F
        size >>= 7
    out.append(byte)
    return bytes(out)


def _read_loose(path: str, budget: int) -> tuple[int, bytes] | None:
    """(type code, content) of one loose object file, None when it is not a whole regular loose object."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError:   # gone since the listing (packed, pruned), or a link: git finds it elsewhere or fails
        return None
    try:
        st = os.fstat(fd)
        if not S_ISREG(st.st_mode):
            return None
        if st.st_size > budget + (budget >> 8) + 1024:   # deflate never grows data by more than that
            raise TooLarge()
        step = st.st_size + 1   # the file's size and one byte more: a read that fills it means it grew
        data = os.read(fd, step)
        if len(data) == step:
            data += b"".join(iter(lambda: os.read(fd, 1 << 16), b""))
    except OSError:
        return None
    finally:
        os.close(fd)
    inflate = zlib.decompressobj()
    try:
        raw = inflate.decompress(data, budget + 64)
    except zlib.error:
        return None
    header, nul, body = raw.partition(b"\0")
    kind, _, size = header.partition(b" ")
    code = _TYPES.get(kind)
    if not nul or code is None or not size.isdigit():
        return None
    length = int(size)
    if length > budget:
        raise TooLarge()
    if not inflate.eof or len(body) != length:   # cut short, or more than it says
        return None
    return code, body
