"""Shared plumbing of the trace readers: opening a CSV, collecting bad rows, slicing."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from onecluster.errors import TraceError
from onecluster.workload._job import TraceJob

__all__ = ["MAX_REPORTED", "RowErrors", "read_lines", "rows_of", "select"]

#: How many bad rows one :class:`TraceError` names (the count of the rest is given).
MAX_REPORTED = 10


class RowErrors:
    """Collects ``line: problem`` pairs so one error names every bad row, not just the first."""

    def __init__(self, source: str) -> None:
        self.source = source
        self._errors: list[tuple[int, str]] = []

    def add(self, line: int, problem: str) -> None:
        """Record that ``line`` is bad because of ``problem`` (a sentence fragment)."""
        self._errors.append((line, problem))

    def raise_if_any(self) -> None:
        """Raise :class:`TraceError` naming the first :data:`MAX_REPORTED` bad lines."""
        if not self._errors:
            return
        shown = "; ".join(f"line {n}: {p}" for n, p in self._errors[:MAX_REPORTED])
        more = len(self._errors) - MAX_REPORTED
        tail = f" (and {more} more)" if more > 0 else ""
        lines = "line" if len(self._errors) == 1 else "lines"
        msg = f"{self.source} has {len(self._errors)} bad {lines}: {shown}{tail}"
        raise TraceError(msg, hint="fix or delete those rows and read the trace again")


def read_lines(path: str | Path) -> list[str]:
    """The lines of the text file at ``path``; :class:`TraceError` if it cannot be read."""
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        msg = f"trace file {p} does not exist"
        raise TraceError(msg) from None
    except (OSError, UnicodeDecodeError) as exc:
        msg = f"trace file {p} cannot be read: {exc}"
        raise TraceError(msg) from exc


def rows_of(
    lines: Iterable[str], source: str, required: Sequence[str], *, kind: str, hint: str
) -> tuple[dict[str, int], list[tuple[int, list[str]]]]:
    """Parse the header of CSV ``lines`` and return (column index, rows with line numbers).

    ``kind`` names the format in messages (``"a trace CSV"``), ``hint`` says what it needs.
    Raises :class:`TraceError` if there is no header, a ``required`` column is missing, or
    there is no row after the header.  Blank lines are skipped; a row's line number is
    1-based and counts the header.
    """
    reader = csv.reader(iter(lines))
    header = next(reader, None)
    if not header:
        msg = f"{source} is empty; {kind} needs a header row naming its columns"
        raise TraceError(msg, hint=hint)
    index: dict[str, int] = {}
    for i, name in enumerate(header):
        index.setdefault(name.strip().lower(), i)
    missing = [c for c in required if c not in index]
    if missing:
        names = ", ".join(repr(c) for c in missing)
        noun = "column" if len(missing) == 1 else "columns"
        msg = f"{source} is read as {kind} but its header (line 1) lacks the {noun} {names}"
        raise TraceError(msg, hint=hint)
    rows = [(reader.line_num, row) for row in reader if row and any(cell.strip() for cell in row)]
    if not rows:
        msg = f"{source} has a header (line 1) and no rows after it: there is no job to read"
        raise TraceError(msg, hint="add one job per line under the header")
    return index, rows


def select(
    jobs: Sequence[TraceJob],
    *,
    time_scale: float = 1.0,
    skip: int = 0,
    limit: int | None = None,
    rebase: bool = False,
) -> tuple[TraceJob, ...]:
    """Order ``jobs`` by submit time, drop the first ``skip``, keep at most ``limit``, and
    divide submit times by ``time_scale`` (> 1 compresses arrivals; durations are unchanged).

    With ``rebase`` the first kept job arrives at time 0.  :class:`TraceError` for a
    non-positive ``time_scale`` or a negative ``skip``/``limit``.
    """
    if not time_scale > 0:
        msg = f"the time scale must be greater than 0 (got {time_scale})"
        raise TraceError(msg)
    if skip < 0 or (limit is not None and limit < 0):
        msg = f"skip and limit must not be negative (got skip={skip}, limit={limit})"
        raise TraceError(msg)
    ordered = sorted(jobs, key=lambda j: j.submit_time)
    end = None if limit is None else skip + limit
    kept = ordered[skip:end]
    origin = kept[0].submit_time if (rebase and kept) else 0.0
    if origin == 0.0 and time_scale == 1.0:
        return tuple(kept)
    return tuple(replace(j, submit_time=(j.submit_time - origin) / time_scale) for j in kept)
