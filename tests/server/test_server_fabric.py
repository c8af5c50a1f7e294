"""Changing the fabric while it runs, through the real API: a site and a pool added while a
job runs (the new site's agent syncs, a job lands there, the running one finishes once), a
change that would strand work refused with nothing changed, drains, and the fabric kept in
the database across a restart with another --fabric file."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from fabric_changes import THREE, onboarded, with_fabric_routes, without_l40s

from onecluster.clock import ManualClock
from onecluster.errors import ConflictError, FabricError, ForbiddenError, NotFoundError
from onecluster.fabric import dump_fabric
from onecluster.schema import (
    AttemptReport,
    DrainIn,
    FabricApply,
    JobSubmit,
    TokenCreate,
    UndrainIn,
)

if TYPE_CHECKING:
    from conftest import RunningServer


@pytest.fixture
def served(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> Iterator[RunningServer]:
    from conftest import RunningServer

    monkeypatch.setattr(sys.modules[RunningServer.__module__], "create_app", with_fabric_routes)
    s = RunningServer(tmp_path / "state", clock)
    s.start()
    yield s
    s.stop()


def _run_l40s_job(server: RunningServer, gpus: int = 16) -> AttemptReport:
    """A speech job on Tokyo's L40S pool, started and reported running by Tokyo's agent."""
    server.sync("tokyo")
    server.admin().submit(
        JobSubmit(team="speech", gpus=gpus, duration_s=600.0, gpu_types=["L40S"], command=["true"])
    )
    assert _started(server) == 1
    [run] = server.sync("tokyo").attempts
    running = AttemptReport(attempt_id=run.attempt_id, job_id=run.job_id, state="running")
    server.sync("tokyo", running)
    return running


def _started(server: RunningServer) -> int:
    """One reconcile pass now; how many jobs it started."""
    before = server.reconciler.statistics().started
    return server.step().started - before


def _kinds(server: RunningServer) -> list[str]:
    return [e.kind for e in server.admin().events(kind="fabric", limit=1000)]


def test_a_site_and_a_pool_added_while_a_job_runs_take_work_and_the_job_finishes_once(
    served: RunningServer,
) -> None:
    server = served
    admin = server.admin()
    running = _run_l40s_job(server)
    assert admin.fabric().version == 1
    text = dump_fabric(onboarded())
    dry = admin.apply_fabric(FabricApply(yaml=text, dry_run=True))
    assert (dry.applied, dry.base_version, dry.version, dry.strands) == (False, 1, 1, [])
    assert [(c.event, c.name) for c in dry.changes] == [
        ("fabric_site_added", "osaka"),
        ("fabric_pool_changed", "tokyo/H100"),
        ("fabric_pool_added", "osaka/H200"),
        ("fabric_circuit_added", "tyo-osa"),
    ]
    assert admin.fabric().version == 1 and _kinds(server) == ["fabric_applied"]
    done = admin.apply_fabric(FabricApply(yaml=text, base_version=1))
    assert (done.applied, done.version) == (True, 2)
    assert _kinds(server) == [
        "fabric_applied",
        "fabric_applied",
        "fabric_site_added",
        "fabric_pool_changed",
        "fabric_pool_added",
        "fabric_circuit_added",
    ]
    shown = admin.fabric()
    assert (shown.version, shown.yaml) == (2, text)
    assert "site osaka added" in shown.changes[0]
    assert [s.name for s in admin.sites()] == ["shanghai", "singapore", "tokyo", "osaka"]
    assert {link.circuit for link in admin.links()} >= {"tyo-osa"}
    # The new site's agent is accepted, and work lands there.
    reply = server.sync("osaka", capacity={"H200": 16})
    assert reply.attempts == []
    assert {r.dst for r in reply.routes.routes} == {"shanghai", "singapore", "tokyo"}
    job = admin.submit(
        JobSubmit(team="speech", gpus=8, duration_s=60.0, gpu_types=["H200"], command=["true"])
    )
    assert _started(server) == 1
    [there] = server.sync("osaka").attempts
    assert there.job_id == job.id
    # The job that ran all along is still Tokyo's, and finishes once.
    assert [a.attempt_id for a in server.sync("tokyo", running).attempts] == [running.attempt_id]
    server.sync("tokyo", running.model_copy(update={"state": "exited", "exit_code": 0}))
    finished = admin.job(running.job_id)
    assert (finished.state, finished.attempts) == ("completed", 1)


def test_a_change_that_would_strand_work_is_refused_and_changes_nothing(
    served: RunningServer,
) -> None:
    server = served
    admin = server.admin()
    running = _run_l40s_job(server)
    control = server.control
    before = (control.fabric, control.scheduler, control.fabric_version)
    text = dump_fabric(without_l40s())
    dry = admin.apply_fabric(FabricApply(yaml=text, dry_run=True))
    [strand] = dry.strands
    assert "pool tokyo/L40S is removed but 1 attempt(s) hold 16 of its GPUs" in strand
    assert running.attempt_id in strand
    with pytest.raises(ConflictError, match="would strand work: pool tokyo/L40S") as refused:
        admin.apply_fabric(FabricApply(yaml=text))
    assert "onecluster drain" in (refused.value.hint or "")
    assert admin.fabric().version == 1
    assert _kinds(server) == ["fabric_applied"]
    assert (control.fabric, control.scheduler, control.fabric_version) == before
    assert not control.refresh_fabric()
    with pytest.raises(FabricError, match="not valid YAML"):
        admin.apply_fabric(FabricApply(yaml="sites: [\n"))
    with pytest.raises(FabricError, match="nested too deeply"):
        admin.apply_fabric(FabricApply(yaml="[" * 5000))
    with pytest.raises(ConflictError, match="version 1 is in force now, not version 7"):
        admin.apply_fabric(FabricApply(yaml=dump_fabric(onboarded()), base_version=7))
    member = server.client(server.token(role="member", team="speech"))
    with pytest.raises(ForbiddenError):
        member.apply_fabric(FabricApply(yaml=dump_fabric(onboarded())))
    assert member.fabric().version == 1  # reading it needs no admin
    # The same fabric again: nothing to change, no new version.
    same = admin.apply_fabric(FabricApply(yaml=dump_fabric(THREE)))
    assert (same.applied, same.version, same.changes) == (False, 1, [])


def test_a_drained_pool_takes_no_new_work_keeps_its_running_work_and_may_then_go(
    served: RunningServer,
) -> None:
    server = served
    admin = server.admin()
    running = _run_l40s_job(server, gpus=8)
    drained = admin.drain("tokyo", DrainIn(gpu_type="L40S", reason="rack swap"))
    assert (drained.site, drained.gpu_type, drained.reason) == ("tokyo", "L40S", "rack swap")
    [tokyo] = [s for s in admin.sites() if s.name == "tokyo"]
    assert {p.gpu_type: p.draining for p in tokyo.pools} == {"H100": False, "L40S": True}
    assert not tokyo.draining
    waiting = admin.submit(
        JobSubmit(team="speech", gpus=8, duration_s=60.0, gpu_types=["L40S"], command=["true"])
    )
    assert _started(server) == 0
    assert admin.job(waiting.id).state == "pending"
    # What ran there keeps running (not stopped, not preempted).
    [kept] = server.sync("tokyo", running).attempts
    assert (kept.attempt_id, kept.action) == (running.attempt_id, "run")
    # Removing the pool waits for it; once it is idle the change goes through, drain lifted.
    text = dump_fabric(without_l40s())
    with pytest.raises(ConflictError, match="pool tokyo/L40S is removed"):
        admin.apply_fabric(FabricApply(yaml=text))
    admin.cancel(waiting.id)
    server.sync("tokyo", running.model_copy(update={"state": "exited", "exit_code": 0}))
    assert admin.apply_fabric(FabricApply(yaml=text)).version == 2
    assert admin.fabric().drains == []
    assert _kinds(server)[-3:] == [
        "fabric_applied",
        "fabric_pool_removed",
        "fabric_quota_removed",  # speech's L40S quota went with the pool
    ]


def test_draining_a_site_and_undoing_it(served: RunningServer) -> None:
    server = served
    admin = server.admin()
    server.sync("tokyo")
    admin.drain("tokyo", DrainIn())
    [tokyo] = [s for s in admin.sites() if s.name == "tokyo"]
    assert tokyo.draining and all(p.draining for p in tokyo.pools)
    job = admin.submit(
        JobSubmit(team="speech", gpus=8, duration_s=60.0, gpu_types=["L40S"], command=["true"])
    )
    assert _started(server) == 0
    assert server.control.scheduler.drained == {("tokyo", "H100"), ("tokyo", "L40S")}
    lifted = admin.undrain("tokyo", UndrainIn())
    assert [(d.site, d.gpu_type) for d in lifted] == [("tokyo", None)]
    assert admin.undrain("tokyo", UndrainIn()) == []
    assert _started(server) == 1
    assert admin.job(job.id).state == "running"
    with pytest.raises(NotFoundError, match="site tokyo has no pool of GPU type 'B200'"):
        admin.drain("tokyo", DrainIn(gpu_type="B200"))
    with pytest.raises(NotFoundError, match="no site 'atlantis'"):
        admin.drain("atlantis", DrainIn())
    kinds = [e.kind for e in admin.events(limit=1000)]
    assert kinds.count("site_draining") == 1 and kinds.count("site_undrained") == 1


def test_a_restart_with_another_fabric_file_keeps_the_database_s_and_says_so(
    served: RunningServer, caplog: pytest.LogCaptureFixture
) -> None:
    server = served
    server.admin().apply_fabric(FabricApply(yaml=dump_fabric(onboarded())))
    server.stop()
    server.config = replace(server.config, fabric=THREE)  # the file it was started with
    with caplog.at_level(logging.WARNING, logger="onecluster.server"):
        server.start()
    assert server.control.fabric_version == 2
    assert server.control.fabric.has_site("osaka")
    [said] = [r.getMessage() for r in caplog.records if "fabric apply" in r.getMessage()]
    assert "the database's fabric (version 2," in said
    assert "site osaka removed" in said
    token = server.admin().create_token(TokenCreate(role="agent", site="osaka"))
    assert token.site == "osaka"


def test_jobs_running_at_every_site_through_an_apply_each_finish_once(
    served: RunningServer,
) -> None:
    server = served
    admin = server.admin()
    shapes = {"shanghai": "H800", "singapore": "H100", "tokyo": "L40S"}
    for site in shapes:
        server.sync(site)
    jobs = [
        admin.submit(
            JobSubmit(team="speech", gpus=8, duration_s=600.0, gpu_types=[t], command=["true"])
        ).id
        for t in shapes.values()
        for _ in range(2)
    ]
    assert _started(server) == 6
    runs = {site: server.sync(site).attempts for site in shapes}
    reports = {
        site: [AttemptReport(attempt_id=r.attempt_id, job_id=r.job_id, state="running") for r in rs]
        for site, rs in runs.items()
    }
    for site, rs in reports.items():
        server.sync(site, *rs)
    assert admin.apply_fabric(FabricApply(yaml=dump_fabric(onboarded()))).applied
    assert _started(server) == 0  # nothing moves: the running jobs stay where they are
    for site, rs in reports.items():
        kept = server.sync(site, *rs).attempts
        assert sorted(a.attempt_id for a in kept) == sorted(r.attempt_id for r in rs)
        server.sync(site, *(r.model_copy(update={"state": "exited", "exit_code": 0}) for r in rs))
    for job_id in jobs:
        done = admin.job(job_id)
        assert (done.state, done.attempts) == ("completed", 1)
