"""Leases and fencing: an agent keeps its jobs for as long as its lease lasts, and has them
gone before the server may give them to another site.

The agent is driven turn by turn on a :class:`ManualClock` (shared with its LocalBackend, so
SIGKILL deadlines follow it too) against a scripted link; its jobs are real processes.
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onecluster.agent import Agent
from onecluster.agent._lease import Lease
from onecluster.backends import LocalBackend
from onecluster.clock import ManualClock
from onecluster.errors import ForbiddenError, NotLeaderError, PlatformError, UnavailableError
from onecluster.model import AttemptState
from onecluster.process import alive
from onecluster.schema import AgentSync, AgentSyncReply, DesiredAttempt

SITE = "sha"


class ScriptedLink:
    """A :class:`SyncLink` that answers with ``want`` while ``failure`` is None (FAKE server)."""

    def __init__(self, lease_s: float, clock: ManualClock) -> None:
        self.lease_s = lease_s
        self.clock = clock
        self.want: list[DesiredAttempt] = []
        self.failure: PlatformError | None = None
        self.hang_s = 0.0  # a frozen server: each call takes this long, then times out
        self.bodies: list[AgentSync] = []
        self.calls = 0
        self.timeouts: list[tuple[float, float | None]] = []  # (when, timeout_s) per call

    def agent_sync(
        self, site: str, body: AgentSync, *, timeout_s: float | None = None
    ) -> AgentSyncReply:
        self.calls += 1
        self.timeouts.append((self.clock.now(), timeout_s))
        if self.hang_s:
            # ServerLink's own timeout bounds a call given none: three phases of 5 s
            self.clock.advance(min(self.hang_s, 15.0 if timeout_s is None else timeout_s))
            msg = "the server did not answer in time"
            raise UnavailableError(msg)
        if self.failure is not None:
            raise self.failure
        self.bodies.append(body)
        return AgentSyncReply(heartbeat_interval_s=1.0, lease_s=self.lease_s, attempts=self.want)

    def close(self) -> None:
        return None

    def reported(self, attempt_id: str) -> dict[str, Any] | None:
        for a in self.bodies[-1].attempts:
            if a.attempt_id == attempt_id:
                return a.model_dump()
        return None


def run_order(attempt_id: str, argv: list[str], **extra: Any) -> DesiredAttempt:
    return DesiredAttempt(
        attempt_id=attempt_id,
        job_id=f"job-{attempt_id}",
        action="run",
        command=argv,
        gpu_type="H100",
        gpus=1,
        env={},
        grace_s=10.0,
        **extra,
    )


class World:
    """An agent, its backend and its link on one manual clock."""

    def __init__(self, tmp_path: Path, *, lease_s: float, stop_grace_s: float = 10.0) -> None:
        self.clock = ManualClock(1000.0)
        self.link = ScriptedLink(lease_s, self.clock)
        self.work_dir = tmp_path / "agent"
        self.stop_grace_s = stop_grace_s
        self.pidfile = tmp_path / "pid"
        self.restart_agent()

    def restart_agent(self) -> None:
        """A new agent process on the same work directory (the old one simply vanishes)."""
        self.backend = LocalBackend(SITE, {"H100": 8}, self.work_dir, clock=self.clock)
        self.agent = Agent(
            SITE,
            self.backend,
            "http://fake",
            "t",
            clock=self.clock,
            link=self.link,
            stop_grace_s=self.stop_grace_s,
            max_backoff_s=4.0,
            state_path=self.work_dir / "agent-state.json",
        )

    def run_for(self, seconds: float) -> None:
        """Turn the agent as its loop would, for ``seconds`` of manual time."""
        end = self.clock.now() + seconds
        while self.clock.now() < end:
            delay = self.agent.step()
            self.clock.advance(min(max(delay, 0.01), end - self.clock.now()))
        self.agent.step()

    def start_job(self) -> int:
        self.link.want = [
            run_order("a1", ["sh", "-c", f"echo $$ > {self.pidfile}; exec sleep 600"])
        ]
        self.agent.step()  # sync: the order arrives and the job starts
        deadline = time.monotonic() + 5
        while not self.pidfile.exists() or not self.pidfile.read_text().strip():
            assert time.monotonic() < deadline, "the job never started"
            time.sleep(0.01)
        return int(self.pidfile.read_text())

    def close(self) -> None:
        self.backend.close(grace_s=0.1)


def wait_dead(world: World, pid: int) -> None:
    """Until the job's process is gone and its backend has reaped it."""
    deadline = time.monotonic() + 5
    while alive(pid) or any(s.state is AttemptState.RUNNING for s in world.backend.poll()):
        assert time.monotonic() < deadline, "the job outlived its SIGKILL"
        time.sleep(0.01)


