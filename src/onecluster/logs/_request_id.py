"""The request id: taken from a caller's ``X-Request-ID`` when it is sane, else made here,
and held in a context variable so that every log line written while a request is handled
carries it (:class:`~onecluster.logs.ContextFields` puts it on each record)."""

from __future__ import annotations

import contextlib
import re
import uuid
from collections.abc import Iterator
from contextvars import ContextVar

__all__ = [
    "REQUEST_ID_HEADER",
    "accepted_request_id",
    "current_request_id",
    "new_request_id",
    "request_id_bound",
]

#: The header a request id travels in, both ways (HTTP header names are case-insensitive).
REQUEST_ID_HEADER = "X-Request-ID"
#: At most 128 characters of letters, digits and ``. _ : / + = -``: what load balancers and
#: tracing systems send (UUIDs, ``Root=1-…``), and nothing that could break a log line or a
#: header (spaces, quotes, control characters).
_SANE = re.compile(r"[A-Za-z0-9._:/+=-]{1,128}")

_current: ContextVar[str | None] = ContextVar("onecluster_request_id", default=None)


def new_request_id() -> str:
    """A fresh id: 32 hex digits (a random UUID)."""
    return uuid.uuid4().hex


def accepted_request_id(offered: str | None) -> str | None:
    """``offered`` if it is a sane request id (see :data:`_SANE`), else ``None``: the caller
    then makes its own (:func:`new_request_id`) rather than refusing the request, since a
    request id is a convenience for logs, not a part of the request."""
    if offered is not None and _SANE.fullmatch(offered):
        return offered
    return None


def current_request_id() -> str | None:
    """The id of the request being handled in this context, if any."""
    return _current.get()


@contextlib.contextmanager
def request_id_bound(request_id: str | None) -> Iterator[None]:
    """Within the block, :func:`current_request_id` is ``request_id`` (restored after)."""
    token = _current.set(request_id)
    try:
        yield
    finally:
        _current.reset(token)
