"""The project's own trace format: a CSV with one job per row.

Columns (header required, names case-insensitive, extra columns ignored)::

    submit_time,duration,num_gpus,team[,gpu_type][,dataset][,dataset_gb][,home_site]

Times are seconds.  ``gpu_type`` lists acceptable types separated by ``|`` (empty: any).
``dataset_gb`` is decimal gigabytes (10⁹ bytes).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path

from onecluster.errors import ValidationError
from onecluster.workload._job import TraceJob
from onecluster.workload._rows import RowErrors, read_lines, rows_of

__all__ = ["REQUIRED_COLUMNS", "parse_trace", "read_trace"]

#: Columns every trace CSV must have.
REQUIRED_COLUMNS = ("submit_time", "duration", "num_gpus", "team")

_GB = 1_000_000_000


def read_trace(path: str | Path) -> tuple[TraceJob, ...]:
    """Read the trace CSV at ``path``, jobs in file order.

    Raises :class:`TraceError` if the file cannot be read, a required column is missing
    (the message names it), or any row is bad (the message names the first bad lines).
    """
    return parse_trace(read_lines(path), source=str(path))


def parse_trace(lines: Iterable[str], *, source: str = "<trace>") -> tuple[TraceJob, ...]:
    """Parse trace CSV ``lines`` (see :func:`read_trace`); ``source`` names it in errors."""
    index, rows = rows_of(
        lines,
        source,
        REQUIRED_COLUMNS,
        kind="a trace CSV",
        hint=f"a trace CSV needs the columns {','.join(REQUIRED_COLUMNS)}; an Alibaba v2023 "
        "pod list is recognised by its num_gpu, creation_time … columns (docs/workload.md)",
    )
    errors = RowErrors(source)
    jobs: list[TraceJob] = []
    i_submit, i_dur, i_gpus, i_team = (index[c] for c in REQUIRED_COLUMNS)
    i_type = index.get("gpu_type")
    i_data = index.get("dataset")
    i_gb = index.get("dataset_gb")
    i_home = index.get("home_site")
    width = max(index.values()) + 1
    for line, cells in rows:
        row = cells + [""] * (width - len(cells)) if len(cells) < width else cells
        try:
            job = TraceJob(
                submit_time=_number(row[i_submit], "submit_time"),
                duration_s=_number(row[i_dur], "duration"),
                gpus=_whole(row[i_gpus], "num_gpus"),
                team=_text(row[i_team], "team"),
                gpu_types=_types(row[i_type]) if i_type is not None else (),
                dataset=(row[i_data].strip() or None) if i_data is not None else None,
                dataset_bytes=round(_number(row[i_gb], "dataset_gb", 0.0) * _GB)
                if i_gb is not None
                else 0,
                home_site=(row[i_home].strip() or None) if i_home is not None else None,
            )
            job.to_spec()  # a row is valid only if it makes a job the platform accepts
        except ValidationError as exc:
            errors.add(line, exc.message)
            continue
        jobs.append(job)
    errors.raise_if_any()
    return tuple(jobs)


def _number(cell: str, column: str, default: float | None = None) -> float:
    text = cell.strip()
    if not text and default is not None:
        return default
    try:
        value = float(text)
    except ValueError:
        msg = f"{column} {text!r} is not a number" if text else f"{column} is empty"
        raise ValidationError(msg) from None
    if not math.isfinite(value):
        msg = f"{column} {text!r} is not a finite number"
        raise ValidationError(msg)
    return value


def _whole(cell: str, column: str) -> int:
    value = _number(cell, column)
    if value != int(value):
        msg = f"{column} {cell.strip()!r} is not a whole number"
        raise ValidationError(msg)
    return int(value)


def _text(cell: str, column: str) -> str:
    text = cell.strip()
    if not text:
        msg = f"{column} is empty"
        raise ValidationError(msg)
    return text


def _types(cell: str) -> tuple[str, ...]:
    return tuple(t.strip() for t in cell.split("|") if t.strip())