@pytest.fixture
def world(tmp_path: Path) -> Any:
    made: list[World] = []

    def make(**kw: Any) -> World:
        made.append(World(tmp_path, **kw))
        return made[-1]

    yield make
    for w in made:
        w.close()


def test_jobs_keep_running_through_an_outage_shorter_than_the_lease(world: Any) -> None:
    # Before leases, an agent stopped its jobs after half the lease: any server restart that
    # took longer than that killed every running job.
    w = world(lease_s=60.0)
    pid = w.start_job()
    w.link.failure = UnavailableError("the server is down")
    w.run_for(40.0)
    assert alive(pid)
    assert not w.agent.statistics().fenced
    w.link.failure = None
    w.run_for(5.0)
    assert w.link.reported("a1") == {**(w.link.reported("a1") or {}), "state": "running"}
    assert alive(pid)


@pytest.mark.parametrize(
    ("failure", "first_gap"),
    [
        (UnavailableError("the server is down"), 1.0),  # the heartbeat, then doubled
        (NotLeaderError("no replica leads now"), 0.2),  # an election is over in about 2 s
    ],
)
def test_a_sync_is_retried_sooner_while_the_replicas_elect_a_leader(
    world: Any, failure: PlatformError, first_gap: float
) -> None:
    w = world(lease_s=60.0)
    w.start_job()
    w.link.failure = failure
    calls = len(w.link.timeouts)
    w.run_for(6.0)
    when = [at for at, _ in w.link.timeouts[calls:]]
    gaps = [later - earlier for earlier, later in itertools.pairwise(when)]
    assert gaps[0] == pytest.approx(first_gap, abs=0.06)
    assert gaps[1] == pytest.approx(2 * first_gap, abs=0.06)
    if isinstance(failure, NotLeaderError):  # every 0.5 s while the election may last
        assert max(gaps) == pytest.approx(0.5, abs=0.06)
        w.run_for(10.0)  # an election that does not end: the usual backoff after about 10 s
        when = [at for at, _ in w.link.timeouts[calls:]]
        assert when[-1] - when[-2] == pytest.approx(4.0, abs=0.06)
    else:
        assert max(gaps) <= 4.0 + 0.06  # max_backoff_s
    w.link.failure = None
    w.run_for(4.0)
    assert w.agent.statistics().consecutive_failures == 0


def test_an_unrenewed_lease_stops_every_job_before_the_server_may_give_it_away(
    world: Any,
) -> None:
    w = world(lease_s=60.0, stop_grace_s=10.0)
    pid = w.start_job()
    lease = w.agent.lease
    assert lease is not None
    w.link.failure = UnavailableError("cut off")
    w.run_for(lease.fence_at(10.0) - w.clock.now() - 0.5)
    assert alive(pid)  # it keeps running while the lease may still be renewed
    w.run_for(lease.ends_at - w.clock.now())
    wait_dead(w, pid)
    # The server gives the site's work away only once its own end of the lease has passed.
    assert w.clock.now() < lease.sent_at + lease.length_s
    assert w.agent.statistics().fenced
    # Stopping it was the agent's doing, never the job's failure: it is reported lost.
    w.link.failure = None
    w.run_for(5.0)  # the next retry, at most max_backoff_s away
    assert w.link.reported("a1") == {**(w.link.reported("a1") or {}), "state": "lost"}
    assert not w.agent.statistics().fenced


