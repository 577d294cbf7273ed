"""Ed25519 keys for the audit log: generating, loading fail-closed, key ids, signing and checking.

Key id = the first 16 hex digits of SHA-256 over the raw 32-byte public key; it names the key in every
signed entry, so rotated keys coexist (each entry says which key signed it) and a verifier picks the right
public key without trying them all. A signature is Ed25519 over SIG_DOMAIN followed by the entry's `hash`
string (ASCII); the hash covers every other field, `key_id` and `signature` included.
"""

from __future__ import annotations

import base64
import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from fleet.errors import FleetError

if TYPE_CHECKING:
    from fleet.audit.config import AuditConfig

SIG_DOMAIN = b"fleetdeck-audit-sig-v1\0"
MAX_KEY_BYTES = 64 * 1024


class AuditKeyError(FleetError):
    """A configured key that cannot be used: the process must not start (fail closed)."""

    def __init__(self, message: str) -> None:
        super().__init__("AUDIT_KEY", message)


def key_id(public: Ed25519PublicKey) -> str:
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


@dataclass(frozen=True)
class Signer:
    private: Ed25519PrivateKey
    key_id: str

    def sign(self, digest: str, domain: bytes = SIG_DOMAIN) -> str:
        """`digest` signed under `domain` (the audit log's, or another use's: a signature never serves two)."""
        return _b64(self.private.sign(domain + digest.encode("ascii")))


def check(public: Ed25519PublicKey, digest: str, sig: object, domain: bytes = SIG_DOMAIN) -> bool:
    if not isinstance(sig, str):
        return False
    try:
        public.verify(base64.urlsafe_b64decode(sig + "=" * (-len(sig) % 4)), domain + digest.encode("ascii"))
    except (InvalidSignature, ValueError):
        return False
    return True


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _read_key_file(path: Path, what: str, private: bool) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise AuditKeyError(f"{what} {path} does not exist") from None
    except OSError as exc:
        raise AuditKeyError(f"{what} {path} cannot be opened: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise AuditKeyError(f"{what} {path} is not a regular file")
        if private and info.st_mode & 0o077:
            raise AuditKeyError(f"{what} {path} is readable by others than its owner (mode "
                            f"{stat.S_IMODE(info.st_mode):04o}); run: chmod 600 {path}")
        if private and info.st_uid != os.geteuid():
            raise AuditKeyError(f"{what} {path} belongs to another user (uid {info.st_uid})")
        data = os.read(fd, MAX_KEY_BYTES + 1)
    except OSError as exc:
        raise AuditKeyError(f"{what} {path} cannot be read: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > MAX_KEY_BYTES:
        raise AuditKeyError(f"{what} {path} is larger than {MAX_KEY_BYTES} bytes")
    return data


def load_signer(path: str | os.PathLike[str]) -> Signer:
    """The signing key at `path`, or AuditKeyError saying exactly why it cannot be used."""
    path = Path(path).expanduser()
    data = _read_key_file(path, "audit signing key", private=True)
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise AuditKeyError(f"audit signing key {path} is not an unencrypted PKCS8 PEM private key: {exc}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise AuditKeyError(f"audit signing key {path} is not an Ed25519 key")
    return Signer(key, key_id(key.public_key()))


def load_public(path: str | os.PathLike[str]) -> Ed25519PublicKey:
    """A public key (PEM) for verifying; a private key file is accepted too (its public half is used)."""
    path = Path(path).expanduser()
    data = _read_key_file(path, "audit public key", private=False)
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        try:
            key = serialization.load_pem_private_key(data, password=None).public_key()
        except (ValueError, TypeError, UnsupportedAlgorithm):
            raise AuditKeyError(f"{path} holds no PEM Ed25519 public key") from None
    if not isinstance(key, Ed25519PublicKey):
        raise AuditKeyError(f"{path} is not an Ed25519 key")
    return key


def keygen(folder: str | os.PathLike[str]) -> tuple[str, Path, Path]:
    """A new key pair in `folder` (0700): `<key id>.pem` (0600, private) and `<key id>.pub.pem`."""
    folder = Path(folder).expanduser()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    private = Ed25519PrivateKey.generate()
    kid = key_id(private.public_key())
    secret = folder / f"{kid}.pem"
    public = folder / f"{kid}.pub.pem"
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    fd = os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
    public.write_bytes(private.public_key().public_bytes(serialization.Encoding.PEM,
                                                         serialization.PublicFormat.SubjectPublicKeyInfo))
    return kid, secret, public


def public_keys_in(folder: Path) -> dict[str, Ed25519PublicKey]:
    """Every `*.pub.pem` in `folder` by key id (the person's kept keys, current and rotated)."""
    keys = {}
    if folder.is_dir():
        for path in sorted(folder.glob("*.pub.pem")):
            key = load_public(path)
            keys[key_id(key)] = key
    return keys


def trusted_keys(config: "AuditConfig | None", given: list[str] | None = None) -> dict[str, Ed25519PublicKey]:
    """Public keys by key id: the `given` PEM files only, or else the configured signing key's, the
    `verify_keys` and every pair kept in the keys folder (current and rotated)."""
    if given:
        keys = [load_public(path) for path in given]
        return {key_id(k): k for k in keys}
    assert config is not None
    found = public_keys_in(config.keys_dir)
    for path in ([config.key] if config.key else []) + list(config.verify_keys):
        key = load_public(path)
        found[key_id(key)] = key
    return found
