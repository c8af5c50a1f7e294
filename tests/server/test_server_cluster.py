"""Cluster routes (sites, teams, stats, GPU report) and the server's resilience to faults."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import httpx
import pytest

from onecluster.errors import ValidationError
from onecluster.schema import AttemptReport, JobSubmit

if TYPE_CHECKING:
    from conftest import RunningServer


def start_one(server: RunningServer, team: str = "vision", gpus: int = 64) -> str:
    server.sync("singapore")
    job = server.admin().submit(
        JobSubmit(team=team, gpus=gpus, duration_s=7200.0, gpu_types=["H100"], command=["true"])
    )
    server.step()
    [run] = server.sync("singapore").attempts
    server.sync(
        "singapore", AttemptReport(attempt_id=run.attempt_id, job_id=run.job_id, state="running")
    )
    return job.id


def test_sites_teams_and_stats_show_what_runs(server: RunningServer) -> None:
    start_one(server)
    server.admin().submit(
        JobSubmit(team="llm", gpus=8, duration_s=60.0, gpu_types=["H800"], command=["true"])
    )
    admin = server.admin()
    sites = {s.name: s for s in admin.sites()}
    assert sites["singapore"].status == "up"
    assert sites["singapore"].last_heartbeat == server.clock.now()
    assert [(p.gpu_type, p.count, p.used) for p in sites["singapore"].pools] == [("H100", 384, 64)]
    teams = {t.name: t for t in admin.teams()}
    assert teams["vision"].usage == {"H100": 64}
    assert teams["vision"].borrowed == {}
    assert teams["llm"].quota == {"H800": 320, "A100": 64, "H100": 64}
    stats = admin.stats()
    assert (stats.gpus_total, stats.gpus_busy, stats.running, stats.pending) == (1200, 64, 1, 1)
    assert (stats.borrowed, stats.waiting_for_data) == (0, 0)
    assert stats.utilization == pytest.approx(64 / 1200)
    assert stats.sites["singapore"].busy == 64
    assert stats.sites["shanghai"].pending == 1
    assert stats.mean_wait_s == 0.0


def test_gpu_report_counts_the_attempts_of_the_month(server: RunningServer) -> None:
    start_one(server)
    server.clock.advance(3600)
    server.sync("singapore")  # the attempt is lost with its agent: it ran one hour
    month = "2026-05"  # the test clock starts in May 2026 (UTC)
    report = server.admin().gpu_report(month)
    assert report["month"] == month
    by_team = {row["name"]: row for row in report["teams"]}
    assert by_team["vision"]["gpu_hours"] == pytest.approx(64.0)
    assert by_team["vision"]["cost"] == pytest.approx(64 * 1.60)
    with pytest.raises(ValidationError, match="YYYY-MM"):
        server.admin().gpu_report("May")


def test_an_unexpected_error_is_a_logged_500_and_the_server_carries_on(
    server: RunningServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*_a: object, **_k: object) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(server.control.store, "job", broken)
    headers = {"Authorization": f"Bearer {server.admin_token}"}
    r = httpx.get(f"{server.url}/api/v1/jobs/j-1", headers=headers)
    assert r.status_code == 500
    assert r.json()["error"]["code"] == "error"
    assert "RuntimeError" in r.json()["error"]["message"]
    assert any("unexpected error" in m for m in caplog.messages)
    assert server.admin().health() == {
        "status": "ok",
        "role": "leader",
        "leader": server.url,
        "term": 1,
    }
    assert server.admin().jobs() == []


def test_a_failing_reconcile_phase_is_counted_and_the_next_pass_recovers(
    server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.sync("tokyo")
    job = server.admin().submit(
        JobSubmit(team="speech", gpus=8, duration_s=60.0, gpu_types=["L40S"], command=["true"])
    )
    store = server.control.store
    real = store.running_jobs

    def broken() -> list[object]:
        raise RuntimeError("database hiccup")

    monkeypatch.setattr(store, "running_jobs", broken)
    failed = server.step()
    assert failed.errors == 1
    assert set(failed.phase_s) == {"expire", "links", "plan", "stage", "export"}
    monkeypatch.setattr(store, "running_jobs", real)
    recovered = server.step()
    assert recovered.errors == 1
    assert recovered.started == 1
    assert server.admin().job(job.id).state == "running"


def test_openapi_lists_every_route_of_the_contract(server: RunningServer) -> None:
    paths = set(httpx.get(f"{server.url}/openapi.json").json()["paths"])
    assert paths == {
        "/healthz",
        "/api/v1/cluster/leader",
        "/api/v1/fabric",
        "/api/v1/sites/{site}/drain",
        "/api/v1/sites/{site}/undrain",
        "/api/v1/sites",
        "/api/v1/teams",
        "/api/v1/tokens",
        "/api/v1/jobs",
        "/api/v1/jobs/{job_id}",
        "/api/v1/jobs/{job_id}/cancel",
        "/api/v1/jobs/{job_id}/logs",
        "/api/v1/jobs/{job_id}/why",
        "/api/v1/stats",
        "/api/v1/whoami",
        "/api/v1/reports/gpu",
        "/api/v1/reports/gpu/compare",
        "/api/v1/agents/{site}/sync",
        "/api/v1/links",
        "/api/v1/links/check",
        "/api/v1/routes",
        "/api/v1/events",
        "/api/v1/datasets",
        "/api/v1/datasets/{name}",
        "/api/v1/scans/{scan_id}",
        "/api/v1/transfers",
        "/api/v1/transfers/{transfer_id}",
        "/api/v1/transfers/{transfer_id}/cancel",
        "/api/v1/exports",
        "/api/v1/exports/{export_id}",
        "/api/v1/exports/approvals",
        "/api/v1/exports/approvals/{approval_id}",
        "/api/v1/exports/approvals/{approval_id}/approve",
        "/api/v1/exports/approvals/{approval_id}/revoke",
        "/api/v1/register/head",
        "/api/v1/register/entries",
        "/api/v1/register/proof",
        "/api/v1/register/bundle",
    }


def test_a_degraded_site_is_shown_with_its_problem_and_gets_no_new_work(
    server: RunningServer,
) -> None:
    server.sync("singapore", problem="Slurm does not answer: squeue timed out after 3 s")
    server.sync("tokyo")
    site = {s.name: s for s in server.admin().sites()}["singapore"]
    assert (site.status, site.problem) == (
        "degraded",
        "Slurm does not answer: squeue timed out after 3 s",
    )
    job = server.admin().submit(
        JobSubmit(team="vision", gpus=8, duration_s=60.0, gpu_types=["H100"], command=["true"])
    )
    server.step()
    # singapore (vision's cheaper H100s) is passed over while degraded
    assert server.sync("singapore", problem="Slurm does not answer").attempts == []
    [run] = server.sync("tokyo").attempts
    assert run.job_id == job.id
    # it recovers: shown up again, and takes the next job
    server.sync("singapore")
    assert {s.name: s for s in server.admin().sites()}["singapore"].status == "up"
    server.admin().submit(
        JobSubmit(team="vision", gpus=8, duration_s=60.0, gpu_types=["H100"], command=["true"])
    )
    server.step()
    assert len(server.sync("singapore").attempts) == 1


def test_a_job_queued_by_the_sites_cluster_manager_shows_when_it_should_start(
    server: RunningServer,
) -> None:
    server.sync("singapore")
    job_id = (
        server.admin()
        .submit(JobSubmit(team="vision", gpus=8, duration_s=60.0, command=["true"]))
        .id
    )
    server.step()
    [run] = server.sync("singapore").attempts
    queued = AttemptReport(
        attempt_id=run.attempt_id,
        job_id=job_id,
        state="running",
        queued=True,
        expected_start_at=server.clock.now() + 600,
        waiting_reason="Priority",
    )
    server.sync("singapore", queued)
    job = server.admin().job(job_id)
    assert job.expected_start_at == server.clock.now() + 600
    assert job.reason == "queued by the cluster manager at singapore: Priority"
    assert job.state == "running"  # placed: onecluster's part is done, the site's is not


def test_a_site_whose_agent_is_silent_takes_no_new_work_but_keeps_what_runs(
    server: RunningServer,
) -> None:
    """Its running work keeps the site's lease (minutes: an outage of the control plane must
    not stop it), but new work does not wait there for an agent that may be gone."""
    server.config = replace(server.config, lease_s=300.0)  # these tests' 10 s ends first
    server.restart()
    running = start_one(server)  # at Singapore, the only H100 pool of vision's choice
    admin = server.admin()
    server.clock.advance(31.0)  # Singapore's agent says nothing for 31 s
    site = {s.name: s for s in admin.sites()}["singapore"]
    assert site.status == "degraded"
    assert site.problem is not None and "not synced for 31 s" in site.problem
    waiting = admin.submit(
        JobSubmit(team="vision", gpus=8, duration_s=60.0, gpu_types=["H100"], command=["true"])
    )
    server.step()
    assert admin.job(waiting.id).state == "pending"
    assert admin.job(running).state == "running"
    server.sync("singapore")  # it speaks again: up, and the job goes there
    assert {s.name: s.status for s in admin.sites()}["singapore"] == "up"
    server.step()
    assert admin.job(waiting.id).state == "running"
