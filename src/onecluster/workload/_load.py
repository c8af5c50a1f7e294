"""Read any trace file the CLI is given, recognising its format from the header."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from onecluster.errors import TraceError
from onecluster.workload._alibaba import is_alibaba_header, parse_alibaba
from onecluster.workload._csv import parse_trace
from onecluster.workload._job import TraceJob
from onecluster.workload._rows import read_lines, select

__all__ = ["load_trace", "trace_format"]


def trace_format(path: str | Path) -> str:
    """``"alibaba"`` if the file at ``path`` is an Alibaba v2023 pod list, else ``"csv"``.

    Raises :class:`TraceError` if the file cannot be read.
    """
    lines = read_lines(path)
    return "alibaba" if lines and is_alibaba_header(lines[0]) else "csv"


def load_trace(
    path: str | Path,
    *,
    teams: Sequence[str] = (),
    home_sites: Mapping[str, str] | None = None,
    gpu_map: Mapping[str, str] | None = None,
    time_scale: float = 1.0,
    skip: int = 0,
    limit: int | None = None,
    max_duration_s: float | None = None,
) -> tuple[TraceJob, ...]:
    """Read the trace at ``path`` in whichever format its header shows, ordered by submit time.

    An Alibaba v2023 pod list goes through :func:`read_alibaba` with ``teams``,
    ``home_sites`` and ``gpu_map``; any other file is read as the project's trace CSV
    (:func:`read_trace`) and those three are ignored.  ``skip``, ``limit`` and
    ``time_scale`` slice and compress either; ``max_duration_s`` clips durations (Alibaba
    pods include services that ran for months).  Raises :class:`TraceError` like the
    readers, and for a non-positive ``max_duration_s``.
    """
    lines = read_lines(path)
    if lines and is_alibaba_header(lines[0]):
        return parse_alibaba(
            lines,
            source=str(path),
            teams=teams,
            home_sites=home_sites,
            gpu_map=gpu_map,
            time_scale=time_scale,
            skip=skip,
            limit=limit,
            max_duration_s=max_duration_s,
        )
    jobs = parse_trace(lines, source=str(path))
    if max_duration_s is not None:
        if not max_duration_s > 0:
            msg = f"max_duration_s must be greater than 0 (got {max_duration_s})"
            raise TraceError(msg)
        jobs = tuple(
            replace(j, duration_s=max_duration_s) if j.duration_s > max_duration_s else j
            for j in jobs
        )
    return select(jobs, time_scale=time_scale, skip=skip, limit=limit)
