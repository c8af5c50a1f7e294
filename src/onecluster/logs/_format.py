"""How a log record becomes a line: text for people (the default), or one JSON object a
line for a log pipeline.

Both carry the same facts.  A JSON line has ``time`` (ISO 8601, UTC, milliseconds),
``level``, ``logger``, ``message``, then ``role``, ``site`` and ``request_id`` where known
(:class:`ContextFields`), ``exception`` (the traceback's text) when there is one, and every
field the caller passed with ``extra=``.  A value JSON cannot hold is written as its
``str``, so a log call never fails on what it logs.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from enum import StrEnum

from onecluster.logs._request_id import current_request_id

__all__ = ["ContextFields", "JsonFormatter", "LogFormat", "TextFormatter"]

#: The attributes every ``LogRecord`` has; anything else on a record came from ``extra=``.
_STANDARD = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message",
    "asctime",
    "taskName",
    "role",
    "site",
    "request_id",
}


class LogFormat(StrEnum):
    """The two ways a process writes its log."""

    TEXT = "text"
    JSON = "json"

    @classmethod
    def parse(cls, value: str, *, source: str) -> LogFormat:
        """``value`` as a format; :class:`ValueError` naming ``source`` and the choices."""
        try:
            return cls(value.strip().lower())
        except ValueError:
            choices = ", ".join(f.value for f in cls)
            msg = f"{source} is {value!r}; use one of {choices}"
            raise ValueError(msg) from None


class ContextFields(logging.Filter):
    """Puts the process's ``role`` and ``site`` and the current request id on every record
    (a handler's filter: records of every logger, uvicorn's and aiohttp's included)."""

    def __init__(self, role: str, site: str | None = None) -> None:
        super().__init__()
        self.role = role
        self.site = site

    def filter(self, record: logging.LogRecord) -> bool:
        record.role = self.role
        record.site = self.site
        if getattr(record, "request_id", None) is None:
            record.request_id = current_request_id()
        return True


def _extra(record: logging.LogRecord) -> dict[str, object]:
    return {
        k: v for k, v in record.__dict__.items() if k not in _STANDARD and not k.startswith("_")
    }


def _iso(created: float) -> str:
    return (
        datetime.fromtimestamp(created, UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


class JsonFormatter(logging.Formatter):
    """One JSON object a line (no newline inside: a traceback is one escaped string)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": _iso(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in ("role", "site", "request_id"):
            value = getattr(record, name, None)
            if value is not None:
                line[name] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        for key, value in _extra(record).items():
            line.setdefault(key, value)
        return json.dumps(line, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """``<time UTC> <LEVEL> <logger>: <message> [request_id=…] [key=value …]``, then the
    traceback on the lines after, as Python prints it."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        del datefmt
        return _iso(record.created)

    def formatMessage(self, record: logging.LogRecord) -> str:
        text = super().formatMessage(record)
        request_id = getattr(record, "request_id", None)
        fields = {"request_id": request_id} if request_id is not None else {}
        fields.update(_extra(record))
        if fields:
            text += " " + " ".join(f"{k}={v}" for k, v in fields.items())
        return text
