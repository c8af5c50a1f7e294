"""The register's Ed25519 key pair: made once, kept beside the log, read back.

``signing.key`` holds the private key (PKCS#8 PEM, mode 0600, written to a temporary file,
fsync'd and renamed, so a crash never leaves half a key); ``public.key`` the public key
(SubjectPublicKeyInfo PEM, which ``openssl pkey -pubin`` reads).  Auditors pin the public
key — or its fingerprint, SHA-256 of the raw 32 bytes in hex — when they verify.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from onecluster.errors import IntegrityError, StorageError, ValidationError

__all__ = [
    "PUBLIC_KEY_SIZE",
    "check_signature",
    "create_key_pair",
    "fingerprint",
    "load_signing_key",
    "parse_public_key",
    "public_bytes",
    "read_public_key",
]

#: Bytes in a raw Ed25519 public key.
PUBLIC_KEY_SIZE = 32


def public_bytes(key: Ed25519PrivateKey) -> bytes:
    """The raw 32-byte public key of ``key``."""
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def fingerprint(public_key: bytes) -> str:
    """The key's fingerprint: SHA-256 of its raw 32 bytes, in hex."""
    return hashlib.sha256(public_key).hexdigest()


def check_signature(public_key: bytes, signature: bytes, message: bytes, what: str) -> None:
    """:class:`IntegrityError` unless ``signature`` is ``public_key``'s Ed25519 signature of
    ``message``; ``what`` names the thing signed in the message."""
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, message)
    except (InvalidSignature, ValueError) as exc:
        fp = fingerprint(public_key)[:16] if len(public_key) == PUBLIC_KEY_SIZE else "malformed"
        msg = f"{what}: its signature is not the register key's (key {fp}…)"
        raise IntegrityError(
            msg, hint="the register was altered, or it is checked against the wrong public key"
        ) from exc


def _write_new(path: Path, data: bytes, mode: int) -> None:
    """Write ``data`` to a new file ``path`` atomically: temporary file, fsync, rename."""
    temporary = path.with_name(f".{path.name}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.fchmod(fd, mode)
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    temporary.replace(path)


def create_key_pair(directory: Path) -> None:
    """Make ``signing.key`` (0600) and ``public.key`` in ``directory`` unless both exist;
    a missing ``public.key`` is rewritten from the signing key.  The caller fsyncs the
    directory."""
    signing, public = directory / "signing.key", directory / "public.key"
    try:
        if not signing.exists():
            key = Ed25519PrivateKey.generate()
            pem = key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
            _write_new(signing, pem, 0o600)
            public.unlink(missing_ok=True)
        if not public.exists():
            pem = (
                load_signing_key(signing)
                .public_key()
                .public_bytes(
                    serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
                )
            )
            _write_new(public, pem, 0o644)
    except OSError as exc:
        msg = f"cannot write the register's keys in {directory}: {exc.strerror or exc}"
        raise StorageError(msg) from exc


def load_signing_key(path: Path) -> Ed25519PrivateKey:
    """The Ed25519 private key in ``path``: PKCS#8 PEM, or the raw 32-byte seed."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        msg = f"cannot read the register's signing key {path}: {exc.strerror or exc}"
        raise StorageError(msg) from exc
    if len(data) == PUBLIC_KEY_SIZE:
        return Ed25519PrivateKey.from_private_bytes(data)
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        msg = f"{path} is not an unencrypted PEM or raw Ed25519 private key"
        raise IntegrityError(msg) from exc
    if not isinstance(key, Ed25519PrivateKey):
        msg = f"{path} holds a {type(key).__name__}, not an Ed25519 key"
        raise IntegrityError(msg)
    return key


def parse_public_key(data: bytes, source: str) -> bytes:
    """The raw 32-byte Ed25519 public key in ``data``: PEM (SubjectPublicKeyInfo), raw 32
    bytes, or their hex or base64 text; :class:`ValidationError` naming ``source``."""
    if len(data) == PUBLIC_KEY_SIZE:
        return data
    text = data.strip()
    if text.startswith(b"-----BEGIN"):
        try:
            key = serialization.load_pem_public_key(text)
        except ValueError as exc:
            msg = f"{source} is not a PEM public key"
            raise ValidationError(msg) from exc
        if not isinstance(key, Ed25519PublicKey):
            msg = f"{source} holds a {type(key).__name__}, not an Ed25519 public key"
            raise ValidationError(msg)
        return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    for decode in (bytes.fromhex, base64.b64decode):
        try:
            raw = decode(text.decode("ascii"))
        except (ValueError, binascii.Error, UnicodeDecodeError):
            continue
        if len(raw) == PUBLIC_KEY_SIZE:
            return raw
    msg = f"{source} is not an Ed25519 public key (PEM, raw 32 bytes, hex or base64)"
    raise ValidationError(msg)


def read_public_key(path: Path) -> bytes:
    """The raw 32-byte Ed25519 public key in the file ``path`` (see :func:`parse_public_key`);
    :class:`ValidationError` when it cannot be read or holds no such key."""
    try:
        data = path.read_bytes()
    except FileNotFoundError as exc:
        msg = f"no public key file {path}"
        raise ValidationError(msg) from exc
    except OSError as exc:
        msg = f"cannot read the public key file {path}: {exc.strerror or exc}"
        raise ValidationError(msg) from exc
    return parse_public_key(data, str(path))
