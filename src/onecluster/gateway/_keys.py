"""Team keys and the secret that protects provider keys at rest.

A team key is ``ocg_<id>_<secret>``: the id names it in logs, the ledger and the audit (it is
not secret); the whole key is stored only as its SHA-256 and shown once, when issued.
Provider keys are encrypted with Fernet (AES-128-CBC + HMAC-SHA256) under the gateway's
secret, a file created on first use with mode 0600.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken

from onecluster.errors import AuthError, ValidationError
from onecluster.gateway._config import KeyLimits

__all__ = [
    "IssuedKey",
    "KeyRecord",
    "SecretBox",
    "hash_key",
    "key_id_of",
    "new_key",
]

_PREFIX = "ocg_"


def new_key() -> tuple[str, str]:
    """A fresh ``(key_id, key)``; 256 bits of secret."""
    key_id = secrets.token_hex(6)
    return key_id, f"{_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"


def hash_key(key: str) -> str:
    """What the store keeps of a key."""
    return hashlib.sha256(key.encode()).hexdigest()


def key_id_of(key: str) -> str | None:
    """The id part of a well-formed key, else ``None`` (no secret needed to read it)."""
    if not key.startswith(_PREFIX):
        return None
    key_id, sep, _ = key[len(_PREFIX) :].partition("_")
    return key_id if sep and len(key_id) == 12 else None


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """A team key as stored (never with its secret)."""

    key_id: str
    team: str
    name: str
    created_at: float
    revoked_at: float | None
    limits: KeyLimits

    @property
    def active(self) -> bool:
        """Not revoked."""
        return self.revoked_at is None


@dataclass(frozen=True, slots=True)
class IssuedKey:
    """A key just issued: ``secret`` is shown to the admin once and never again."""

    record: KeyRecord
    secret: str


class SecretBox:
    """Encrypts and decrypts provider keys with the gateway's secret."""

    def __init__(self, secret: bytes) -> None:
        try:
            self._fernet = Fernet(secret)
        except ValueError as exc:
            msg = "the gateway's secret is not a valid Fernet key (32 url-safe base64 bytes)"
            raise ValidationError(msg) from exc

    @classmethod
    def open(cls, path: Path) -> SecretBox:
        """The secret in ``path``, created (mode 0600) when the file does not exist."""
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(Fernet.generate_key())
        return cls(path.read_bytes().strip())

    def seal(self, plaintext: str) -> bytes:
        """``plaintext`` encrypted and authenticated."""
        return self._fernet.encrypt(plaintext.encode())

    def unseal(self, token: bytes) -> str:
        """The plaintext of ``token``; :class:`AuthError` if another secret sealed it."""
        try:
            return self._fernet.decrypt(token).decode()
        except InvalidToken:
            msg = "a provider key in the store was sealed with another secret or was altered"
            raise AuthError(
                msg, hint="set it again with `onecluster gateway provider-key set`"
            ) from None

    def __repr__(self) -> str:
        return "SecretBox(<secret>)"
