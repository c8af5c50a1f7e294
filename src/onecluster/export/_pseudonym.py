"""Keyed pseudonyms: HMAC-SHA256 tokens that are stable per key and useless without it.

A token is ``PREFIX_`` followed by the first 80 bits of
``HMAC-SHA256(key, kind ‖ 0x00 ‖ canonical value)`` in Base32 (16 characters, A–Z and
2–7).  The same value of the same kind gets the same token under one key — in every
column, file and dataset, so joins still work — and a different one under another key.
The kind is part of the message, so a mobile number and a customer number with the same
digits do not share a token.

The key is what makes this a pseudonym rather than a hash anyone can recompute: mobile
numbers are about 10¹⁰ values and resident IDs about 10¹¹, so an unkeyed hash of either
is reversed by trying them all.  Hence :class:`Pseudonymiser` refuses a key shorter than
16 bytes.  The key never leaves the source jurisdiction; what may travel is
:attr:`Pseudonymiser.key_id`, a fingerprint that names the key (an HMAC under the key, so
it reveals nothing of it).
"""

from __future__ import annotations

import base64
import hmac

from onecluster.errors import ValidationError

__all__ = ["MIN_KEY_BYTES", "Pseudonymiser"]

#: The shortest key accepted: 128 bits.
MIN_KEY_BYTES = 16
_TOKEN_BYTES = 10  # 80 bits: 16 Base32 characters, no padding
_CACHE_LIMIT = 1 << 18


class Pseudonymiser:
    """Tokens under one key.  Not thread-safe (its cache is a plain dict)."""

    __slots__ = ("_cache", "_key", "key_id")

    def __init__(self, key: bytes) -> None:
        if len(key) < MIN_KEY_BYTES:
            msg = (
                f"a de-identification key of {len(key)} bytes is too short: at least "
                f"{MIN_KEY_BYTES} bytes are needed, or its pseudonyms can be reversed by "
                "trying every key"
            )
            raise ValidationError(msg, hint="make one with: openssl rand -hex 32")
        self._key = bytes(key)
        self._cache: dict[tuple[str, str, str], tuple[str, bytes]] = {}
        #: Names the key in reports and the register without revealing it.
        self.key_id = hmac.digest(self._key, b"onecluster key id", "sha256")[:8].hex()

    def digest(self, kind: str, value: str) -> bytes:
        """The 32-byte HMAC of ``value`` (canonical) as a ``kind``."""
        message = kind.encode() + b"\x00" + value.encode("utf-8", "surrogatepass")
        return hmac.digest(self._key, message, "sha256")

    def token(self, kind: str, value: str, prefix: str) -> tuple[str, bytes]:
        """``(token, digest)`` of ``value`` as a ``kind``; the token is the prefix, ``_``
        and 16 Base32 characters.

        The digest's first 16 bytes identify the value for counting (distinct individuals,
        distinct values per detector) without keeping the value itself.
        """
        cached = self._cache.get((kind, value, prefix))
        if cached is None:
            mac = self.digest(kind, value)
            text = base64.b32encode(mac[:_TOKEN_BYTES]).decode("ascii")
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            cached = self._cache[(kind, value, prefix)] = (f"{prefix}_{text}", mac[:16])
        return cached
