"""The monthly GPU report: GPU-hours, cost, utilisation, queue wait and the GPU-hours lost
to preemption, per team and per site.

A pure function of usage records and the fabric; the server feeds it attempts from the store
and serves the result at ``GET /api/v1/reports/gpu``, the CLI renders it.
"""

from __future__ import annotations

import csv
import io
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from onecluster.errors import ValidationError
from onecluster.model import Fabric
from onecluster.reports._month import Month
from onecluster.reports._usage import UsageRecord

__all__ = ["CSV_COLUMNS", "GpuReport", "ReportRow", "gpu_report"]

#: Columns of :meth:`GpuReport.to_csv`, in order.
CSV_COLUMNS = (
    "group",
    "name",
    "gpu_hours",
    "borrowed_gpu_hours",
    "cost",
    "utilization",
    "mean_wait_s",
    "p95_wait_s",
    "jobs",
    "lost_gpu_hours",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportRow:
    """One team's or one site's month.

    ``gpu_hours`` includes ``borrowed_gpu_hours`` (the part run beyond quota on idle GPUs).
    ``utilization`` is ``gpu_hours`` ÷ ``capacity_gpu_hours``; it exceeds 1 for a team that
    borrowed beyond its quota, and is ``None`` when the capacity is unknown (a site that is
    not in the fabric).  Waits are over the attempts that *started* in the month.
    ``lost_gpu_hours``: GPU-hours of work that preemptions threw away (each preempted
    attempt's GPUs × what it ran less what its job's checkpoints kept), counted in the month
    the preempted attempt ended in.
    """

    name: str
    gpu_hours: float
    borrowed_gpu_hours: float
    cost: float
    capacity_gpu_hours: float | None
    utilization: float | None
    mean_wait_s: float | None
    p95_wait_s: float | None
    jobs: int
    lost_gpu_hours: float

    def to_json(self) -> dict[str, Any]:
        """The row as JSON-ready values, rounded for reading (hours 3 places, cost 2)."""
        return {
            "name": self.name,
            "gpu_hours": round(float(self.gpu_hours), 3),
            "borrowed_gpu_hours": round(float(self.borrowed_gpu_hours), 3),
            "cost": round(float(self.cost), 2),
            "capacity_gpu_hours": _maybe_round(self.capacity_gpu_hours, 3),
            "utilization": _maybe_round(self.utilization, 6),
            "mean_wait_s": _maybe_round(self.mean_wait_s, 3),
            "p95_wait_s": _maybe_round(self.p95_wait_s, 3),
            "jobs": self.jobs,
            "lost_gpu_hours": round(float(self.lost_gpu_hours), 3),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ReportRow:
        """The row from :meth:`to_json` output (e.g. an API response); :class:`ValidationError`
        if a field is missing or of the wrong type."""
        try:
            return cls(
                name=str(data["name"]),
                gpu_hours=float(data["gpu_hours"]),
                borrowed_gpu_hours=float(data["borrowed_gpu_hours"]),
                cost=float(data["cost"]),
                capacity_gpu_hours=_maybe_float(data["capacity_gpu_hours"]),
                utilization=_maybe_float(data["utilization"]),
                mean_wait_s=_maybe_float(data["mean_wait_s"]),
                p95_wait_s=_maybe_float(data["p95_wait_s"]),
                jobs=int(data["jobs"]),
                # A server from before checkpoints (issue 16) counted no loss.
                lost_gpu_hours=float(data.get("lost_gpu_hours", 0.0)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            msg = f"a GPU report row is malformed ({type(exc).__name__}: {exc})"
            raise ValidationError(msg) from exc


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuReport:
    """The GPU report of one month: rows per team, per site, and the fabric's total."""

    month: str
    period_start: float
    period_end: float
    hours: float
    rows_by_team: tuple[ReportRow, ...]
    rows_by_site: tuple[ReportRow, ...]
    total: ReportRow

    def to_json(self) -> dict[str, Any]:
        """``{month, period_start, period_end, hours, teams: [row], sites: [row], total: row}``."""
        return {
            "month": self.month,
            "period_start": self.period_start,
            "period_end": self.period_end,
            "hours": self.hours,
            "teams": [r.to_json() for r in self.rows_by_team],
            "sites": [r.to_json() for r in self.rows_by_site],
            "total": self.total.to_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GpuReport:
        """The report from :meth:`to_json` output; :class:`ValidationError` if malformed."""
        try:
            return cls(
                month=str(Month.parse(data["month"])),
                period_start=float(data["period_start"]),
                period_end=float(data["period_end"]),
                hours=float(data["hours"]),
                rows_by_team=tuple(ReportRow.from_json(r) for r in data["teams"]),
                rows_by_site=tuple(ReportRow.from_json(r) for r in data["sites"]),
                total=ReportRow.from_json(data["total"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            msg = f"a GPU report is malformed ({type(exc).__name__}: {exc})"
            raise ValidationError(msg) from exc

    def to_csv(self) -> str:
        """One line per team (``group=team``), per site (``group=site``) and the total
        (``group=total``) under a header of :data:`CSV_COLUMNS`; empty cells for unknowns."""
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(CSV_COLUMNS)
        groups = (("team", self.rows_by_team), ("site", self.rows_by_site))
        for group, rows in (*groups, ("total", (self.total,))):
            for row in rows:
                values = row.to_json()
                writer.writerow(
                    [group, *("" if values[c] is None else values[c] for c in CSV_COLUMNS[1:])]
                )
        return out.getvalue()


def gpu_report(records: Iterable[UsageRecord], fabric: Fabric, month: str) -> GpuReport:
    """The report of ``month`` (``YYYY-MM``, UTC) over ``records``.

    Each attempt counts only for the part of it inside the month.  Every site and team of the
    fabric gets a row (zero if idle); teams and sites that appear only in the records are
    added after them, by name.  Raises :class:`ValidationError` for a malformed month.
    """
    period = Month.parse(month)
    start, end = period.start, period.end
    selected = [r for r in records if r.touches(start, end)]

    def site_capacity(name: str) -> float | None:
        return fabric.site(name).total_gpus * period.hours if fabric.has_site(name) else None

    def team_capacity(name: str) -> float | None:
        team = fabric.team(name)
        quota_gpus = sum(team.quota.values()) if team is not None and team.quota else 0
        return (quota_gpus or fabric.total_gpus) * period.hours

    team_names = _ordered([t.name for t in fabric.teams], [r.team for r in selected])
    site_names = _ordered(list(fabric.site_names), [r.site for r in selected])
    by_team = _group(selected, lambda r: r.team)
    by_site = _group(selected, lambda r: r.site)
    return GpuReport(
        month=str(period),
        period_start=start,
        period_end=end,
        hours=period.hours,
        rows_by_team=tuple(
            _row(n, by_team.get(n, []), team_capacity(n), start, end) for n in team_names
        ),
        rows_by_site=tuple(
            _row(n, by_site.get(n, []), site_capacity(n), start, end) for n in site_names
        ),
        total=_row("total", selected, fabric.total_gpus * period.hours, start, end),
    )


def _row(
    name: str,
    records: Sequence[UsageRecord],
    capacity: float | None,
    start: float,
    end: float,
) -> ReportRow:
    gpu_hours = sum(r.gpu_hours_within(start, end) for r in records)
    borrowed = sum(r.gpu_hours_within(start, end) for r in records if r.borrowed)
    cost = sum(r.gpu_hours_within(start, end) * r.cost_per_gpu_hour for r in records)
    waits = sorted(r.waited_s for r in records if start <= r.started_at < end)
    lost = sum(r.lost_gpu_hours_within(start, end) for r in records)
    return ReportRow(
        name=name,
        gpu_hours=gpu_hours,
        borrowed_gpu_hours=borrowed,
        cost=cost,
        capacity_gpu_hours=capacity,
        utilization=gpu_hours / capacity if capacity else None,
        mean_wait_s=sum(waits) / len(waits) if waits else None,
        p95_wait_s=_nearest_rank(waits, 0.95) if waits else None,
        jobs=len({r.job_id for r in records}),
        lost_gpu_hours=lost,
    )


def _nearest_rank(ordered: Sequence[float], q: float) -> float:
    """The ``q`` quantile by the nearest-rank method (a value that occurred, never interpolated)."""
    return ordered[max(math.ceil(q * len(ordered)) - 1, 0)]


def _group(
    records: Iterable[UsageRecord], key: Callable[[UsageRecord], str]
) -> dict[str, list[UsageRecord]]:
    groups: dict[str, list[UsageRecord]] = defaultdict(list)
    for r in records:
        groups[key(r)].append(r)
    return groups


def _ordered(declared: list[str], seen: Iterable[str]) -> list[str]:
    extra = sorted(set(seen) - set(declared))
    return declared + extra


def _maybe_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _maybe_round(value: float | None, places: int) -> float | None:
    return None if value is None else round(float(value), places)
