"""Job routes over a real socket: submit, list, show, cancel, logs, and refused bodies."""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx
import pytest

from onecluster.errors import ConflictError, ImpossibleJobError, NotFoundError, ValidationError
from onecluster.schema import AttemptReport, JobSubmit, LogChunkIn

if TYPE_CHECKING:
    from conftest import RunningServer


def job(team: str = "llm", gpus: int = 8, **kw: object) -> JobSubmit:
    return JobSubmit(team=team, gpus=gpus, duration_s=600.0, command=["echo", "hi"], **kw)  # type: ignore[arg-type]


def test_submit_show_and_list(server: RunningServer) -> None:
    admin = server.admin()
    submitted = admin.submit(job(name="train", gpu_types=["H800"], priority="high"))
    assert submitted.state == "pending"
    assert submitted.submitted_at == server.clock.now()
    assert submitted.priority == "high"
    assert submitted.attempts == 0
    assert admin.job(submitted.id) == submitted
    other = admin.submit(job(team="vision"))
    assert [j.id for j in admin.jobs()] == [other.id, submitted.id]
    assert [j.id for j in admin.jobs(team="llm")] == [submitted.id]
    assert [j.id for j in admin.jobs(state="pending", limit=1)] == [other.id]
    assert admin.jobs(state="running") == []


def test_dataset_size_defaults_to_the_fabric_declaration(server: RunningServer) -> None:
    out = server.admin().submit(job(dataset="cc-zh-2026"))
    assert out.dataset_bytes == 1800 * 10**9
    explicit = server.admin().submit(job(dataset="cc-zh-2026", dataset_gb=2.5))
    assert explicit.dataset_bytes == 2_500_000_000


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (job(gpus=10_000), "GPU"),
        (job(gpu_types=["TPUv9"]), "TPUv9"),
        (job(team="nobody"), "nobody"),
        (job(gpus=0), "at least 1 GPU"),
    ],
)
def test_impossible_jobs_are_refused_with_422(
    server: RunningServer, body: JobSubmit, needle: str
) -> None:
    with pytest.raises(ImpossibleJobError, match=needle):
        server.admin().submit(body)
    assert server.admin().jobs() == []


def test_malformed_bodies_are_refused_with_400_naming_the_field(server: RunningServer) -> None:
    headers = {"Authorization": f"Bearer {server.admin_token}"}
    bad = [
        {"team": "llm", "duration_s": 60},  # gpus missing
        {"team": "llm", "gpus": "many", "duration_s": 60},
        {"team": "llm", "gpus": 1, "duration_s": 60, "priority": "urgent"},
        {"team": "llm", "gpus": 1, "duration_s": 60, "colour": "blue"},
    ]
    for body in bad:
        r = httpx.post(f"{server.url}/api/v1/jobs", json=body, headers=headers)
        assert r.status_code == 400, body
        error = r.json()["error"]
        assert error["code"] == "invalid"
        assert error["message"].startswith("the request is not valid")
    r = httpx.post(f"{server.url}/api/v1/jobs", content=b"{not json", headers=headers)
    assert r.status_code == 400


def test_unknown_job_is_404_and_cancel_twice_is_409(server: RunningServer) -> None:
    admin = server.admin()
    with pytest.raises(NotFoundError):
        admin.job("j-missing")
    submitted = admin.submit(job())
    assert admin.cancel(submitted.id).state == "cancelled"
    with pytest.raises(ConflictError, match="already ended"):
        admin.cancel(submitted.id)


def test_cancel_of_a_running_job_ends_when_the_agent_reports_the_exit(
    server: RunningServer,
) -> None:
    admin = server.admin()
    server.sync("shanghai")
    submitted = admin.submit(job(gpu_types=["H800"]))
    server.step()
    [run] = server.sync("shanghai").attempts
    server.sync(
        "shanghai", AttemptReport(attempt_id=run.attempt_id, job_id=run.job_id, state="running")
    )
    assert admin.cancel(submitted.id).state == "cancelling"
    [stop] = server.sync(
        "shanghai", AttemptReport(attempt_id=run.attempt_id, job_id=run.job_id, state="running")
    ).attempts
    assert (stop.action, stop.reason) == ("stop", "cancelled")
    exited = AttemptReport(
        attempt_id=run.attempt_id, job_id=run.job_id, state="exited", exit_code=143
    )
    assert server.sync("shanghai", exited).attempts == []
    assert admin.job(submitted.id).state == "cancelled"


def test_logs_sent_by_the_agent_are_read_from_an_offset(server: RunningServer) -> None:
    admin = server.admin()
    server.sync("shanghai")
    submitted = admin.submit(job(gpu_types=["H800"]))
    server.step()
    [run] = server.sync("shanghai").attempts
    running = AttemptReport(attempt_id=run.attempt_id, job_id=run.job_id, state="running")
    chunk = LogChunkIn(attempt_id=run.attempt_id, offset=0, data="epoch 1\n")
    server.sync("shanghai", running, logs=[chunk])
    server.sync("shanghai", running, logs=[chunk])  # resent: stored once
    first = admin.logs(submitted.id)
    assert (first.offset, first.data) == (8, "epoch 1\n")
    server.sync(
        "shanghai",
        running,
        logs=[LogChunkIn(attempt_id=run.attempt_id, offset=8, data="epoch 2\n")],
    )
    nxt = admin.logs(submitted.id, offset=first.offset)
    assert (nxt.offset, nxt.data) == (16, "epoch 2\n")


def test_bad_query_parameters_are_400(server: RunningServer) -> None:
    with pytest.raises(ValidationError, match="limit"):
        server.admin().jobs(limit=0)
    with pytest.raises(ValidationError, match="state"):
        server.admin().jobs(state="sleeping")
