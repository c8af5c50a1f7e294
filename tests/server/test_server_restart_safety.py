"""No job runs twice: a server restart keeps running work, and a preempted attempt that its
agent may already have started holds its GPUs until the agent has had its say."""

from __future__ import annotations

from typing import Any

from onecluster.schema import AttemptReport, DesiredAttempt, JobSubmit


def report(run: DesiredAttempt, state: str = "running") -> AttemptReport:
    return AttemptReport(attempt_id=run.attempt_id, job_id=run.job_id, state=state)


def h800(team: str, gpus: int) -> JobSubmit:
    return JobSubmit(team=team, gpus=gpus, duration_s=3600.0, gpu_types=["H800"], command=["x"])


def test_a_server_restart_after_a_short_outage_keeps_running_work(server: Any) -> None:
    admin = server.admin()
    server.sync("shanghai")
    job = admin.submit(h800("llm", 8))
    server.step()
    [run] = server.sync("shanghai").attempts
    server.sync("shanghai", report(run))
    server.stop()
    server.clock.advance(11)  # longer than the agent timeout: every heartbeat is stale
    server.start()  # the first pass runs before any agent could sync again
    server.step()
    assert server.admin().job(job.id).state == "running"
    reply = server.sync("shanghai", report(run))
    assert [(a.attempt_id, a.action) for a in reply.attempts] == [(run.attempt_id, "run")]


def test_a_preempted_attempt_not_yet_reported_still_holds_its_place(server: Any) -> None:
    admin = server.admin()
    server.sync("shanghai")
    borrower = admin.submit(
        JobSubmit(
            team="vision", gpus=128, duration_s=3600.0, gpu_types=["H800", "H100"], command=["x"]
        )
    )
    server.step()
    [run] = server.sync("shanghai").attempts  # the agent got "run" and may have started it
    assert admin.job(borrower.id).borrowed
    server.sync("singapore")
    admin.submit(h800("llm", 320))  # the owner wants its H800s back
    server.step()
    server.step()
    assert admin.job(borrower.id).state == "preempting"
    assert not [a for a in server.sync("singapore").attempts if a.job_id == borrower.id]
    told = server.sync("shanghai", report(run)).attempts  # it was running after all
    assert [(a.attempt_id, a.action) for a in told] == [(run.attempt_id, "stop")]
    server.sync("shanghai", report(run, "exited"))
    assert admin.job(borrower.id).state == "pending"
