"""``GET /api/v1/reports/gpu/compare``: a month of real jobs replayed under both worlds."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from onecluster.errors import AuthError, ValidationError
from onecluster.schema import AttemptReport, JobSubmit

if TYPE_CHECKING:
    from conftest import RunningServer

MONTH = "2026-05"  # the test clock starts in May 2026 (UTC)


def run_and_finish(server: RunningServer, site: str, team: str, gpus: int, gpu_type: str) -> None:
    server.sync(site)
    server.admin().submit(
        JobSubmit(team=team, gpus=gpus, duration_s=600.0, gpu_types=[gpu_type], command=["true"])
    )
    server.step()
    [run] = server.sync(site).attempts
    server.sync(site, AttemptReport(attempt_id=run.attempt_id, job_id=run.job_id, state="running"))
    server.clock.advance(300)
    server.sync(
        site,
        AttemptReport(attempt_id=run.attempt_id, job_id=run.job_id, state="exited", exit_code=0),
    )
    server.step()


def test_each_team_of_the_month_is_shown_under_both_worlds(server: RunningServer) -> None:
    run_and_finish(server, "singapore", "vision", 64, "H100")
    run_and_finish(server, "tokyo", "speech", 8, "L40S")
    body = server.admin().gpu_before_after(MONTH)
    assert (body["month"], body["after"], body["before"], body["jobs"]) == (
        MONTH,
        "unified",
        "separate",
        2,
    )
    teams = {row["team"]: row for row in body["teams"]}
    assert set(teams) == {"vision", "speech"}
    # A job replays for what it really ran: 300 s on 64 GPUs.
    assert teams["vision"]["gpu_h"] == pytest.approx(64 * 300 / 3600, abs=0.05)
    assert teams["vision"]["gpu_h_base"] == pytest.approx(64 * 300 / 3600, abs=0.05)
    assert body["losing_teams"] == []


def test_an_empty_month_compares_nothing(server: RunningServer) -> None:
    body = server.admin().gpu_before_after("2026-01")
    assert body["jobs"] == 0 and body["teams"] == []


def test_bad_input_is_refused(server: RunningServer) -> None:
    with pytest.raises(ValidationError, match="YYYY-MM"):
        server.admin().gpu_before_after("May")
    with pytest.raises(ValidationError, match="separate or fifo"):
        server.admin().gpu_before_after(MONTH, "unified")
    with pytest.raises(AuthError):
        server.client(server.token(role="member", team="vision")).gpu_before_after(MONTH)
