"""Each team's decayed usage for fair share, read from the attempts on record."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from onecluster.schema import AttemptReport, JobSubmit
from onecluster.server._usage import REFRESH_S, TeamUsage

if TYPE_CHECKING:
    from conftest import RunningServer

DAY = 86400.0


def start(server: RunningServer, site: str, team: str, gpus: int, gpu_type: str) -> AttemptReport:
    server.sync(site)
    server.admin().submit(
        JobSubmit(team=team, gpus=gpus, duration_s=600.0, gpu_types=[gpu_type], command=["true"])
    )
    server.step()
    [run] = server.sync(site).attempts
    report = AttemptReport(attempt_id=run.attempt_id, job_id=run.job_id, state="running")
    server.sync(site, report)
    return report


def test_a_later_reading_adds_what_ended_since_and_ages_the_rest(server: RunningServer) -> None:
    store = server.control.store
    clock = server.clock
    vision = start(server, "singapore", "vision", 64, "H100")
    clock.advance(3600)
    server.sync(
        "singapore",
        AttemptReport(
            attempt_id=vision.attempt_id, job_id=vision.job_id, state="exited", exit_code=0
        ),
    )
    server.step()
    kept = TeamUsage(store, half_life_s=DAY)
    first = kept.at(clock.now())
    assert first["vision"] == pytest.approx(64 * 3600, rel=0.05)
    speech = start(server, "tokyo", "speech", 8, "L40S")
    clock.advance(2 * REFRESH_S)
    running = kept.at(clock.now())
    clock.advance(600)
    server.sync(
        "tokyo",
        AttemptReport(
            attempt_id=speech.attempt_id, job_id=speech.job_id, state="exited", exit_code=0
        ),
    )
    server.step()
    clock.advance(DAY)
    later = kept.at(clock.now())
    fresh = TeamUsage(store, half_life_s=DAY).at(clock.now())
    assert later == pytest.approx(fresh), "reading only what changed gives the full sum"
    assert later["vision"] == pytest.approx(first["vision"] / 2, rel=0.01), "a day: half"
    assert running["speech"] > 0 and later["speech"] > 0
    assert kept.at(clock.now() + 1) == later, "within a minute the reading is reused"
