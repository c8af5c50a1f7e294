"""The control plane against a real database, driven at random: jobs are never lost and
never run twice, across preemption, cancels, sites that fall silent and server restarts.

Hypothesis plays the users and the agents around the real ``ControlPlane`` and
``Reconciler`` (SQLite file, no HTTP): it submits, cancels, syncs agents that start what they
are told (once), stop what they are told, finish jobs with random exit codes, fall silent and
come back, and restarts the server on the same database.  After every step:

- no pool holds more GPUs in active attempts than it has;
- no job has two runs active at once (a requeued job's old run is over);
- a job that ended stays ended;

and at the end, with every site back, every submitted job ends completed, failed or cancelled.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from sqlalchemy import select

from onecluster.clock import ManualClock
from onecluster.errors import ImpossibleJobError
from onecluster.fabric import parse_fabric
from onecluster.model import TERMINAL_STATES, AttemptState, JobState, PriorityClass
from onecluster.schema import JobSubmit
from onecluster.server import ServerConfig
from onecluster.server._control import ControlPlane
from onecluster.server._reconcile import Reconciler
from onecluster.store import AgentReport, SyncReport
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
CAPACITY = {("a", "H100"): 8, ("b", "H100"): 4}
TIMEOUT = 10.0
ACTIVE = {AttemptState.STARTING, AttemptState.RUNNING, AttemptState.STOPPING}


class ControlPlaneMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="oc-prop-"))
        self.clock = ManualClock(1_000_000.0)
        self.config = ServerConfig(
            fabric=FABRIC, state_dir=self.dir, agent_timeout_s=TIMEOUT, grace_s=1.0
        )
        self._open()
        self.agents: dict[str, dict[str, str]] = {"a": {}, "b": {}}  # attempt -> job, running
        self.silent: set[str] = set()
        self.submitted: list[str] = []
        self.ended: dict[str, str] = {}

    def _open(self) -> None:
        self.control = ControlPlane.open(self.config, self.clock)
        self.reconciler = Reconciler(self.control)

    def teardown(self) -> None:
        try:
            self.silent.clear()
            for _ in range(60):
                if all(self._state(j) in TERMINAL_STATES for j in self.submitted):
                    break
                self.clock.advance(1.0)
                for site in ("a", "b"):
                    self._sync(site, finish_all=True)
                self.reconciler.step()
            stuck = [j for j in self.submitted if self._state(j) not in TERMINAL_STATES]
            assert not stuck, f"jobs never ended: {self._explain(stuck)}"
        finally:
            self.control.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    # -- the world ---------------------------------------------------------------------------

    @rule(
        team=st.sampled_from(["t1", "t2"]),
        gpus=st.sampled_from([1, 2, 4, 6, 8]),
        priority=st.sampled_from(["low", "normal", "high"]),
        preemptible=st.booleans(),
    )
    def submit(self, team: str, gpus: int, priority: str, preemptible: bool) -> None:
        body = JobSubmit(
            team=team,
            gpus=gpus,
            duration_s=60.0,
            priority=PriorityClass.parse(priority).name.lower(),
            preemptible=preemptible,
            command=["train"],
        )
        with contextlib.suppress(ImpossibleJobError):  # refused at submit: never a job
            self.submitted.append(self.control.submit(body).id)

    @rule()
    def reconcile(self) -> None:
        self.clock.advance(0.5)
        self.reconciler.step()

    @rule(site=st.sampled_from(["a", "b"]))
    def sync(self, site: str) -> None:
        if site not in self.silent:
            self._sync(site)

    @precondition(lambda self: any(self.agents.values()))
    @rule(data=st.data(), ok=st.booleans())
    def finish(self, data: st.DataObject, ok: bool) -> None:
        site = data.draw(st.sampled_from([s for s in ("a", "b") if self.agents[s]]))
        attempt = data.draw(st.sampled_from(sorted(self.agents[site])))
        self._sync(site, exited={attempt: 0 if ok else 1})

    @precondition(lambda self: self.submitted)
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        job = data.draw(st.sampled_from(self.submitted))
        if self._state(job) not in TERMINAL_STATES:
            self.control.store.cancel_job(job, now=self.clock.now())

    @rule(site=st.sampled_from(["a", "b"]))
    def fall_silent(self, site: str) -> None:
        # The agent is cut off; past half the lease it stops its jobs (fencing).
        self.silent.add(site)
        self.agents[site].clear()
        self.clock.advance(TIMEOUT + 1)
        self.reconciler.step()

    @rule(site=st.sampled_from(["a", "b"]))
    def come_back(self, site: str) -> None:
        self.silent.discard(site)
        self._sync(site)

    @rule()
    def restart_server(self) -> None:
        self.control.close()
        self.clock.advance(2.0)
        self._open()

    # -- invariants --------------------------------------------------------------------------

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
        for job in self.submitted:
            state = self._state(job)
            if job in self.ended:
                assert state == self.ended[job], (job, self.ended[job], state)
            elif state in TERMINAL_STATES:
                self.ended[job] = state

    # -- helpers -----------------------------------------------------------------------------

    def _explain(self, jobs: list[str]) -> str:
        store = self.control.store
        lines = [f"sites: {[(r.site, r.down, r.last_heartbeat) for r in store.sites()]}"]
        for j in jobs:
            rec = store.job(j)
            attempts = [(a.id, a.state, a.site, a.gpus) for a in store.attempts(j)]
            lines.append(f"{j} {rec.state} {rec.team} {rec.gpus} {rec.reason} {attempts}")
        lines.append(f"agents: {self.agents}")
        return "\n".join(lines)

    def _state(self, job: str) -> JobState:
        return self.control.store.job(job).state

    def _active_attempts(self) -> list[AttemptRow]:
        from sqlalchemy.orm import Session

        with Session(self.control.store.engine) as s:
            rows = s.scalars(select(AttemptRow)).all()
        return [r for r in rows if AttemptState(r.state) in ACTIVE]

    def _sync(
        self, site: str, *, exited: dict[str, int] | None = None, finish_all: bool = False
    ) -> None:
        running = self.agents[site]
        ends = dict(exited or {})
        if finish_all:
            ends.update(dict.fromkeys(running, 0))
        reports = tuple(
            AgentReport(attempt_id=a, state="exited", exit_code=ends[a])
            if a in ends
            else AgentReport(attempt_id=a, state="running")
            for a in running
        )
        for a in ends:
            running.pop(a, None)
        wanted = self.control.store.sync(
            site, SyncReport(agent_id=f"agent-{site}", attempts=reports), now=self.clock.now()
        )
        listed = {w.attempt_id for w in wanted}
        for w in wanted:
            if w.action == "run" and w.attempt_id not in running and w.attempt_id not in ends:
                running[w.attempt_id] = w.job_id  # started once; never again
            elif w.action == "stop":
                running.pop(w.attempt_id, None)  # exits; reported as gone next sync
        for a in [a for a in running if a not in listed]:
            running.pop(a)  # the server no longer wants it: the agent stops it


ControlPlaneMachine.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_control_plane_never_loses_or_doubles_a_job = ControlPlaneMachine.TestCase
