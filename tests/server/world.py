"""A FAKE cluster for the control plane's property tests: every site's "processes" live in
one :class:`World`, so a test sees at every instant which runs of which jobs are really
running anywhere — the ground truth that "no job runs twice" is about.

:class:`WorldBackend` keeps the :class:`ClusterBackend` contract (start once per attempt id,
stop with a grace then kill on ``poll``, report until ``forget``) on a manual clock, without
real processes: the state machine starts and stops thousands of them.  Real processes are
covered by the backend's own tests and by the end-to-end outage test.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from onecluster.backends import AttemptSpec, AttemptStatus, LogSlice
from onecluster.clock import ManualClock
from onecluster.errors import BackendError
from onecluster.model import AttemptState


@dataclass(slots=True)
class Process:
    """One attempt's process at one site."""

    site: str
    attempt_id: str
    job_id: str
    run: int
    gpu_type: str
    gpus: int
    polite: bool  # exits at once on SIGTERM; otherwise only at SIGKILL
    exit_code: int | None = None
    kill_at: float | None = None

    @property
    def alive(self) -> bool:
        return self.exit_code is None


class World:
    """Every process of every site, for invariants."""

    def __init__(self) -> None:
        self.processes: dict[tuple[str, str], Process] = {}
        self.starts = 0

    def alive(self) -> list[Process]:
        return [p for p in self.processes.values() if p.alive]

    def runs_alive(self) -> dict[str, set[int]]:
        """Job id → the runs of it that have a live process somewhere."""
        runs: dict[str, set[int]] = {}
        for p in self.alive():
            runs.setdefault(p.job_id, set()).add(p.run)
        return runs


class WorldBackend:
    """A site's cluster in :class:`World` (FAKE; see the module docstring)."""

    name = "local"

    def __init__(
        self, site: str, world: World, clock: ManualClock, capacity: Mapping[str, int]
    ) -> None:
        self._site = site
        self._world = world
        self._clock = clock
        self._capacity = dict(capacity)
        self._held: dict[str, Process] = {}
        self._lost: set[str] = set()

    @classmethod
    def after_crash(cls, old: WorldBackend) -> WorldBackend:
        """The backend of a restarted agent on the same site: what the crashed one left is
        killed and reported ``lost`` (unfinished) or ``exited`` (finished), as LocalBackend
        does from its attempt records."""
        new = cls(old._site, old._world, old._clock, old._capacity)
        for attempt_id, process in old._held.items():
            if process.alive or attempt_id in old._lost:
                # Its record never saw an exit code: killed if need be, and lost.
                if process.alive:
                    process.exit_code = 137
                new._lost.add(attempt_id)
            new._held[attempt_id] = process
        return new

    def start(self, attempt: AttemptSpec) -> None:
        if attempt.attempt_id in self._held:
            return
        busy = sum(
            p.gpus for p in self._held.values() if p.alive and p.gpu_type == attempt.gpu_type
        )
        if busy + attempt.gpus > self._capacity.get(attempt.gpu_type, 0):
            msg = f"not enough free {attempt.gpu_type} at {self._site}"
            raise BackendError(msg)
        run = int(attempt.attempt_id.split(".")[1])
        # Deterministic variety: every other attempt ignores SIGTERM until it is killed.
        polite = self._world.starts % 2 == 0
        self._world.starts += 1
        process = Process(
            site=self._site,
            attempt_id=attempt.attempt_id,
            job_id=attempt.job_id,
            run=run,
            gpu_type=attempt.gpu_type,
            gpus=attempt.gpus,
            polite=polite,
        )
        self._held[attempt.attempt_id] = process
        self._world.processes[(self._site, attempt.attempt_id)] = process

    def stop(self, attempt_id: str, grace_s: float, reason: str) -> None:
        process = self._held.get(attempt_id)
        if process is None or not process.alive:
            return
        if process.polite or grace_s <= 0:
            process.exit_code = 143 if grace_s > 0 else 137
            return
        deadline = self._clock.now() + grace_s
        if process.kill_at is None or deadline < process.kill_at:
            process.kill_at = deadline

    def poll(self) -> list[AttemptStatus]:
        now = self._clock.now()
        out = []
        for attempt_id, p in self._held.items():
            if p.alive and p.kill_at is not None and now >= p.kill_at:
                p.exit_code = 137
            if attempt_id in self._lost:
                state = AttemptState.LOST
            else:
                state = AttemptState.RUNNING if p.alive else AttemptState.EXITED
            out.append(
                AttemptStatus(
                    attempt_id=attempt_id,
                    job_id=p.job_id,
                    state=state,
                    exit_code=None if p.alive else p.exit_code,
                )
            )
        return out

    def read_logs(self, attempt_id: str, offset: int = 0, limit: int = 65536) -> LogSlice:
        return LogSlice(attempt_id=attempt_id, offset=offset, next_offset=offset, data="")

    def forget(self, attempt_id: str) -> None:
        process = self._held.get(attempt_id)
        if process is not None and not process.alive:
            del self._held[attempt_id]
            self._lost.discard(attempt_id)

    def capacity(self) -> Mapping[str, int]:
        return dict(self._capacity)

    def problem(self) -> str | None:
        return None

    def close(self, grace_s: float = 5.0) -> None:
        for p in self._held.values():
            if p.alive:
                p.exit_code = 137

    def finish(self, attempt_id: str, exit_code: int) -> None:
        """The process ends on its own."""
        self._held[attempt_id].exit_code = exit_code

    def running(self) -> list[str]:
        return sorted(a for a, p in self._held.items() if p.alive)
