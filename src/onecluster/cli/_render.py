"""Rendering helpers shared by the commands: consoles, times, durations, job tables."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.table import Table

from onecluster.errors import ValidationError

__all__ = [
    "err_console",
    "format_age",
    "format_bytes",
    "format_duration",
    "format_rate",
    "format_time",
    "jobs_table",
    "out_console",
    "parse_duration",
]

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def out_console() -> Console:
    """A console on stdout that never wraps long lines into the middle of a value."""
    return Console(highlight=False, soft_wrap=True)


def err_console() -> Console:
    """A console on stderr for warnings and errors."""
    return Console(stderr=True, highlight=False, soft_wrap=True)


def parse_duration(text: str, *, what: str = "the duration") -> float:
    """``'90'``, ``'90s'``, ``'30m'``, ``'2h'``, ``'1.5d'`` → seconds.

    Raises :class:`ValidationError` for anything else or a value that is not positive.
    """
    cleaned = text.strip().lower()
    unit = _UNITS.get(cleaned[-1:]) if cleaned else None
    number = cleaned[:-1] if unit is not None else cleaned
    try:
        value = float(number) * (unit or 1.0)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        msg = f"{what} {text!r} is not a positive duration"
        raise ValidationError(msg, hint="give seconds or a number with s, m, h or d, e.g. 90s, 2h")
    return value


def format_duration(seconds: float | None) -> str:
    """``5400`` → ``'1h30m'``; ``None`` → ``'-'``."""
    if seconds is None:
        return "-"
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def format_bytes(count: float | None) -> str:
    """``1_500_000_000`` → ``'1.50 GB'`` (decimal units, as the fabric's GB); ``None`` → ``'?'``."""
    if count is None:
        return "?"
    value = float(count)
    if abs(value) < 1000:
        return f"{value:.0f} B"
    for unit in ("kB", "MB", "GB", "TB"):
        value /= 1000
        if abs(value) < 1000:
            return f"{value:.2f} {unit}"
    return f"{value / 1000:.2f} PB"


def format_rate(bits_per_second: float | None) -> str:
    """``8e8`` → ``'800.0 Mbit/s'``; ``None`` or 0 → ``'-'``."""
    if not bits_per_second:
        return "-"
    value = bits_per_second
    if value < 1000:
        return f"{value:.1f} bit/s"
    for unit in ("kbit/s", "Mbit/s"):
        value /= 1000
        if value < 1000:
            return f"{value:.1f} {unit}"
    return f"{value / 1000:.1f} Gbit/s"


def format_time(epoch: float | None) -> str:
    """Epoch seconds as ``YYYY-MM-DD HH:MM:SS`` UTC; ``None`` → ``'-'``."""
    if epoch is None:
        return "-"
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S")


def format_age(epoch: float | None, *, now: float | None = None) -> str:
    """How long ago ``epoch`` was, e.g. ``'3s ago'``; ``None`` → ``'never'``."""
    if epoch is None:
        return "never"
    current = time.time() if now is None else now
    return f"{format_duration(max(current - epoch, 0.0))} ago"


def jobs_table(jobs: Iterable[Any], *, now: float | None = None) -> Table:
    """A table of jobs (objects with the fields of the API's ``Job``)."""
    table = Table(title=None, header_style="bold")
    for column in ("ID", "NAME", "TEAM", "STATE", "GPUS", "WHERE", "WAITED", "RAN"):
        table.add_column(column, no_wrap=column in {"ID", "STATE"})
    current = time.time() if now is None else now
    for job in jobs:
        started, finished = job.started_at, job.finished_at
        waited = (started or finished or current) - job.submitted_at
        ran = None if started is None else (finished or current) - started
        table.add_row(
            job.id,
            job.name,
            job.team,
            _state_markup(str(job.state)),
            str(job.gpus),
            _where(job.parts),
            format_duration(waited),
            format_duration(ran),
        )
    return table


def _where(parts: Sequence[Any]) -> str:
    if not parts:
        return "-"
    return ", ".join(f"{p.site}:{p.gpu_type}x{p.gpus}" for p in parts)


def _state_markup(state: str) -> str:
    colour = {
        "running": "green",
        "pending": "yellow",
        "completed": "blue",
        "failed": "red",
        "cancelled": "magenta",
    }.get(state, "white")
    return f"[{colour}]{state}[/]"
