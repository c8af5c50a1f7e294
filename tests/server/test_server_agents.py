"""Agent sync flows end to end: run → exit, preemption → requeue, a silent site, a restart."""

from __future__ import annotations

from typing import TYPE_CHECKING

from onecluster.model import gang_port
from onecluster.schema import AttemptReport, DataReport, DesiredAttempt, JobSubmit

if TYPE_CHECKING:
    from conftest import RunningServer


def h800(team: str, gpus: int, **kw: object) -> JobSubmit:
    return JobSubmit(
        team=team, gpus=gpus, duration_s=3600.0, gpu_types=["H800"], command=["train"], **kw
    )  # type: ignore[arg-type]


def report(run: DesiredAttempt, state: str = "running", code: int | None = None) -> AttemptReport:
    return AttemptReport(attempt_id=run.attempt_id, job_id=run.job_id, state=state, exit_code=code)  # type: ignore[arg-type]


def test_nothing_is_placed_on_a_site_whose_agent_never_synced(server: RunningServer) -> None:
    submitted = server.admin().submit(h800("llm", 8))
    server.step()
    assert server.admin().job(submitted.id).state == "pending"
    sites = {s.name: s.status for s in server.admin().sites()}
    assert sites == {"shanghai": "unknown", "singapore": "unknown", "tokyo": "unknown"}


def test_run_then_exit_zero_completes_the_job(server: RunningServer) -> None:
    admin = server.admin()
    server.sync("shanghai", capacity={"H800": 384})
    submitted = admin.submit(h800("llm", 16))
    assert server.step().started == 1
    [run] = server.sync("shanghai").attempts
    assert (run.job_id, run.action, run.gpu_type, run.gpus, run.command) == (
        submitted.id,
        "run",
        "H800",
        16,
        ["train"],
    )
    assert run.env["ONECLUSTER_JOB_ID"] == submitted.id
    assert run.grace_s == 5.0
    placed = admin.job(submitted.id)
    assert placed.state == "running"
    assert [(p.site, p.gpus) for p in placed.parts] == [("shanghai", 16)]
    # Running: still wanted; the same report twice changes nothing.
    assert server.sync("shanghai", report(run)).attempts == [run]
    assert server.sync("shanghai", report(run)).attempts == [run]
    server.clock.advance(60)
    assert server.sync("shanghai", report(run, "exited", 0)).attempts == []
    done = admin.job(submitted.id)
    assert (done.state, done.exit_code, done.attempts) == ("completed", 0, 1)
    assert done.finished_at == server.clock.now()
    stats = admin.stats()
    assert (stats.completed, stats.running, stats.gpus_busy) == (1, 0, 0)


def test_the_attempts_of_a_two_site_gang_find_each_other_through_their_env(
    server: RunningServer,
) -> None:
    admin = server.admin()
    # The agents' capacity leaves no single site room for 16 H100s: the gang spans two, the
    # freer site (Tokyo) first, so the ranks do not follow the sites' names.
    server.sync("tokyo", capacity={"H100": 12}, data=DataReport(port=7400, address="10.0.0.3"))
    server.sync("singapore", capacity={"H100": 8})  # no data plane: no address to announce
    submitted = admin.submit(
        JobSubmit(
            team="vision",
            gpus=16,
            duration_s=3600.0,
            gpu_types=["H100"],
            command=["train"],
            max_sites=2,
        )
    )
    assert server.step().started == 1
    assert [(p.site, p.gpus) for p in admin.job(submitted.id).parts] == [
        ("tokyo", 12),
        ("singapore", 4),
    ]
    [at_tokyo] = server.sync("tokyo").attempts
    [at_singapore] = server.sync("singapore").attempts
    same = {
        "ONECLUSTER_GANG_SITES": "tokyo,singapore",
        "ONECLUSTER_GANG_ADDRESSES": "tokyo=10.0.0.3",
        "ONECLUSTER_GANG_GPUS": "tokyo=12,singapore=4",
        "ONECLUSTER_GANG_PORT": str(gang_port(submitted.id)),
    }
    for run, rank, site, gpus in ((at_tokyo, 0, "tokyo", 12), (at_singapore, 1, "singapore", 4)):
        gang = {k: v for k, v in run.env.items() if k.startswith("ONECLUSTER_GANG_")}
        assert gang == {**same, "ONECLUSTER_GANG_RANK": str(rank)}
        assert (run.env["ONECLUSTER_SITE"], run.env["ONECLUSTER_GPUS"]) == (site, str(gpus))
        assert run.env["ONECLUSTER_JOB_ID"] == submitted.id
    # The env is read at every sync (an agent takes it when it starts the attempt): once
    # Singapore announces its data plane, the orders name its address too.
    server.sync("singapore", report(at_singapore), data=DataReport(port=7400, address="10.0.0.2"))
    [again] = server.sync("tokyo", report(at_tokyo)).attempts
    assert again.env["ONECLUSTER_GANG_ADDRESSES"] == "tokyo=10.0.0.3,singapore=10.0.0.2"


