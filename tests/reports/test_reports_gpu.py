"""The monthly GPU report, checked against numbers computed by hand."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime

import pytest

from onecluster.errors import ValidationError
from onecluster.model import Circuit, Fabric, GpuPool, Site, Team
from onecluster.reports import CSV_COLUMNS, GpuReport, UsageRecord, gpu_report

FEB_2026 = datetime(2026, 2, 1, tzinfo=UTC).timestamp()  # February 2026 has 672 hours
MAR_2026 = datetime(2026, 3, 1, tzinfo=UTC).timestamp()
H = 3600.0


def _fabric() -> Fabric:
    return Fabric(
        name="two",
        sites=(
            Site(
                name="a",
                region="r1",
                jurisdiction="X",
                pools=(GpuPool(gpu_type="X", count=8, cost_per_gpu_hour=2.0),),
            ),
            Site(
                name="b",
                region="r2",
                jurisdiction="Y",
                pools=(GpuPool(gpu_type="Y", count=4, cost_per_gpu_hour=1.0),),
            ),
        ),
        circuits=(Circuit(name="a-b", a="a", b="b", capacity_gbps=1, rtt_ms=10),),
        teams=(
            Team(name="t1", home_site="a", quota={"X": 4}),
            Team(name="t2", home_site="b", quota={}),
        ),
    )


def _rec(
    job: str,
    team: str,
    site: str,
    gpus: int,
    start: float,
    end: float,
    cost: float,
    *,
    borrowed: bool = False,
    waited: float = 0.0,
) -> UsageRecord:
    return UsageRecord(
        job_id=job,
        team=team,
        site=site,
        gpu_type="X" if site == "a" else "Y",
        gpus=gpus,
        started_at=start,
        finished_at=end,
        cost_per_gpu_hour=cost,
        borrowed=borrowed,
        waited_s=waited,
    )


def _records() -> list[UsageRecord]:
    return [
        # j1, first attempt: 4 GPUs x 2 h = 8 GPU-h at 2.0 = 16.0; waited 60 s
        _rec("j1", "t1", "a", 4, FEB_2026 + 1 * H, FEB_2026 + 3 * H, 2.0, waited=60),
        # j2 starts in January: only its last hour counts, 2 GPU-h borrowed at 1.0; wait not counted
        _rec(
            "j2", "t1", "b", 2, FEB_2026 - 1 * H, FEB_2026 + 1 * H, 1.0, borrowed=True, waited=600
        ),
        # j3 runs over the month's end: half an hour of 1 GPU in February = 0.5 GPU-h at 2.0
        _rec("j3", "t2", "a", 1, MAR_2026 - 0.5 * H, MAR_2026 + 0.5 * H, 2.0, waited=30),
        # j4 is entirely in March
        _rec("j4", "t2", "b", 1, MAR_2026 + 24 * H, MAR_2026 + 25 * H, 1.0, waited=5),
        # j1, second attempt after a preemption: 4 GPU-h = 8.0; waited 120 s
        _rec("j1", "t1", "a", 4, FEB_2026 + 5 * H, FEB_2026 + 6 * H, 2.0, waited=120),
    ]


def test_rows_per_team_match_hand_computed_numbers() -> None:
    report = gpu_report(_records(), _fabric(), "2026-02")
    assert report.hours == 672
    t1, t2 = report.rows_by_team
    assert (t1.name, t1.gpu_hours, t1.borrowed_gpu_hours, t1.cost, t1.jobs) == (
        "t1",
        14.0,
        2.0,
        26.0,
        2,
    )
    assert t1.capacity_gpu_hours == 4 * 672
    assert t1.utilization == pytest.approx(14 / 2688)
    assert (t1.mean_wait_s, t1.p95_wait_s) == (90.0, 120.0)
    # t2 has no quota, so its capacity is the whole fabric's: 12 GPUs x 672 h
    assert (t2.gpu_hours, t2.cost, t2.jobs, t2.capacity_gpu_hours) == (0.5, 1.0, 1, 12 * 672)
    assert (t2.mean_wait_s, t2.p95_wait_s) == (30.0, 30.0)


def test_rows_per_site_and_total_match_hand_computed_numbers() -> None:
    report = gpu_report(_records(), _fabric(), "2026-02")
    a, b = report.rows_by_site
    assert (a.name, a.gpu_hours, a.cost, a.jobs) == ("a", 12.5, 25.0, 2)
    assert a.utilization == pytest.approx(12.5 / (8 * 672))
    assert a.mean_wait_s == pytest.approx(70.0)
    assert a.p95_wait_s == 120.0  # nearest rank of [30, 60, 120]: ceil(0.95 * 3) = 3rd
    assert (b.name, b.gpu_hours, b.borrowed_gpu_hours, b.cost, b.jobs) == ("b", 2.0, 2.0, 2.0, 1)
    assert (b.mean_wait_s, b.p95_wait_s) == (None, None)
    total = report.total
    assert (total.gpu_hours, total.borrowed_gpu_hours, total.cost, total.jobs) == (
        14.5,
        2.0,
        27.0,
        3,
    )
    assert total.utilization == pytest.approx(14.5 / (12 * 672))


def test_idle_month_has_a_zero_row_for_every_team_and_site() -> None:
    report = gpu_report(_records(), _fabric(), "2025-11")
    assert [r.name for r in report.rows_by_team] == ["t1", "t2"]
    assert [r.name for r in report.rows_by_site] == ["a", "b"]
    assert all(
        r.gpu_hours == 0 and r.jobs == 0 and r.mean_wait_s is None for r in report.rows_by_site
    )
    assert report.total.utilization == 0


def test_unknown_site_and_team_get_rows_after_the_declared_ones() -> None:
    stray = _rec("j9", "ghost", "c", 2, FEB_2026, FEB_2026 + 3 * H, 0.5)
    report = gpu_report([*_records(), stray], _fabric(), "2026-02")
    assert [r.name for r in report.rows_by_site] == ["a", "b", "c"]
    c = report.rows_by_site[-1]
    assert (c.gpu_hours, c.cost, c.utilization, c.capacity_gpu_hours) == (6.0, 3.0, None, None)
    ghost = report.rows_by_team[-1]
    assert ghost.name == "ghost"
    assert ghost.capacity_gpu_hours == 12 * 672


def test_zero_length_attempt_starting_in_month_counts_as_a_job_and_a_wait() -> None:
    blip = _rec("j5", "t2", "b", 1, FEB_2026 + H, FEB_2026 + H, 1.0, waited=10)
    report = gpu_report([blip], _fabric(), "2026-02")
    row = report.rows_by_team[1]
    assert (row.gpu_hours, row.jobs, row.mean_wait_s) == (0.0, 1, 10.0)


def test_to_json_has_the_documented_shape() -> None:
    body = gpu_report(_records(), _fabric(), "2026-02").to_json()
    assert body["month"] == "2026-02"
    assert (body["period_start"], body["period_end"]) == (FEB_2026, MAR_2026)
    assert [t["name"] for t in body["teams"]] == ["t1", "t2"]
    assert body["teams"][0] == {
        "name": "t1",
        "gpu_hours": 14.0,
        "borrowed_gpu_hours": 2.0,
        "cost": 26.0,
        "capacity_gpu_hours": 2688.0,
        "utilization": round(14 / 2688, 6),
        "mean_wait_s": 90.0,
        "p95_wait_s": 120.0,
        "jobs": 2,
        "lost_gpu_hours": 0.0,
    }
    assert body["total"]["gpu_hours"] == 14.5


def test_to_csv_lists_teams_then_sites_then_total() -> None:
    text = gpu_report(_records(), _fabric(), "2026-02").to_csv()
    rows = list(csv.reader(io.StringIO(text)))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert [(r[0], r[1]) for r in rows[1:]] == [
        ("team", "t1"),
        ("team", "t2"),
        ("site", "a"),
        ("site", "b"),
        ("total", "total"),
    ]
    site_b = rows[4]
    assert site_b[2:5] == ["2.0", "2.0", "2.0"]
    assert site_b[6:8] == ["", ""]  # no attempt started at b in February: no wait figures


@pytest.mark.parametrize(
    "month", ["2026-2", "2026-13", "2026-00", "2026-02-01", " 2026-02", "26-02", "feb", ""]
)
def test_malformed_month_is_a_validation_error(month: str) -> None:
    with pytest.raises(ValidationError) as info:
        gpu_report([], _fabric(), month)
    assert info.value.hint is not None
    assert "YYYY-MM" in info.value.hint


def test_month_lengths_follow_the_calendar() -> None:
    assert gpu_report([], _fabric(), "2024-02").hours == 696  # leap year
    december = gpu_report([], _fabric(), "2025-12")
    assert december.hours == 744
    assert december.period_end == datetime(2026, 1, 1, tzinfo=UTC).timestamp()


def test_report_is_a_frozen_value() -> None:
    report = gpu_report([], _fabric(), "2026-02")
    assert isinstance(report, GpuReport)
    with pytest.raises(AttributeError):
        report.month = "2026-03"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("gpus", 0),
        ("finished_at", FEB_2026 - 1),
        ("cost_per_gpu_hour", -1.0),
        ("waited_s", -5.0),
        ("lost_s", -1.0),
        ("lost_s", H + 1),
    ],
)
def test_invalid_usage_record_is_rejected(field: str, value: float) -> None:
    fields: dict[str, object] = {
        "job_id": "j",
        "team": "t1",
        "site": "a",
        "gpu_type": "X",
        "gpus": 1,
        "started_at": FEB_2026,
        "finished_at": FEB_2026 + H,
        "cost_per_gpu_hour": 1.0,
    }
    fields[field] = value
    with pytest.raises(ValidationError):
        UsageRecord(**fields)  # type: ignore[arg-type]


def test_json_round_trip_gives_the_same_csv() -> None:
    report = gpu_report(_records(), _fabric(), "2026-02")
    again = GpuReport.from_json(report.to_json())
    assert again.to_csv() == report.to_csv()
    assert again.rows_by_site[1].mean_wait_s is None


def test_malformed_report_json_is_a_validation_error() -> None:
    body = gpu_report(_records(), _fabric(), "2026-02").to_json()
    del body["teams"][0]["cost"]
    with pytest.raises(ValidationError, match="malformed"):
        GpuReport.from_json(body)
