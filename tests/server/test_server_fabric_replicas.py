"""Two control planes on one PostgreSQL database: a fabric applied or a pool drained at one
is in force at the other after its next refresh, and an agent of a new site is accepted by
a replica that had not refreshed yet."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from fabric_changes import onboarded, with_fabric_routes

from onecluster.clock import ManualClock
from onecluster.fabric import dump_fabric
from onecluster.model import GpuPool, Site
from onecluster.schema import AgentSync, DrainIn, FabricApply, JobSubmit, TokenCreate

if TYPE_CHECKING:
    from conftest import RunningServer

pytestmark = pytest.mark.postgres


@pytest.fixture
def replicas(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[RunningServer, RunningServer]]:
    from tests.server.conftest import RunningServer, emptied_postgres

    url = emptied_postgres()
    monkeypatch.setattr(sys.modules[RunningServer.__module__], "create_app", with_fabric_routes)
    a = RunningServer(tmp_path / "a", clock, db_url=url)
    b = RunningServer(tmp_path / "b", clock, db_url=url)
    a.start()
    b.start()
    yield a, b
    b.stop()
    a.stop()


def test_a_fabric_applied_at_one_replica_is_in_force_at_the_other(
    replicas: tuple[RunningServer, RunningServer],
) -> None:
    a, b = replicas
    admin_a, admin_b = a.admin(), b.client(a.admin_token)
    assert b.control.fabric_version == 1
    assert admin_a.apply_fabric(FabricApply(yaml=dump_fabric(onboarded()))).version == 2
    assert admin_b.fabric().version == 2  # read from the database
    _wait(lambda: b.control.fabric_version == 2)  # every replica's loop takes it
    assert not b.control.refresh_fabric()  # nothing new since
    for control in (a.control, b.control):
        assert control.fabric_version == 2
        assert control.fabric.has_site("osaka")
        assert ("osaka", "H200") in {p.key for p in control.scheduler._pools}
        assert "tyo-osa" in control.links.statistics().states
        assert control.data.fabric is control.fabric and control.exports.fabric is control.fabric
    assert [s.name for s in admin_b.sites()][-1] == "osaka"
    # A pool drained at b is closed at a after a's refresh.
    admin_b.drain("osaka", DrainIn(gpu_type="H200"))
    # a leads, its passes an hour apart in these tests: it looks for changes between them
    _wait(lambda: a.control.scheduler.drained == {("osaka", "H200")})
    assert b.control.scheduler.drained == {("osaka", "H200")}


def test_a_replica_that_has_not_refreshed_yet_accepts_the_new_site_s_agent(
    replicas: tuple[RunningServer, RunningServer],
) -> None:
    a, b = replicas
    nagoya = Site(
        name="nagoya", region="r", jurisdiction="JP", pools=(GpuPool(gpu_type="H100", count=8),)
    )
    grown = onboarded()
    grown = replace(
        grown,
        sites=(*grown.sites, nagoya),
        circuits=(
            *grown.circuits,
            replace(grown.circuits[-1], name="osa-ngo", a="osaka", b="nagoya"),
        ),
    )
    a.admin().apply_fabric(FabricApply(yaml=dump_fabric(grown)))
    token = a.admin().create_token(TokenCreate(role="agent", site="nagoya")).token
    # b follows: it forwards the sync to a, which leads (and may not have refreshed yet)
    reply = b.client(token).agent_sync(
        "nagoya", AgentSync(agent_id="agent-1", capacity={"H100": 8})
    )
    assert reply.attempts == []
    assert a.control.fabric.has_site("nagoya")
    assert "nagoya" in {s.site for s in a.control.store.sites()}
    _wait(lambda: b.control.fabric.has_site("nagoya"))  # and b takes it within a second


def _wait(condition: Callable[[], bool], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the replicas did not agree in time"
        time.sleep(0.02)


def test_when_the_leader_stops_the_follower_leads_and_places_what_was_submitted_to_it(
    replicas: tuple[RunningServer, RunningServer],
) -> None:
    a, b = replicas
    admin_b = b.client(a.admin_token)
    assert admin_b.health()["role"] == "follower" and admin_b.health()["leader"] == a.url
    agent = a.admin().create_token(TokenCreate(role="agent", site="tokyo")).token
    b.client(agent).agent_sync("tokyo", AgentSync(agent_id="agent-1"))  # forwarded to a
    job = admin_b.submit(
        JobSubmit(team="speech", gpus=8, duration_s=60.0, gpu_types=["L40S"], command=["true"])
    )
    a.stop()  # a clean stop gives the lease up
    _wait(lambda: b._app.state.election.leading)
    seen = admin_b.leader()
    assert (seen.leader, seen.term, seen.role) == (b.url, 2, "leader")
    b.step()  # b's queue follows what was submitted while a led
    assert admin_b.job(job.id).state == "running"
    kinds = [e.kind for e in admin_b.events(kind="leader")]
    assert kinds == ["leader_elected", "leader_resigned", "leader_elected"]