def test_a_one_site_job_is_a_gang_of_one(server: RunningServer) -> None:
    server.sync("shanghai")
    submitted = server.admin().submit(h800("llm", 8))
    server.step()
    [run] = server.sync("shanghai").attempts
    gang = {k: v for k, v in run.env.items() if k.startswith("ONECLUSTER_GANG_")}
    assert gang == {
        "ONECLUSTER_GANG_SITES": "shanghai",
        "ONECLUSTER_GANG_RANK": "0",
        "ONECLUSTER_GANG_ADDRESSES": "",
        "ONECLUSTER_GANG_GPUS": "shanghai=8",
        "ONECLUSTER_GANG_PORT": str(gang_port(submitted.id)),
    }


def test_a_non_zero_exit_fails_the_job(server: RunningServer) -> None:
    server.sync("shanghai")
    submitted = server.admin().submit(h800("llm", 8))
    server.step()
    [run] = server.sync("shanghai").attempts
    server.sync("shanghai", report(run, "exited", 3))
    failed = server.admin().job(submitted.id)
    assert (failed.state, failed.exit_code) == ("failed", 3)


def test_borrowed_work_is_preempted_for_in_quota_work_and_requeued(server: RunningServer) -> None:
    admin = server.admin()
    server.sync("shanghai")
    # vision has no H800 quota: its job borrows idle H800s and may be preempted.
    borrower = admin.submit(h800("vision", 384))
    server.step()
    [run] = server.sync("shanghai").attempts
    assert admin.job(borrower.id).borrowed
    assert admin.stats().borrowed == 1
    server.sync("shanghai", report(run))
    server.clock.advance(5)
    owner = admin.submit(h800("llm", 256))
    stats = server.step()
    assert stats.preempted == 1
    assert admin.job(borrower.id).state == "preempting"
    [stop] = server.sync("shanghai", report(run)).attempts
    assert stop.action == "stop"
    assert stop.reason
    server.sync("shanghai", report(run, "exited", 143))
    back = admin.job(borrower.id)
    assert (back.state, back.preemptions, back.submitted_at) == (
        "pending",
        1,
        borrower.submitted_at,
    )
    assert server.step().started >= 1
    assert admin.job(owner.id).state == "running"
    assert admin.stats().preemptions == 1


def test_a_silent_site_is_marked_down_and_its_jobs_requeued(server: RunningServer) -> None:
    admin = server.admin()
    server.sync("shanghai")
    submitted = admin.submit(h800("llm", 8))
    server.step()
    [run] = server.sync("shanghai").attempts
    server.sync("shanghai", report(run))
    server.clock.advance(11)
    assert server.step().sites_down == 1
    assert {s.name: s.status for s in admin.sites()}["shanghai"] == "down"
    requeued = admin.job(submitted.id)
    assert (requeued.state, requeued.preemptions) == ("pending", 0)
    # The agent returns still running the lost attempt: it is no longer wanted.
    assert server.sync("shanghai", report(run)).attempts == []
    assert {s.name: s.status for s in admin.sites()}["shanghai"] == "up"
    server.step()
    [again] = server.sync("shanghai", report(run)).attempts
    assert again.job_id == submitted.id
    assert again.attempt_id != run.attempt_id


def test_restart_with_the_same_database_loses_and_duplicates_nothing(
    server: RunningServer,
) -> None:
    admin = server.admin()
    server.sync("shanghai")
    running = admin.submit(h800("llm", 8))
    waiting = admin.submit(
        JobSubmit(team="speech", gpus=8, duration_s=60.0, gpu_types=["L40S"], command=["true"])
    )
    server.step()
    [run] = server.sync("shanghai").attempts
    server.sync("shanghai", report(run))
    before = {j.id: j for j in admin.jobs()}

    server.restart()
    admin = server.admin()  # the bootstrap token still works: no new one was minted
    assert {j.id: j for j in admin.jobs()} == before
    server.step()
    # The agent reports the attempt the server still wants: it keeps running, same id.
    assert server.sync("shanghai", report(run)).attempts == [run]
    assert admin.job(running.id).attempts == 1
    assert admin.job(waiting.id).state == "pending"
    server.sync("shanghai", report(run, "exited", 0))
    assert admin.job(running.id).state == "completed"


def test_a_jobs_workdir_reaches_its_agent(server: RunningServer) -> None:
    admin = server.admin()
    server.sync("shanghai", capacity={"H800": 384})
    job = admin.submit(h800("llm", 8, workdir="/srv/code/llm"))
    assert job.workdir == "/srv/code/llm"
    server.step()
    [run] = server.sync("shanghai").attempts
    assert run.workdir == "/srv/code/llm"


def test_a_relative_workdir_is_refused_at_the_door(server: RunningServer) -> None:
    import httpx

    answer = httpx.post(
        f"{server.url}/api/v1/jobs",
        headers={"Authorization": f"Bearer {server.admin_token}"},
        json={"team": "llm", "gpus": 8, "duration_s": 60, "command": ["x"], "workdir": "code"},
    )
    assert answer.status_code in (400, 422), answer.text
    assert "absolute path" in answer.json()["error"]["message"]
    assert server.admin().jobs() == []
