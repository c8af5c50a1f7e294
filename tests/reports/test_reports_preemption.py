"""GPU-hours lost to preemption: what each preempted attempt ran less what its job's
checkpoints kept, per team, checked against numbers computed by hand."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from onecluster.model import AttemptRecord, AttemptState, Fabric, GpuPool, JobSpec, Site, Team
from onecluster.reports import GpuReport, gpu_report, usage_record

MAR_2026 = datetime(2026, 3, 1, tzinfo=UTC).timestamp()
APR_2026 = datetime(2026, 4, 1, tzinfo=UTC).timestamp()
H = 3600.0


def _fabric() -> Fabric:
    return Fabric(
        name="one",
        sites=(
            Site(
                name="a",
                region="r1",
                jurisdiction="X",
                pools=(GpuPool(gpu_type="X", count=64, cost_per_gpu_hour=2.0),),
            ),
        ),
        teams=(Team(name="t1", home_site="a"), Team(name="t2", home_site="a")),
    )


def _attempt(
    job: str,
    gpus: int,
    start: float,
    end: float | None,
    *,
    preempted: bool = True,
    ran: tuple[float, float] | None = None,
) -> AttemptRecord:
    return AttemptRecord(
        id=f"{job}.1.0",
        job_id=job,
        run=1,
        site="a",
        gpu_type="X",
        gpus=gpus,
        state=AttemptState.EXITED if end is not None else AttemptState.RUNNING,
        stop_reason="pre-empted" if preempted else None,
        exit_code=143 if end is not None else None,
        started_at=start,
        finished_at=end,
        borrowed=False,
        preemptible=True,
        waited_s=0.0,
        cost_per_gpu_hour=2.0,
        cost=0.0,
        ran_from=ran[0] if ran else None,
        ran_until=ran[1] if ran else None,
        preempted=preempted,
    )


def _spec(team: str, **kw: object) -> JobSpec:
    return JobSpec(team=team, gpus=8, duration_s=10 * H, **kw)  # type: ignore[arg-type]


def test_a_preempted_attempt_loses_what_its_checkpoints_did_not_keep() -> None:
    start = MAR_2026 + H
    ran = 2.5 * H
    # No checkpoint: all 2.5 h lost.
    plain = usage_record(_attempt("j1", 8, start, start + ran), "t1", _spec("t1"), now=APR_2026)
    assert plain.lost_s == ran
    # A checkpoint every hour: the last half hour lost.
    hourly = _spec("t1", checkpoint_interval_s=H)
    every = usage_record(_attempt("j2", 8, start, start + ran), "t1", hourly, now=APR_2026)
    assert every.lost_s == 0.5 * H
    # A checkpoint on SIGTERM: nothing lost.
    sigterm = _spec("t1", checkpoint_on_sigterm=True)
    saved = usage_record(_attempt("j3", 8, start, start + ran), "t1", sigterm, now=APR_2026)
    assert saved.lost_s == 0.0
    # Not preempted (completed, cancelled, failed, lost): nothing lost to preemption.
    done = _attempt("j4", 8, start, start + ran, preempted=False)
    assert usage_record(done, "t1", _spec("t1"), now=APR_2026).lost_s == 0.0


def test_what_it_ran_is_the_span_the_cluster_manager_ran_it_when_known() -> None:
    # Handed out at 0, run by Slurm from 0.25 h to 1.75 h: it ran 1.5 h, keeps 1 h of it.
    start = MAR_2026
    attempt = _attempt("j1", 4, start, start + 2 * H, ran=(start + 0.25 * H, start + 1.75 * H))
    record = usage_record(attempt, "t1", _spec("t1", checkpoint_interval_s=H), now=APR_2026)
    assert (record.started_at, record.finished_at) == (start + 0.25 * H, start + 1.75 * H)
    assert record.lost_s == 0.5 * H


def test_the_report_sums_lost_gpu_hours_per_team_site_and_total() -> None:
    start = MAR_2026 + 24 * H
    records = [
        # t1: 8 GPUs x 2.5 h, no checkpoint = 20 GPU-h lost
        usage_record(_attempt("j1", 8, start, start + 2.5 * H), "t1", _spec("t1"), now=APR_2026),
        # t1: 16 GPUs x 0.5 h lost past its hourly checkpoints = 8 GPU-h
        usage_record(
            _attempt("j2", 16, start, start + 2.5 * H),
            "t1",
            _spec("t1", checkpoint_interval_s=H),
            now=APR_2026,
        ),
        # t2: 32 GPUs, saves on SIGTERM = 0
        usage_record(
            _attempt("j3", 32, start, start + 2.5 * H),
            "t2",
            _spec("t2", checkpoint_on_sigterm=True),
            now=APR_2026,
        ),
        # t2: still running, not preempted = 0
        usage_record(
            _attempt("j4", 8, start, None, preempted=False), "t2", _spec("t2"), now=start + H
        ),
    ]
    report = gpu_report(records, _fabric(), "2026-03")
    t1, t2 = report.rows_by_team
    assert (t1.name, t1.lost_gpu_hours, t2.name, t2.lost_gpu_hours) == ("t1", 28.0, "t2", 0.0)
    assert t1.gpu_hours == 8 * 2.5 + 16 * 2.5  # lost hours are still used hours
    [a] = report.rows_by_site
    assert a.lost_gpu_hours == report.total.lost_gpu_hours == 28.0
    assert report.to_json()["teams"][0]["lost_gpu_hours"] == 28.0
    csv_header, csv_t1 = report.to_csv().splitlines()[:2]
    assert csv_header.endswith(",lost_gpu_hours") and csv_t1.endswith(",28.0")
    assert GpuReport.from_json(report.to_json()).to_json() == report.to_json()


def test_a_loss_counts_in_the_month_its_attempt_ended_in() -> None:
    # Ran 3 h across midnight into April, no checkpoint: 3 h x 2 GPUs, all in April's report.
    attempt = _attempt("j1", 2, APR_2026 - 2 * H, APR_2026 + H)
    record = usage_record(attempt, "t1", _spec("t1"), now=APR_2026 + 10 * H)
    march = gpu_report([record], _fabric(), "2026-03")
    april = gpu_report([record], _fabric(), "2026-04")
    assert (march.total.gpu_hours, march.total.lost_gpu_hours) == (4.0, 0.0)
    assert (april.total.gpu_hours, april.total.lost_gpu_hours) == (2.0, 6.0)


def test_a_report_from_a_server_before_checkpoints_reads_as_no_loss() -> None:
    body = gpu_report([], _fabric(), "2026-03").to_json()
    for row in (*body["teams"], *body["sites"], body["total"]):
        del row["lost_gpu_hours"]
    assert GpuReport.from_json(body).total.lost_gpu_hours == 0.0


@pytest.mark.parametrize("interval", [1.0, 7.0, 0.1 * H, H])
def test_the_loss_is_never_negative_nor_more_than_it_ran(interval: float) -> None:
    spec = _spec("t1", checkpoint_interval_s=interval)
    for ran in (0.0, 0.3, 1.0, 6.9999999, 7.0, 1234.5, 3 * H):
        record = usage_record(_attempt("j", 1, MAR_2026, MAR_2026 + ran), "t1", spec, now=APR_2026)
        ran_s = record.finished_at - record.started_at  # as epoch seconds hold it
        assert 0.0 <= record.lost_s <= ran_s
        assert record.lost_s < interval
