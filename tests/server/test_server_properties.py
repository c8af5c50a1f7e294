"""The control plane and real agents, driven at random: jobs are never lost and never run
twice, across preemption, cancels, server outages of any length, partitions of one agent from
the server, agent crashes, and all of these at once.

Hypothesis plays the users and the world around the real ``ControlPlane``, ``Reconciler``
(SQLite file) and one real :class:`~onecluster.agent.Agent` per site, all on one manual clock.
The agents sync in-process (no HTTP: the door is tested in test_server_sync_door.py) and run
their attempts on :class:`~world.WorldBackend`, a FAKE cluster whose processes the test can
see at every instant.  Time moves in small events (each agent's turn, each reconcile pass),
so an agent acts exactly when its loop would.

At every instant:

- no job has live processes of two different runs anywhere (it never runs twice);

after every step:

- no pool holds more GPUs in active attempts than it has;
- no job has two runs active at once in the database;
- a job that ended stays ended;
- a job failed only if one of its processes exited non-zero on its own (a stop by the
  control plane or by an agent whose lease ran out is never the job's failure);

and at the end, with every site and the server back, every submitted job ends.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from sqlalchemy import select
from sqlalchemy.orm import Session
from world import World, WorldBackend

from onecluster.agent import Agent
from onecluster.clock import ManualClock
from onecluster.errors import ImpossibleJobError, UnavailableError
from onecluster.fabric import parse_fabric
from onecluster.model import ACTIVE_ATTEMPT_STATES, TERMINAL_STATES, AttemptState, JobState
from onecluster.schema import AgentSync, AgentSyncReply, JobSubmit
from onecluster.server import ServerConfig
from onecluster.server._control import ControlPlane
from onecluster.server._reconcile import Reconciler
from onecluster.store._tables import AttemptRow

FABRIC = parse_fabric(
    """\
sites:
  - {name: a, region: r, jurisdiction: X, pools: [{gpu_type: H100, count: 8}]}
  - {name: b, region: r, jurisdiction: Y, pools: [{gpu_type: H100, count: 4}]}
circuits:
  - {name: a-b, between: [a, b], capacity_gbps: 1, rtt_ms: 10}
teams:
  - {name: t1, home_site: a, quota: {H100: 6}}
  - {name: t2, home_site: b, quota: {H100: 6}}
""",
    source="property-fabric",
)
SITES = ("a", "b")
CAPACITY = {("a", "H100"): 8, ("b", "H100"): 4}
LEASE_S = 10.0
RECONCILE_S = 0.5


class InProcessLink:
    """The agent's link to whichever server is up, unless the site is cut off."""

    def __init__(self, machine: ControlPlaneMachine, site: str) -> None:
        self._machine = machine
        self._site = site

    def agent_sync(
        self, site: str, body: AgentSync, *, timeout_s: float | None = None
    ) -> AgentSyncReply:
        control = self._machine.control
        if control is None or self._site in self._machine.partitioned:
            msg = "the server cannot be reached"
            raise UnavailableError(msg)
        return control.agent_sync(site, body, received=self._machine.clock.now())

    def close(self) -> None:
        return None


@dataclass(slots=True)
class Runner:
    """An extra agent and when it turns next."""

    agent: Agent
    next_turn: float


class ControlPlaneMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="oc-prop-"))
        self.clock = ManualClock(1_000_000.0)
        self.config = ServerConfig(fabric=FABRIC, state_dir=self.dir, lease_s=LEASE_S, grace_s=1.0)
        self.world = World()
        self.partitioned: set[str] = set()
        self.control: ControlPlane | None = None
        self.reconciler: Reconciler | None = None
        self._open_server()
        self.backends = {
            s: WorldBackend(s, self.world, self.clock, {"H100": c})
            for (s, _), c in CAPACITY.items()
        }
        self.agents = {s: self._agent(s) for s in SITES}
        self.next_turn = dict.fromkeys(SITES, self.clock.now())
        #: Second agents started for a site beside its own (an operator's mistake).
        self.doubles: list[Runner] = []
        self.next_pass = self.clock.now()
        self.submitted: list[str] = []
        self.ended: dict[str, JobState] = {}
        self.failed_on_purpose: set[str] = set()

    # -- the parts ---------------------------------------------------------------------------

    def _open_server(self) -> None:
        self.control = ControlPlane.open(self.config, self.clock)
        self.reconciler = Reconciler(self.control)

    def _close_server(self) -> None:
        if self.control is not None:
            self.control.close()
        self.control = self.reconciler = None

    def _agent(self, site: str) -> Agent:
        return Agent(
            site,
            self.backends[site],
            "in-process",
            "t",
            clock=self.clock,
            link=InProcessLink(self, site),
            stop_grace_s=2.0,
            max_backoff_s=4.0,
            state_path=self.dir / f"agent-{site}.json",  # what a restarted agent reads
        )

    def _run_for(self, seconds: float) -> None:
        """Let time pass event by event: agents' turns and reconcile passes, in order."""
        end = self.clock.now() + seconds
        while True:
            turns = [r.next_turn for r in self.doubles if r.agent.gave_up is None]
            turns += [t for s, t in self.next_turn.items() if self.agents[s].gave_up is None]
            moment = min([*turns, self.next_pass, end])
            self.clock.set(max(moment, self.clock.now()))
            for site in SITES:
                if self.agents[site].gave_up is None and self.next_turn[site] <= self.clock.now():
                    delay = self.agents[site].step()
                    self.next_turn[site] = self.clock.now() + max(delay, 0.01)
            for runner in self.doubles:
                if runner.agent.gave_up is None and runner.next_turn <= self.clock.now():
                    runner.next_turn = self.clock.now() + max(runner.agent.step(), 0.01)
            if self.next_pass <= self.clock.now():
                if self.reconciler is not None:
                    self.reconciler.step()
                self.next_pass = self.clock.now() + RECONCILE_S
            self._never_two_runs()
            if self.clock.now() >= end:
                return

    def _never_two_runs(self) -> None:
        for job, runs in self.world.runs_alive().items():
            assert len(runs) == 1, f"job {job} runs twice: runs {sorted(runs)} alive at once"

    def teardown(self) -> None:
        try:
            self.partitioned.clear()
            if self.control is None:
                self._open_server()
            for _ in range(200):
                if self.control is not None and all(
                    self._state(j) in TERMINAL_STATES for j in self.submitted
                ):
                    break
                for p in self.world.alive():
                    p.exit_code = 0
                self._run_for(1.0)
            stuck = [j for j in self.submitted if self._state(j) not in TERMINAL_STATES]
            assert not stuck, f"jobs never ended: {self._explain(stuck)}"
            self._failures_are_the_jobs_own()
        finally:
            self._close_server()
            shutil.rmtree(self.dir, ignore_errors=True)

    # -- users -------------------------------------------------------------------------------

    @precondition(lambda self: self.control is not None)
    @rule(
        team=st.sampled_from(["t1", "t2"]),
        gpus=st.sampled_from([1, 2, 4, 6, 8]),
        priority=st.sampled_from(["low", "normal", "high"]),
        preemptible=st.booleans(),
        max_sites=st.sampled_from([1, 1, 2]),
    )
    def submit(
        self, team: str, gpus: int, priority: str, preemptible: bool, max_sites: int
    ) -> None:
        assert self.control is not None
        body = JobSubmit(
            team=team,
            gpus=gpus,
            duration_s=60.0,
            priority=priority,  # type: ignore[arg-type]
            preemptible=preemptible,
            command=["train"],
            max_sites=max_sites,
        )
        with contextlib.suppress(ImpossibleJobError):  # refused at submit: never a job
            self.submitted.append(self.control.submit(body).id)

    @precondition(lambda self: self.control is not None and self.submitted)
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        assert self.control is not None
        job = data.draw(st.sampled_from(self.submitted))
        if self._state(job) not in TERMINAL_STATES:
            self.control.store.cancel_job(job, now=self.clock.now())

    # -- the world ---------------------------------------------------------------------------

    @rule(seconds=st.sampled_from([0.5, 1.0, 3.0, 8.0]))
    def time_passes(self, seconds: float) -> None:
        self._run_for(seconds)

    @precondition(lambda self: self.world.alive())
    @rule(data=st.data(), ok=st.booleans())
    def a_job_ends_on_its_own(self, data: st.DataObject, ok: bool) -> None:
        process = data.draw(st.sampled_from(self.world.alive()))
        process.exit_code = 0 if ok else 1
        if not ok:
            self.failed_on_purpose.add(process.job_id)
        self._run_for(1.0)

    @rule(seconds=st.sampled_from([2.0, 6.0, 9.0, 12.0, 30.0, 90.0]))
    def the_server_is_down_for(self, seconds: float) -> None:
        self._close_server()
        self._run_for(seconds)
        self._open_server()

    @rule()
    def the_server_restarts(self) -> None:
        self._close_server()
        self._open_server()

    @rule(site=st.sampled_from(SITES))
    def a_site_is_cut_off(self, site: str) -> None:
        self.partitioned.add(site)

    @precondition(lambda self: self.partitioned)
    @rule(data=st.data())
    def a_site_is_reconnected(self, data: st.DataObject) -> None:
        self.partitioned.discard(data.draw(st.sampled_from(sorted(self.partitioned))))

    @precondition(lambda self: len(self.doubles) < 2)
    @rule(site=st.sampled_from(SITES))
    def a_second_agent_is_started_for(self, site: str) -> None:
        # Both run: the newcomer takes the site over, the one it replaced is refused and
        # stops its attempts when its lease runs out; nothing runs twice meanwhile.
        backend = WorldBackend(site, self.world, self.clock, {"H100": CAPACITY[(site, "H100")]})
        agent = Agent(
            site,
            backend,
            "in-process",
            "t",
            clock=self.clock,
            link=InProcessLink(self, site),
            stop_grace_s=2.0,
            max_backoff_s=4.0,
            state_path=self.dir / f"agent-{site}-{len(self.doubles)}.json",
        )
        self.doubles.append(Runner(agent=agent, next_turn=self.clock.now()))

    @rule(site=st.sampled_from(SITES))
    def an_agent_crashes_and_restarts(self, site: str) -> None:
        self.backends[site] = WorldBackend.after_crash(self.backends[site])
        self.agents[site] = self._agent(site)
        self.next_turn[site] = self.clock.now()

    # -- invariants --------------------------------------------------------------------------

    @invariant()
    def never_two_runs_of_a_job_anywhere(self) -> None:
        self._never_two_runs()

    @invariant()
    def pools_never_over_committed_and_one_run_per_job(self) -> None:
        held: dict[tuple[str, str], int] = {}
        runs: dict[str, set[int]] = {}
        for a in self._active_attempts():
            held[(a.site, a.gpu_type)] = held.get((a.site, a.gpu_type), 0) + a.gpus
            runs.setdefault(a.job_id, set()).add(a.run)
        for pool, gpus in held.items():
            assert gpus <= CAPACITY[pool], (pool, gpus)
        for job, active_runs in runs.items():
            assert len(active_runs) == 1, (job, active_runs)

    @invariant()
    def ended_jobs_stay_ended(self) -> None:
        if self.control is None:
            return
        for job in self.submitted:
            state = self._state(job)
            if job in self.ended:
                assert state == self.ended[job], (job, self.ended[job], state)
            elif state in TERMINAL_STATES:
                self.ended[job] = state

    @invariant()
    def failures_are_the_jobs_own(self) -> None:
        self._failures_are_the_jobs_own()

    # -- helpers -----------------------------------------------------------------------------

    def _failures_are_the_jobs_own(self) -> None:
        if self.control is None:
            return
        for job in self.submitted:
            if self._state(job) is JobState.FAILED:
                assert job in self.failed_on_purpose, self._explain([job])

    def _explain(self, jobs: list[str]) -> str:
        assert self.control is not None
        store = self.control.store
        lines = [f"sites: {[(r.site, r.down, r.last_heartbeat) for r in store.sites()]}"]
        for j in jobs:
            rec = store.job(j)
            attempts = [(a.id, a.state, a.site, a.gpus) for a in store.attempts(j)]
            lines.append(f"{j} {rec.state} {rec.team} {rec.gpus} {rec.reason} {attempts}")
        lines.append(f"alive: {[(p.site, p.attempt_id) for p in self.world.alive()]}")
        return "\n".join(lines)

    def _state(self, job: str) -> JobState:
        assert self.control is not None
        return self.control.store.job(job).state

    def _active_attempts(self) -> list[AttemptRow]:
        # The database outlives the server: read it even while no server is up.
        store = self.control.store if self.control is not None else None
        if store is None:
            return []
        with Session(store.engine) as s:
            rows = s.scalars(select(AttemptRow)).all()
        return [r for r in rows if AttemptState(r.state) in ACTIVE_ATTEMPT_STATES]


ControlPlaneMachine.TestCase.settings = settings(
    max_examples=30,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_control_plane_never_loses_or_doubles_a_job = ControlPlaneMachine.TestCase
