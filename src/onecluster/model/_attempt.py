"""Attempts: one part of one run of a job at one site, and the states it moves through."""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["ACTIVE_ATTEMPT_STATES", "OBSERVED_ATTEMPT_STATES", "AttemptRecord", "AttemptState"]


class AttemptState(enum.StrEnum):
    """Where one attempt is.

    The control plane moves an attempt ``starting`` (handed to its site's agent) →
    ``running`` (the agent reported it running) → ``stopping`` (told to stop: preempted,
    cancelled, a gang member broke) → ``exited`` or ``lost``.  A cluster backend observes only
    ``running``, ``exited`` (with an exit code) and ``lost`` (it can no longer follow it; the
    attempt did not fail on its own): :data:`OBSERVED_ATTEMPT_STATES`.
    """

    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    EXITED = "exited"
    LOST = "lost"


#: Attempts that still hold their GPUs.
ACTIVE_ATTEMPT_STATES = frozenset(
    {AttemptState.STARTING, AttemptState.RUNNING, AttemptState.STOPPING}
)

#: The states a backend or an agent reports (the ``state`` of an agent sync's attempt).
OBSERVED_ATTEMPT_STATES = frozenset({AttemptState.RUNNING, AttemptState.EXITED, AttemptState.LOST})


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptRecord:
    """One part of one run of a job at one site (``run`` counts the job's runs from 1).

    ``preempted``: it was told to stop because its job was preempted (the work it did since
    its job's last checkpoint is lost, :meth:`~onecluster.model.JobSpec.kept_after`).
    """

    id: str
    job_id: str
    run: int
    site: str
    gpu_type: str
    gpus: int
    state: AttemptState
    stop_reason: str | None
    exit_code: int | None
    started_at: float
    finished_at: float | None
    borrowed: bool
    preemptible: bool
    waited_s: float
    cost_per_gpu_hour: float
    cost: float
    ran_from: float | None = None
    ran_until: float | None = None
    preempted: bool = False

    def billed_span(self, now: float) -> tuple[float, float]:
        """The span its GPUs count for in reports: when it really ran under the site's
        cluster manager where the agent said so, else from its start by onecluster to its end
        (``now`` for one still active)."""
        start = self.ran_from if self.ran_from is not None else self.started_at
        end = self.ran_until if self.ran_until is not None else self.finished_at
        if end is None:
            end = now
        return start, max(end, start)
