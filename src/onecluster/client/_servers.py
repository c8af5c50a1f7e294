"""Several server URLs, one of them current: how every client finds a live server replica.

onecluster's control plane may run as several ``onecluster server`` replicas over one
database, each serving the whole API.  A client is given their base URLs, in the order to try
them (``--server http://a:8080,http://b:8080``, ``ONECLUSTER_SERVER``, a list in Python); it
talks to the *current* one, and when that one fails it moves on to the next, round-robin from
the one that failed, and stays with whichever answers.  This module is pure: it parses and
validates the list and keeps the current one; the clients decide what counts as a failure
(``_client.py``, ``agent/_server_link.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import httpx

from onecluster.errors import ValidationError

__all__ = ["ServerList", "describe_tries", "parse_servers"]

_HINT = (
    "give one URL or several separated by commas, e.g. http://10.0.0.1:8080,http://10.0.0.2:8080"
)


def parse_servers(value: str | Sequence[str], *, source: str = "the server URL") -> tuple[str, ...]:
    """The base URLs in ``value``, in order, each without a trailing ``/``.

    ``value`` is one string of comma-separated URLs (spaces around each ignored) or a
    sequence of them (each may itself hold several, comma-separated).  Raises
    :class:`ValidationError` naming ``source`` (``--server``, ``$ONECLUSTER_SERVER`` …) for an
    empty list or entry, a URL that is not ``http(s)://host…``, or one given twice.
    """
    items = [value] if isinstance(value, str) else list(value)
    parts = [part.strip() for item in items for part in item.split(",")]
    if not any(parts):
        msg = f"{source} is empty"
        raise ValidationError(msg, hint=_HINT)
    urls: list[str] = []
    seen: dict[tuple[str, str, int | None, str], str] = {}
    for position, part in enumerate(parts, start=1):
        if not part:
            msg = f"{source} {_joined(items)!r} has an empty entry (number {position})"
            raise ValidationError(msg, hint=_HINT)
        key = _identity(part, source)
        if key in seen:
            msg = f"{source} names the same server twice: {seen[key]!r} and {part!r}"
            raise ValidationError(msg, hint="give each server once, separated by commas")
        seen[key] = part
        urls.append(part.rstrip("/"))
    return tuple(urls)


def _identity(url: str, source: str) -> tuple[str, str, int | None, str]:
    """What makes two URLs the same server; :class:`ValidationError` for one that is no
    server's base URL."""
    if not url.lower().startswith(("http://", "https://")):
        msg = f"server URL {url!r} ({source}) must start with http:// or https://"
        raise ValidationError(msg, hint=_HINT)
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        msg = f"server URL {url!r} ({source}) is not a valid URL: {exc}"
        raise ValidationError(msg, hint=_HINT) from exc
    if not parsed.host or any(char.isspace() for char in url):
        msg = f"server URL {url!r} ({source}) names no host, or holds a space"
        raise ValidationError(msg, hint=_HINT)
    if parsed.port is not None and not 1 <= parsed.port <= 65535:
        msg = f"server URL {url!r} ({source}) has port {parsed.port}, not one of 1 to 65535"
        raise ValidationError(msg, hint=_HINT)
    if parsed.query or parsed.fragment:
        msg = f"server URL {url!r} ({source}) is a base URL: it takes no ?query or #fragment"
        raise ValidationError(msg, hint=_HINT)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    return parsed.scheme, parsed.host.lower(), port, parsed.path.rstrip("/")


def _joined(items: Sequence[str]) -> str:
    return ",".join(items)


class ServerList:
    """The base URLs of a control plane's replicas, in order, and the current one.

    The first URL is current at first.  :meth:`failed` moves on from a URL that failed to the
    next one (round-robin); :meth:`answered` makes the URL that answered current, so the next
    request goes straight to it.  :meth:`rotation` is the order one request tries them in.
    Construction raises :class:`ValidationError` as :func:`parse_servers` does.  Not
    thread-safe (each client owns one and is used from one thread).
    """

    def __init__(self, urls: str | Sequence[str], *, source: str = "the server URL") -> None:
        self._urls = parse_servers(urls, source=source)
        self._current = 0

    @property
    def urls(self) -> tuple[str, ...]:
        """Every base URL, in the order given."""
        return self._urls

    @property
    def current(self) -> str:
        """The URL the next request goes to first."""
        return self._urls[self._current]

    def rotation(self) -> tuple[str, ...]:
        """Every URL once, from the current one on, wrapping around."""
        n = self._current
        return self._urls[n:] + self._urls[:n]

    def failed(self, url: str) -> str:
        """``url`` failed: if it is the current one, the next one (after the last, the first)
        becomes current.  Returns the current URL."""
        if url == self.current:
            self._current = (self._current + 1) % len(self._urls)
        return self.current

    def answered(self, url: str) -> None:
        """``url`` answered: it becomes current (:class:`ValueError` if it is not listed)."""
        self._current = self._urls.index(url)

    def __len__(self) -> int:
        return len(self._urls)

    def __str__(self) -> str:
        """The list as ``--server`` takes it: the URLs joined with commas."""
        return ",".join(self._urls)

    def __repr__(self) -> str:
        return f"ServerList({str(self)!r}, current={self.current!r})"


def describe_tries(tries: Sequence[tuple[str, str]]) -> str:
    """``tries`` (URL, what went wrong there) as one clause naming every URL tried."""
    return "; ".join(f"{url}: {why}" for url, why in tries)
