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


def test_a_dataset_is_scanned_and_pushed_on_postgres(pg_server: RunningServer) -> None:
    from onecluster.schema import (
        DataReport,
        DatasetAdd,
        PushIn,
        ReplicaReport,
        ScanReport,
        TransferReport,
    )

    server = pg_server
    admin = server.admin()
    root = "ef" * 32
    scan = admin.add_dataset(DatasetAdd(name="corpus", site="tokyo", path="/data/corpus"))
    done = ScanReport(id=scan.id, state="done", bytes_done=100, root=root, files=1, chunks=1)
    server.sync("tokyo", data=DataReport(port=7400, address="10.0.0.3", scans=[done]))
    transfer = admin.push(PushIn.model_validate({"dataset": "corpus", "to": "singapore"}))
    server.restart()
    admin = server.admin()
    [receive] = server.sync("singapore", data=DataReport(port=7400)).data.receive
    assert (receive.id, receive.src) == (transfer.id, "tokyo")
    held = ReplicaReport(
        dataset="corpus", root=root, state="complete", bytes_present=100, path="/srv/corpus"
    )
    report = TransferReport(id=transfer.id, state="done", bytes_done=100, bytes_sent=40)
    server.sync("singapore", data=DataReport(port=7400, transfers=[report], replicas=[held]))
    assert admin.transfer(transfer.id).state == "done"
    [version] = admin.dataset("corpus").versions
    assert {r.site for r in version.replicas} == {"singapore", "tokyo"}
