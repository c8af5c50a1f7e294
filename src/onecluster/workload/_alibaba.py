"""The Alibaba GPU cluster trace v2023 (``openb_pod_list_*.csv``) as a multi-site workload.

The trace's pods have no team or site, so both are derived, deterministically:

* **team** — with ``teams`` given: ``teams[crc32(pod name) % len(teams)]`` (CRC-32 of the
  UTF-8 name, stable across runs and machines, roughly equal shares); without: from the pod's
  QoS class, ``trace-ls``, ``trace-be``, ``trace-burstable``, ``trace-guaranteed``.
* **home site** — ``home_sites[team]`` when given, else ``None``.

Per pod: pods with ``num_gpu`` 0 are skipped; ``gpus = num_gpu`` (a fractional share,
``gpu_milli`` < 1000, counts as one whole GPU); submit time = ``creation_time``; duration =
``deletion_time − scheduled_time``, pods never scheduled or with a non-positive duration are
dropped; ``gpu_spec`` ``A|B`` lists acceptable GPU models, translated through ``gpu_map``.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from onecluster.errors import TraceError
from onecluster.workload._csv import REQUIRED_COLUMNS
from onecluster.workload._job import TraceJob
from onecluster.workload._rows import RowErrors, read_lines, rows_of, select

__all__ = ["ALIBABA_COLUMNS", "is_alibaba_header", "parse_alibaba", "read_alibaba"]

#: Columns of the v2023 pod list that the reader uses.
ALIBABA_COLUMNS = (
    "name",
    "num_gpu",
    "gpu_spec",
    "qos",
    "creation_time",
    "deletion_time",
    "scheduled_time",
)


#: Columns only the pod list has (the project's trace has none of them).
_POD_LIST_ONLY = frozenset(
    {"num_gpu", "gpu_milli", "cpu_milli", "memory_mib", "pod_phase"}
    | {"creation_time", "deletion_time", "scheduled_time"}
)


def is_alibaba_header(header_line: str) -> bool:
    """Whether a CSV header line is that of an Alibaba v2023 pod list: it names a column only
    the pod list has and none that the project's trace CSV requires.

    A pod list with columns missing is still recognised, so that its error names the pod
    list's missing columns rather than the project's.
    """
    names = {c.strip().lower() for c in header_line.split(",")}
    return bool(names & _POD_LIST_ONLY) and not names & set(REQUIRED_COLUMNS)


def read_alibaba(
    path: str | Path,
    *,
    teams: Sequence[str] = (),
    home_sites: Mapping[str, str] | None = None,
    gpu_map: Mapping[str, str] | None = None,
    time_scale: float = 1.0,
    start_s: float = 0.0,
    skip: int = 0,
    limit: int | None = None,
    max_duration_s: float | None = None,
) -> tuple[TraceJob, ...]:
    """Read an Alibaba v2023 pod list as GPU jobs ordered by submit time.

    ``gpu_map`` maps trace GPU models (``V100M32``, ``T4``, ``G2`` …) to the fabric's GPU
    types; without it the trace's names are kept.  Pods created before ``start_s`` (trace
    seconds) are dropped; then ``skip``/``limit`` take a slice, the first kept pod arrives at
    time 0 and submit times are divided by ``time_scale`` (> 1 compresses arrivals, durations
    are unchanged).  ``max_duration_s`` clips long durations (the trace holds services that
    ran for months).  See the module docstring for the team and home-site mapping.

    Raises :class:`TraceError` for an unreadable file, a missing column, bad rows (naming the
    lines), or a GPU model that ``gpu_map`` does not map.
    """
    return parse_alibaba(
        read_lines(path),
        source=str(path),
        teams=teams,
        home_sites=home_sites,
        gpu_map=gpu_map,
        time_scale=time_scale,
        start_s=start_s,
        skip=skip,
        limit=limit,
        max_duration_s=max_duration_s,
    )


def parse_alibaba(
    lines: Iterable[str],
    *,
    source: str = "<alibaba trace>",
    teams: Sequence[str] = (),
    home_sites: Mapping[str, str] | None = None,
    gpu_map: Mapping[str, str] | None = None,
    time_scale: float = 1.0,
    start_s: float = 0.0,
    skip: int = 0,
    limit: int | None = None,
    max_duration_s: float | None = None,
) -> tuple[TraceJob, ...]:
    """Parse Alibaba v2023 pod-list ``lines``; see :func:`read_alibaba`."""
    if max_duration_s is not None and not max_duration_s > 0:
        msg = f"max_duration_s must be greater than 0 (got {max_duration_s})"
        raise TraceError(msg)
    index, rows = rows_of(
        lines,
        source,
        ALIBABA_COLUMNS,
        kind="an Alibaba v2023 pod list",
        hint=f"a pod list needs the columns {','.join(ALIBABA_COLUMNS)} (docs/workload.md)",
    )
    i_name, i_gpu, i_spec, i_qos, i_create, i_delete, i_sched = (index[c] for c in ALIBABA_COLUMNS)
    width = max(index.values()) + 1
    homes = dict(home_sites or {})
    errors = RowErrors(source)
    jobs: list[TraceJob] = []
    for line, row in rows:
        if len(row) < width:
            errors.add(line, f"has {len(row)} fields, the header has at least {width}")
            continue
        try:
            gpus = int(row[i_gpu])
            if gpus < 0:
                errors.add(line, f"num_gpu is negative ({gpus})")
                continue
            if gpus == 0:
                continue  # a CPU pod
            if not row[i_sched].strip():
                continue  # never scheduled: the trace gives it no run time
            created = float(row[i_create])
            duration = float(row[i_delete]) - float(row[i_sched])
        except ValueError:
            errors.add(line, "a count or a time (num_gpu, *_time) is not a number")
            continue
        if duration <= 0 or created < start_s:
            continue
        if max_duration_s is not None:
            duration = min(duration, max_duration_s)
        name = row[i_name].strip()
        team = _team(name, row[i_qos], teams)
        types = _gpu_types(row[i_spec], gpu_map, line, errors)
        if types is None:
            continue
        jobs.append(
            TraceJob(
                submit_time=created,
                duration_s=duration,
                gpus=gpus,
                team=team,
                gpu_types=types,
                home_site=homes.get(team),
                name=name,
            )
        )
    errors.raise_if_any()
    return select(jobs, time_scale=time_scale, skip=skip, limit=limit, rebase=True)


def _team(name: str, qos: str, teams: Sequence[str]) -> str:
    if teams:
        return teams[zlib.crc32(name.encode("utf-8")) % len(teams)]
    return "trace-" + (qos.strip().lower() or "unknown")


def _gpu_types(
    spec: str, gpu_map: Mapping[str, str] | None, line: int, errors: RowErrors
) -> tuple[str, ...] | None:
    models = [m.strip() for m in spec.split("|") if m.strip()]
    if gpu_map is None:
        return tuple(models)
    unknown = [m for m in models if m not in gpu_map]
    if unknown:
        errors.add(line, f"GPU model {unknown[0]!r} is not in the GPU map")
        return None
    return tuple(dict.fromkeys(gpu_map[m] for m in models))