def test_a_job_stopped_for_its_lease_stays_lost_when_the_agent_restarts_unheard(
    world: Any,
) -> None:
    # The agent stops its job when its lease runs out, then dies before it can tell the
    # server; the next agent finds the attempt ended with SIGKILL's 137 — which must not
    # become the job's exit code.
    w = world(lease_s=20.0, stop_grace_s=1.0)
    pid = w.start_job()
    w.link.failure = UnavailableError("cut off")
    w.run_for(20.0)
    wait_dead(w, pid)
    w.restart_agent()
    w.link.failure = None
    w.agent.step()
    assert w.link.reported("a1") == {**(w.link.reported("a1") or {}), "state": "lost"}


def test_a_frozen_server_cannot_hold_a_sync_past_the_lease(world: Any) -> None:
    # A stopped (SIGSTOP) server accepts connections and never answers: every sync waits for
    # its timeout.  None may wait past the moment the agent must stop its jobs, or past the
    # SIGKILL at its end of the lease.
    w = world(lease_s=60.0, stop_grace_s=10.0)
    pid = w.start_job()
    lease = w.agent.lease
    assert lease is not None
    w.link.hang_s = 3600.0
    calls = len(w.link.timeouts)
    w.run_for(lease.ends_at - w.clock.now())
    wait_dead(w, pid)
    fence = lease.fence_at(10.0)
    for when, timeout in w.link.timeouts[calls:]:
        if when < lease.ends_at:
            assert timeout is not None
            deadline = fence if when < fence else lease.ends_at
            assert when + timeout <= deadline + 1e-6, (when, timeout, deadline)


def test_a_permanent_refusal_at_start_ends_the_agent_with_its_error(world: Any) -> None:
    w = world(lease_s=60.0)
    w.link.failure = ForbiddenError("only the agent token of site sha may sync it")
    w.agent.step()
    assert isinstance(w.agent.gave_up, ForbiddenError)
    assert w.link.calls == 1  # not retried


def test_a_permanent_refusal_later_keeps_jobs_until_the_lease_ends_then_gives_up(
    world: Any,
) -> None:
    w = world(lease_s=60.0)
    pid = w.start_job()
    w.link.failure = ForbiddenError("this token is not valid (unknown or revoked)")
    w.run_for(30.0)
    assert alive(pid)
    assert w.agent.gave_up is None
    w.run_for(31.0)
    wait_dead(w, pid)
    assert isinstance(w.agent.gave_up, ForbiddenError)


def test_an_order_handed_to_an_earlier_agent_is_never_started_and_is_reported_lost(
    world: Any,
) -> None:
    w = world(lease_s=60.0)
    marker = w.pidfile.with_name("ran")
    w.link.want = [run_order("a1", ["touch", str(marker)], handed_to="agent-before-me")]
    w.run_for(3.0)
    assert not marker.exists()
    assert w.link.reported("a1") == {**(w.link.reported("a1") or {}), "state": "lost"}


def test_an_order_the_agent_cannot_run_is_reported_refused_with_its_reason(world: Any) -> None:
    w = world(lease_s=60.0)
    w.link.want = [run_order("a1", [])]
    w.run_for(2.0)
    report = w.link.reported("a1")
    assert report is not None
    assert report["state"] == "refused"
    assert "needs a command" in report["reason"]


@given(
    length=st.floats(min_value=0.05, max_value=86_400.0),
    grace=st.floats(min_value=0.0, max_value=3_600.0),
    sent=st.floats(min_value=0.0, max_value=1e9),
)
def test_the_agents_end_of_a_lease_always_comes_before_the_servers(
    length: float, grace: float, sent: float
) -> None:
    lease = Lease(sent_at=sent, length_s=length)
    assert 0 < lease.margin_s <= length / 4 + 1e-9
    assert lease.ends_at <= sent + length - lease.margin_s + 1e-6
    assert sent <= lease.fence_at(grace) <= lease.ends_at
    assert lease.grace_s(grace) <= grace
