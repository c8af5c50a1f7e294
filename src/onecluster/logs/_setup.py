"""One call per process sets up its log: :func:`setup_logging`.

Every onecluster process calls it once in its entry point (the CLI's long-running commands,
the agent's watchdog, the training launcher and worker) with its role, its site where it has
one, the level and the format.  Records of every logger — onecluster's, uvicorn's, aiohttp's
— reach the root logger's one handler on stderr, so they all come out in the same format.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable
from typing import TextIO

from onecluster.logs._format import ContextFields, JsonFormatter, LogFormat, TextFormatter

__all__ = ["LOG_LEVELS", "setup_logging"]

#: The levels a process may be started at (``trace`` is uvicorn's, below ``debug``).
LOG_LEVELS = {
    "trace": 5,
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}
#: Libraries that log every request they make at INFO: one line a second per agent sync,
#: which says nothing an operator needs; they still log their warnings.
_CHATTY = ("httpx", "httpcore")


def setup_logging(
    *,
    role: str,
    level: str = "info",
    log_format: LogFormat = LogFormat.TEXT,
    site: str | None = None,
    stream: TextIO | None = None,
    quiet: Iterable[str] = _CHATTY,
) -> logging.Handler:
    """Send every record at ``level`` or above to ``stream`` (stderr) in ``log_format``,
    each carrying ``role``, ``site`` and the current request id; return the handler.

    Replaces whatever handlers the root logger had (calling it twice leaves one).
    :class:`ValueError` for a level not in :data:`LOG_LEVELS`, naming the choices; nothing
    is changed then.
    """
    number = LOG_LEVELS.get(level.strip().lower())
    if number is None:
        msg = f"unknown log level {level!r}; use one of {', '.join(LOG_LEVELS)}"
        raise ValueError(msg)
    handler: logging.Handler = _Stderr() if stream is None else logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter() if log_format is LogFormat.JSON else TextFormatter())
    handler.addFilter(ContextFields(role, site))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(number)
    for name in quiet:
        logging.getLogger(name).setLevel(max(number, logging.WARNING))
    return handler


class _Stderr(logging.StreamHandler[TextIO]):
    """A handler on whatever ``sys.stderr`` is when a record is written, not on the one of
    when it was made: a stream replaced since (by a test runner's capture, a daemon's
    redirection) and closed must not swallow every later record."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: TextIO) -> None:
        pass
