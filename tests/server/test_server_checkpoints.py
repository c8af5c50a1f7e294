"""A job's checkpoints through the REST door: taken and shown, refused when malformed
(nothing stored), told to every attempt, and counted by the GPU report when a preemption
throws work away."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx
import pytest

from onecluster.schema import AttemptReport, DesiredAttempt, JobSubmit

if TYPE_CHECKING:
    from conftest import RunningServer

JOB: dict[str, Any] = {"team": "llm", "gpus": 8, "duration_s": 3600, "command": ["train"]}
MONTH = "2026-05"  # the test clock starts in May 2026 (UTC)


def h800(team: str, gpus: int, **kw: Any) -> JobSubmit:
    return JobSubmit(
        team=team, gpus=gpus, duration_s=7200.0, gpu_types=["H800"], command=["train"], **kw
    )


def running(run: DesiredAttempt, state: str = "running", code: int | None = None) -> AttemptReport:
    return AttemptReport(attempt_id=run.attempt_id, job_id=run.job_id, state=state, exit_code=code)  # type: ignore[arg-type]


def _post_job(server: RunningServer, **kw: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {server.admin_token}", **kw.pop("headers", {})}
    return httpx.post(f"{server.url}/api/v1/jobs", headers=headers, timeout=30, **kw)


def test_a_jobs_checkpoints_are_shown_and_told_to_each_of_its_attempts(
    server: RunningServer,
) -> None:
    admin = server.admin()
    server.sync("shanghai", capacity={"H800": 384})
    saving = admin.submit(h800("llm", 8, checkpoint_interval_s=1800.0, checkpoint_on_sigterm=True))
    halves = admin.submit(h800("llm", 8, checkpoint_interval_s=90.5))
    plain = admin.submit(h800("llm", 8))
    assert (saving.checkpoint_interval_s, saving.checkpoint_on_sigterm) == (1800.0, True)
    assert (plain.checkpoint_interval_s, plain.checkpoint_on_sigterm) == (None, False)
    assert admin.job(saving.id) == saving
    listed = {j.id: (j.checkpoint_interval_s, j.checkpoint_on_sigterm) for j in admin.jobs()}
    assert listed == {saving.id: (1800.0, True), halves.id: (90.5, False), plain.id: (None, False)}
    assert server.step().started == 3
    env = {run.job_id: run.env for run in server.sync("shanghai").attempts}
    assert env[saving.id]["ONECLUSTER_CHECKPOINT_INTERVAL_S"] == "1800"
    assert env[halves.id]["ONECLUSTER_CHECKPOINT_INTERVAL_S"] == "90.5"
    assert "ONECLUSTER_CHECKPOINT_INTERVAL_S" not in env[plain.id]
    # Every attempt knows its job, so that it finds its checkpoint (the job's business).
    assert {job_id: e["ONECLUSTER_JOB_ID"] for job_id, e in env.items()} == {
        j: j for j in (saving.id, halves.id, plain.id)
    }


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"checkpoint_interval_s": 0}, "checkpoint_interval_s: Input should be greater than or"),
        ({"checkpoint_interval_s": -60}, "checkpoint_interval_s: Input should be greater than or"),
        ({"checkpoint_interval_s": 1e308}, "checkpoint_interval_s: Input should be less than or"),
        ({"checkpoint_interval_s": "600"}, "checkpoint_interval_s: Input should be a valid number"),
        ({"checkpoint_interval_s": [600]}, "checkpoint_interval_s: Input should be a valid number"),
        ({"checkpoint_on_sigterm": "true"}, "checkpoint_on_sigterm: Input should be a valid bool"),
        ({"checkpoint_on_sigterm": 1}, "checkpoint_on_sigterm: Input should be a valid boolean"),
        ({"checkpoint_on_sigterm": None}, "checkpoint_on_sigterm: Input should be a valid bool"),
    ],
)
def test_malformed_checkpoints_are_refused_and_store_nothing(
    module_server: RunningServer, change: dict[str, Any], needle: str
) -> None:
    answer = _post_job(module_server, json=JOB | change)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "invalid"
    assert error["message"].startswith(f"the request is not valid: {needle}"), error
    assert module_server.admin().jobs() == []


@pytest.mark.parametrize("number", [b"NaN", b"Infinity", b"-Infinity"])
def test_a_checkpoint_interval_that_is_not_a_finite_number_is_refused(
    module_server: RunningServer, number: bytes
) -> None:
    body = b'{"team": "llm", "gpus": 8, "duration_s": 60, "command": ["x"], '
    body += b'"checkpoint_interval_s": ' + number + b"}"
    answer = _post_job(module_server, content=body, headers={"Content-Type": "application/json"})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == "invalid"
    assert "checkpoint_interval_s" in answer.json()["error"]["message"]
    assert module_server.admin().jobs() == []


def test_the_gpu_report_counts_the_gpu_hours_preemption_lost_per_team(
    server: RunningServer,
) -> None:
    admin = server.admin()
    server.sync("shanghai")
    # vision has no H800 quota: its three jobs borrow all 384 idle H800s of shanghai.
    hourly = admin.submit(h800("vision", 128, checkpoint_interval_s=3600.0))
    on_sigterm = admin.submit(h800("vision", 128, checkpoint_on_sigterm=True))
    plain = admin.submit(h800("vision", 128))
    assert server.step().started == 3
    runs = server.sync("shanghai").attempts
    server.sync("shanghai", *(running(r) for r in runs))
    server.clock.advance(4500)  # 1 h 15 min
    server.sync("shanghai", *(running(r) for r in runs))  # still there: the lease holds
    # llm's 320 H800s of quota take the GPUs back: every borrower is preempted.
    owner = admin.submit(h800("llm", 320))
    assert server.step().preempted == 3
    stops = server.sync("shanghai", *(running(r) for r in runs)).attempts
    assert {s.action for s in stops} == {"stop"}
    server.sync("shanghai", *(running(r, "exited", 143) for r in runs))
    assert {admin.job(j.id).preemptions for j in (hourly, on_sigterm, plain)} == {1}

    report = admin.gpu_report(MONTH)
    teams = {row["name"]: row for row in report["teams"]}
    # hourly: 128 GPUs x the 15 min past its checkpoint = 32; on SIGTERM: 0;
    # plain: 128 GPUs x 1.25 h = 160.
    assert teams["vision"]["lost_gpu_hours"] == pytest.approx(32.0 + 160.0)
    assert teams["vision"]["gpu_hours"] == pytest.approx(3 * 128 * 1.25)
    assert teams["llm"]["lost_gpu_hours"] == 0.0
    assert report["total"]["lost_gpu_hours"] == pytest.approx(192.0)
    assert server.step().started >= 1
    assert admin.job(owner.id).state == "running"
