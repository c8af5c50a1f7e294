"""Invariants of the scheduler core under random submit / run / preempt / lose / restart.

The machine below plays the control plane around the pure core exactly as the server does:
it applies plans, drains preempted jobs back into the queue (same id, same submit time),
loses sites (their jobs are requeued) and "restarts" by rebuilding the queue and ledger from
their contents.  Hypothesis checks after every step that:

- no pool is ever over-committed;
- no team holds more in-quota GPUs than its quota (only borrowed work goes beyond);
- every submitted job is in exactly one place: queued, running, or finished;
- at the end, with every site back, every submitted job finishes.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from onecluster.errors import ImpossibleJobError
from onecluster.fabric import parse_fabric
from onecluster.model import JobSpec, PriorityClass
from onecluster.scheduler import (
    Allocation,
    AllocationLedger,
    ClusterView,
    PendingJob,
    PendingQueue,
    Scheduler,
)

FABRIC = parse_fabric(
    """\
sites:
  - name: a
    region: r
    jurisdiction: X
    pools: [{gpu_type: H100, count: 8}, {gpu_type: A100, count: 4}]
  - {name: b, region: r, jurisdiction: X, pools: [{gpu_type: H100, count: 6}]}
  - {name: c, region: r, jurisdiction: Y, pools: [{gpu_type: A100, count: 4}]}
circuits:
  - {name: a-b, between: [a, b], capacity_gbps: 1, rtt_ms: 10}
  - {name: b-c, between: [b, c], capacity_gbps: 1, rtt_ms: 10}
teams:
  - {name: t1, home_site: a, weight: 2, quota: {H100: 6, A100: 2}}
  - {name: t2, home_site: b, quota: {H100: 4}}
  - {name: t3, home_site: c, quota: {A100: 4}}
