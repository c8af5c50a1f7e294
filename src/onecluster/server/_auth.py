"""Role tokens: minted as random secrets, stored as SHA-256 hashes, checked per request.

Roles: ``admin`` may do everything but approve exports; ``member`` acts for one team;
``agent`` syncs one site; ``compliance`` approves and revokes exports; ``auditor`` reads the
export register.
A missing or unknown token is an :class:`AuthError` (401); a valid token whose role, team or
site does not fit is a :class:`ForbiddenError` (403).
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from onecluster.errors import AuthError, ForbiddenError
from onecluster.state_dir import ADMIN_TOKEN_FILE
from onecluster.store import Store, TokenRecord

__all__ = ["Authenticator", "Principal", "bootstrap_admin_token", "hash_token", "new_secret"]

_log = logging.getLogger("onecluster.server")

#: Tokens looked up recently are trusted for this long without a database round trip.
_CACHE_TTL_S = 5.0
_CACHE_SIZE = 4096


def new_secret() -> str:
    """A fresh token secret (256 bits, URL-safe)."""
    return "oc_" + secrets.token_urlsafe(32)


def hash_token(secret: str) -> str:
    """The hex SHA-256 under which a secret is stored."""
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: a role and, for members and agents, their team or site."""

    role: str
    team: str | None = None
    site: str | None = None
    token_id: str = ""
    holder: str | None = None

    @property
    def identity(self) -> str:
        """Who this is, for the export register: the holder, with the role and token."""
        scope = f" of team {self.team}" if self.team else ""
        who = f"{self.holder} " if self.holder else ""
        return f"{who}({self.role}{scope}, token {self.token_id})"

    @property
    def is_admin(self) -> bool:
        """Whether this is an admin."""
        return self.role == "admin"

    def require_admin(self) -> None:
        """Raise :class:`ForbiddenError` unless admin."""
        if not self.is_admin:
            msg = f"this needs an admin token; yours is {_a(self.role)} {self.role} token"
            raise ForbiddenError(msg)

    def require_team(self, team: str) -> None:
        """Raise :class:`ForbiddenError` unless admin or a member of ``team``."""
        if self.is_admin:
            return
        if self.role != "member":
            msg = f"{_a(self.role)} {self.role} token cannot act on jobs"
            raise ForbiddenError(msg)
        if self.team != team:
            msg = f"your token is for team {self.team}; it cannot act on team {team}'s jobs"
            raise ForbiddenError(msg)

    def require_member(self, what: str = "jobs") -> None:
        """Raise :class:`ForbiddenError` unless admin or member (``what``: the things the
        caller wanted to act on, for the message)."""
        if self.role not in ("admin", "member"):
            msg = f"{_a(self.role)} {self.role} token cannot act on {what}"
            raise ForbiddenError(msg)

    def require_role(self, roles: tuple[str, ...], what: str) -> None:
        """Raise :class:`ForbiddenError` unless the role is one of ``roles``."""
        if self.role not in roles:
            needed = " or ".join(roles)
            msg = f"{_a(self.role)} {self.role} token cannot {what}; it needs {needed}"
            raise ForbiddenError(msg)

    def require_agent_of(self, site: str) -> None:
        """Raise :class:`ForbiddenError` unless this is the agent token of ``site``."""
        if self.role != "agent" or self.site != site:
            msg = f"only the agent token of site {site} may sync it"
            raise ForbiddenError(msg)


def _a(word: str) -> str:
    """The indefinite article before ``word``: "an agent", "a member"."""
    return "an" if word[:1] in ("a", "e", "i", "o", "u") else "a"


class Authenticator:
    """Turns an ``Authorization`` header into a :class:`Principal` (thread-safe).

    Positive look-ups are cached for a few seconds, so a revoked token may keep working
    that long.
    """

    def __init__(self, store: Store) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[float, Principal]] = {}

    def cached(self, authorization: str | None) -> Principal | None:
        """The caller if its token was checked in the last few seconds, else ``None``.

        Never touches the database, so it is safe on the event loop; on ``None`` call
        :meth:`principal` in a worker thread.
        """
        if not authorization:
            return None
        scheme, _, secret = authorization.partition(" ")
        if scheme.lower() != "bearer" or not secret.strip():
            return None
        with self._lock:
            hit = self._cache.get(hash_token(secret.strip()))
        if hit is not None and time.monotonic() - hit[0] < _CACHE_TTL_S:
            return hit[1]
        return None

    def principal(self, authorization: str | None) -> Principal:
        """The caller behind ``authorization`` (``Bearer <token>``)."""
        if not authorization:
            msg = "this needs a token: send 'Authorization: Bearer <token>'"
            raise AuthError(msg, hint="an admin creates tokens with `onecluster token create`")
        scheme, _, secret = authorization.partition(" ")
        if scheme.lower() != "bearer" or not secret.strip():
            msg = "the Authorization header must be 'Bearer <token>'"
            raise AuthError(msg)
        digest = hash_token(secret.strip())
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(digest)
        if hit is not None and now - hit[0] < _CACHE_TTL_S:
            return hit[1]
        record = self._store.token(digest)
        if record is None:
            msg = "this token is not valid (unknown or revoked)"
            raise AuthError(msg, hint="ask an admin for a new token")
        principal = _principal(record)
        with self._lock:
            if len(self._cache) >= _CACHE_SIZE:
                self._cache.clear()
            self._cache[digest] = (now, principal)
        return principal


def _principal(record: TokenRecord) -> Principal:
    return Principal(
        role=record.role,
        team=record.team,
        site=record.site,
        token_id=record.id,
        holder=record.holder,
    )


def bootstrap_admin_token(store: Store, state_dir: Path, now: float) -> Path | None:
    """At first start, mint an admin token and write it to ``<state_dir>/admin.token`` (0600).

    Does nothing (returns ``None``) when a live admin token exists already.
    """
    if store.has_admin_token():
        return None
    secret = new_secret()
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / ADMIN_TOKEN_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secret + "\n")
    path.chmod(0o600)
    store.add_token(role="admin", sha256=hash_token(secret), now=now)
    _log.warning("created the first admin token; it is in %s (readable by its owner only)", path)
    return path
