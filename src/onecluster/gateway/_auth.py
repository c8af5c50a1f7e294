"""Who is calling: the team key in ``Authorization: Bearer``, checked against a cache of the
store's keys.

The cache is reloaded from the store every ``refresh_s`` (1 s by default) by the gateway's
background task, so a key issued or revoked through any process works, or stops working,
everywhere within that time; a key the cache does not know is looked up in the store at once
(a key issued a moment ago works on its first call; a miss is remembered until the next
refresh, so made-up keys cost the database nothing).
"""

from __future__ import annotations

from onecluster.errors import AuthError
from onecluster.gateway._keys import KeyRecord, hash_key, key_id_of
from onecluster.gateway._store import GatewayStore

__all__ = ["KeyCache"]

_HINT = "send 'Authorization: Bearer <team key>'; an admin issues keys with "
_HINT += "`onecluster gateway keys issue`"


class KeyCache:
    """Team keys by hash, refreshed from the store."""

    def __init__(self, store: GatewayStore) -> None:
        self._store = store
        self._by_hash: dict[str, KeyRecord] = {}
        self._unknown: set[str] = set()
        self.refresh()

    def refresh(self) -> None:
        """Reload every key from the store (and forget the misses: a key may be new)."""
        self._by_hash = self._store.key_hashes()
        self._unknown = set()

    def caller(self, authorization: str | None) -> KeyRecord:
        """The active key behind ``authorization``; :class:`AuthError` (401) otherwise."""
        if not authorization:
            msg = "this needs a team key"
            raise AuthError(msg, hint=_HINT)
        scheme, _, key = authorization.partition(" ")
        key = key.strip()
        if scheme.lower() != "bearer" or not key:
            msg = "the Authorization header must be 'Bearer <team key>'"
            raise AuthError(msg, hint=_HINT)
        digest = hash_key(key)
        record = self._by_hash.get(digest)
        if record is None and key_id_of(key) is not None and digest not in self._unknown:
            # Once per refresh at most: a flood of made-up keys costs no database queries.
            record = self._store.key_by_hash(digest)
            if record is not None:
                self._by_hash[digest] = record
            elif len(self._unknown) < 100_000:
                self._unknown.add(digest)
        if record is None:
            msg = "this key is not a valid team key"
            raise AuthError(msg, hint=_HINT)
        if not record.active:
            msg = f"key {record.key_id} was revoked"
            raise AuthError(msg, hint="ask your admin for a new key")
        return record