""",
    source="property-fabric",
)
CAPACITY = {(s.name, p.gpu_type): p.count for s in FABRIC.sites for p in s.pools}
QUOTA = {(t.name, k): v for t in FABRIC.teams for k, v in (t.quota or {}).items()}

specs = st.builds(
    JobSpec,
    team=st.sampled_from(["t1", "t2", "t3"]),
    gpus=st.sampled_from([1, 1, 2, 3, 4, 6, 8, 10]),
    duration_s=st.floats(1, 500),
    gpu_types=st.sampled_from([(), ("H100",), ("A100",), ("H100", "A100")]),
    priority=st.sampled_from(list(PriorityClass)),
    preemptible=st.booleans(),
    max_sites=st.sampled_from([1, 1, 1, 2]),
)


class SchedulerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.sched = Scheduler(FABRIC)
        self.queue = PendingQueue()
        self.ledger = AllocationLedger()
        self.now = 0.0
        self.submitted: dict[str, PendingJob] = {}
        self.done: dict[str, str] = {}
        self.cancelling: set[str] = set()
        self.down: set[str] = set()
        self.counter = 0

    # -- what users and the world do ---------------------------------------------------------

    @rule(spec=specs)
    def submit(self, spec: JobSpec) -> None:
        try:
            self.sched.admit(spec)
        except ImpossibleJobError:
            return
        self.counter += 1
        job = PendingJob(job_id=f"j{self.counter}", spec=spec, submitted_at=self.now)
        self.submitted[job.job_id] = job
        self.queue.add(job)

    @rule(dt=st.floats(0, 100))
    def tick(self, dt: float) -> None:
        self.now += dt
        plan = self.sched.plan(
            ClusterView(running=self.ledger, down_sites=frozenset(self.down)), self.queue, self.now
        )
        for p in plan.preemptions:
            victim = self.ledger.get(p.job_id)
            assert victim is not None and not victim.draining
            assert victim.borrowed or victim.preemptible
            self.ledger.replace(_draining(victim))
        for s in plan.starts:
            assert all(p.site not in self.down for p in s.parts)
            assert len({p.site for p in s.parts}) == len(s.parts)
            job = self.queue.remove(s.job_id)
            assert sum(p.gpus for p in s.parts) == job.spec.gpus
            assert len(s.parts) <= job.spec.max_sites
            if s.borrowed:
                assert s.preemptible
            self.ledger.add(
                Allocation(
                    job_id=s.job_id,
                    team=job.spec.team,
                    parts=s.parts,
                    priority=job.spec.priority,
                    borrowed=s.borrowed,
                    preemptible=s.preemptible,
                    started_at=self.now,
                    expected_end=self.now + job.spec.duration_s,
                )
            )

    @precondition(lambda self: len(self.ledger) > 0)
    @rule(data=st.data(), ok=st.booleans())
    def finish(self, data: st.DataObject, ok: bool) -> None:
        job_id = data.draw(st.sampled_from(sorted(a.job_id for a in self.ledger)))
        a = self.ledger.remove(job_id)
        if job_id in self.cancelling:
            self.cancelling.discard(job_id)
            self.done[job_id] = "cancelled"
        elif a.draining:
            self._requeue(job_id)  # preempted: back in the queue, never lost
        else:
            self.done[job_id] = "completed" if ok else "failed"

    @precondition(lambda self: len(self.submitted) > len(self.done))
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        live = sorted(set(self.submitted) - set(self.done) - self.cancelling)
        if not live:
            return
        job_id = data.draw(st.sampled_from(live))
        if job_id in self.queue:
            self.queue.remove(job_id)
            self.done[job_id] = "cancelled"
        else:
            a = self.ledger.get(job_id)
            assert a is not None
            self.cancelling.add(job_id)
            if not a.draining:
                self.ledger.replace(_draining(a))

    @rule(site=st.sampled_from(["a", "b", "c"]))
    def lose_site(self, site: str) -> None:
        self.down.add(site)
        for a in list(self.ledger):
            if any(p.site == site for p in a.parts):
                self.ledger.remove(a.job_id)
                if a.job_id in self.cancelling:
                    self.cancelling.discard(a.job_id)
                    self.done[a.job_id] = "cancelled"
                else:
                    self._requeue(a.job_id)

    @rule(site=st.sampled_from(["a", "b", "c"]))
    def site_back(self, site: str) -> None:
        self.down.discard(site)

    @rule()
    def restart(self) -> None:
        self.queue = PendingQueue.of(list(self.queue))
        self.ledger = AllocationLedger.of(list(self.ledger))

    def _requeue(self, job_id: str) -> None:
        self.queue.add(self.submitted[job_id])

    # -- invariants --------------------------------------------------------------------------

    @invariant()
    def no_pool_over_committed(self) -> None:
        for key, used in self.ledger.used.items():
            assert 0 <= used <= CAPACITY[key], (key, used)

    @invariant()
    def quota_only_exceeded_by_borrowed_work(self) -> None:
        for team, by_type in self.ledger.nominal.items():
            for gpu_type, used in by_type.items():
                assert used <= QUOTA.get((team, gpu_type), 0), (team, gpu_type, used)

    @invariant()
    def every_job_in_exactly_one_place(self) -> None:
        for job_id in self.submitted:
            places = (job_id in self.queue) + (job_id in self.ledger) + (job_id in self.done)
            assert places == 1, (job_id, places)

    def teardown(self) -> None:
        self.down.clear()
        for _ in range(400):
            if len(self.done) == len(self.submitted):
                break
            self.tick(50.0)
            for a in list(self.ledger):
                self.ledger.remove(a.job_id)
                if a.job_id in self.cancelling:
                    self.done[a.job_id] = "cancelled"
                elif a.draining:
                    self._requeue(a.job_id)
                else:
                    self.done[a.job_id] = "completed"
        missing = set(self.submitted) - set(self.done)
        assert not missing, f"jobs never finished: {sorted(missing)}"


def _draining(a: Allocation) -> Allocation:
    return Allocation(
        job_id=a.job_id,
        team=a.team,
        parts=a.parts,
        priority=a.priority,
        borrowed=a.borrowed,
        preemptible=a.preemptible,
        started_at=a.started_at,
        expected_end=a.expected_end,
        draining=True,
    )


SchedulerMachine.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_scheduler_invariants = SchedulerMachine.TestCase
