"""Signed tree heads (checkpoints) and receipts: immutable values, no I/O.

A head's signed body is a C2SP ``tlog-checkpoint`` note::

    onecluster export register        ← origin
    1234                              ← tree size
    3q2+7w…=                          ← base64 of the RFC 9162 root
    timestamp 2026-12-04T10:00:00.000000Z   ← extension line

and its signature is Ed25519 over those UTF-8 bytes, as C2SP ``signed-note`` signs a
note's text, so a Go or Rust verifier of checkpoints checks the same bytes.
"""

from __future__ import annotations

import base64
import binascii
import functools
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from onecluster.errors import IntegrityError
from onecluster.export.merkle import DIGEST_SIZE
from onecluster.register._keys import check_signature

__all__ = ["Receipt", "SignedHead", "parse_utc", "utc_iso"]


def utc_iso(seconds: float) -> str:
    """``seconds`` since the epoch as UTC ISO 8601 with microseconds and a ``Z``."""
    micros = round(seconds * 1_000_000)
    whole, fraction = divmod(micros, 1_000_000)
    return f"{_second(whole)}.{fraction:06d}Z"


@functools.lru_cache(maxsize=4)
def _second(whole: int) -> str:
    """The date and time of a whole second (cached: every append formats one)."""
    return datetime.fromtimestamp(whole, UTC).strftime("%Y-%m-%dT%H:%M:%S")


@dataclass(frozen=True, slots=True)
class SignedHead:
    """A checkpoint: the tree of ``size`` entries has head ``root`` (32 raw bytes), as the
    register's key signed at ``timestamp`` (UTC ISO 8601, ``Z``)."""

    origin: str
    size: int
    root: bytes
    signature: bytes
    timestamp: str

    def __post_init__(self) -> None:
        if "\n" in self.origin or not self.origin:
            msg = f"a checkpoint's origin is one non-empty line, not {self.origin!r}"
            raise ValueError(msg)
        if self.size < 0 or len(self.root) != DIGEST_SIZE:
            msg = f"a checkpoint needs a size ≥ 0 and a 32-byte root ({self.size}, {self.root!r})"
            raise ValueError(msg)

    def note(self) -> str:
        """The signed body: C2SP checkpoint text with the timestamp as an extension line."""
        root = base64.b64encode(self.root).decode("ascii")
        return f"{self.origin}\n{self.size}\n{root}\ntimestamp {self.timestamp}\n"

    def verify(self, public_key: bytes) -> None:
        """:class:`IntegrityError` unless the signature is ``public_key``'s over :meth:`note`."""
        check_signature(
            public_key,
            self.signature,
            self.note().encode("utf-8"),
            f"the signed tree head of size {self.size}",
        )

    def to_dict(self) -> dict[str, Any]:
        """The head as JSON: root in hex, signature in base64, and the note that was signed."""
        return {
            "origin": self.origin,
            "size": self.size,
            "root": self.root.hex(),
            "timestamp": self.timestamp,
            "signature": base64.b64encode(self.signature).decode("ascii"),
            "note": self.note(),
        }

    @classmethod
    def from_dict(cls, data: object, what: str) -> SignedHead:
        """The head in ``data`` (as :meth:`to_dict` writes it; ``note`` is ignored, it is
        recomputed); :class:`IntegrityError` naming ``what`` when it is malformed."""
        malformed = IntegrityError(f"{what} is not a well-formed signed tree head")
        if not isinstance(data, dict):
            raise malformed
        origin, size, timestamp = data.get("origin"), data.get("size"), data.get("timestamp")
        if not (isinstance(origin, str) and isinstance(timestamp, str)):
            raise malformed
        if not isinstance(size, int) or isinstance(size, bool):
            raise malformed
        try:
            root = bytes.fromhex(data["root"])
            signature = base64.b64decode(data["signature"], validate=True)
            return cls(origin, size, root, signature, timestamp)
        except (KeyError, TypeError, ValueError, binascii.Error) as exc:
            raise malformed from exc


@dataclass(frozen=True, slots=True)
class Receipt:
    """What :meth:`Register.append` returns once the entry is durable: its ``seq`` (leaf
    index), its ``leaf_hash`` and the signed ``head`` of the batch that covered it."""

    seq: int
    leaf_hash: bytes
    head: SignedHead


def parse_utc(timestamp: str) -> float:
    """Seconds since the epoch of a timestamp :func:`utc_iso` wrote; ``ValueError`` if it
    is not one."""
    moment = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    return moment.timestamp()
