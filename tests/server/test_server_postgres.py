"""The same server on PostgreSQL: a job runs to completion across a server restart."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from onecluster.schema import AttemptReport, JobSubmit

if TYPE_CHECKING:
    from conftest import RunningServer

pytestmark = pytest.mark.postgres


def test_a_job_survives_a_restart_on_postgres(pg_server: RunningServer) -> None:
    server = pg_server
    admin = server.admin()
    server.sync("tokyo")
    job = admin.submit(
        JobSubmit(team="speech", gpus=16, duration_s=60.0, gpu_types=["L40S"], command=["true"])
    )
    assert server.step().started == 1
    [run] = server.sync("tokyo").attempts
    running = AttemptReport(attempt_id=run.attempt_id, job_id=run.job_id, state="running")
    server.sync("tokyo", running)
    server.restart()
    admin = server.admin()
    assert server.step().started == 0
    assert server.sync("tokyo", running).attempts == [run]
    done = AttemptReport(attempt_id=run.attempt_id, job_id=run.job_id, state="exited", exit_code=0)
    server.sync("tokyo", done)
    finished = admin.job(job.id)
    assert (finished.state, finished.attempts) == ("completed", 1)
