"""The agent's decision, as a pure function: desired attempts vs observed ones → actions.

Rules (``docs/contracts.md``, "Agent sync"):

* ``run`` an attempt the backend does not hold and this agent never started → start it (once
  per ``attempt_id``: an id in ``started`` is never started again, even if the server repeats).
* ``stop`` an attempt that is running → stop it with the server's ``grace_s``.
* a running attempt the server does not list at all → stop it with ``default_grace_s``.
* a finished (exited or lost) attempt the server no longer lists, whose log has been fully
  shipped → forget it.  Until then it keeps being reported.
* a listed attempt the backend does not hold and this agent will not start — it started it
  before (the backend lost it), it was handed to an earlier agent of the site, or the server
  wants it stopped — is an *orphan*: reported ``lost`` until the server no longer lists it.
  The server never infers that an attempt is gone from a sync that does not mention it.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import dataclass

from onecluster.backends import AttemptSpec, AttemptStatus
from onecluster.errors import ValidationError
from onecluster.model import AttemptState
from onecluster.schema import DesiredAttempt

__all__ = ["Actions", "Orphan", "Rejected", "StopOrder", "reconcile"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StopOrder:
    """Stop ``attempt_id``: SIGTERM now, SIGKILL after ``grace_s``."""

    attempt_id: str
    grace_s: float
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Rejected:
    """A ``run`` order that cannot become an :class:`AttemptSpec`; ``message`` says why."""

    attempt_id: str
    job_id: str
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Orphan:
    """A listed attempt this agent neither holds nor will start; reported ``lost``."""

    attempt_id: str
    job_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Actions:
    """What to do this round, in this order: stops, starts, forgets; and what to report."""

    starts: tuple[AttemptSpec, ...] = ()
    stops: tuple[StopOrder, ...] = ()
    forgets: tuple[str, ...] = ()
    rejected: tuple[Rejected, ...] = ()
    orphans: tuple[Orphan, ...] = ()


def reconcile(
    desired: Sequence[DesiredAttempt],
    observed: Sequence[AttemptStatus],
    *,
    started: Set[str],
    drained: Set[str],
    default_grace_s: float,
    agent_id: str | None = None,
) -> Actions:
    """The actions that move the site from ``observed`` towards ``desired``.

    ``started`` holds every attempt id this agent has ever started; ``drained`` the finished
    attempts whose log has been shipped completely; ``agent_id`` is this agent's (orders
    handed to another agent are never started).  Pure: reads its arguments only.
    """
    held = {s.attempt_id: s for s in observed}
    listed = {d.attempt_id for d in desired}
    starts: list[AttemptSpec] = []
    stops: list[StopOrder] = []
    rejected: list[Rejected] = []
    orphans: list[Orphan] = []
    for order in desired:
        status = held.get(order.attempt_id)
        if status is None:
            mine = order.handed_to is None or order.handed_to == agent_id
            if order.action != "run" or order.attempt_id in started or not mine:
                orphans.append(Orphan(attempt_id=order.attempt_id, job_id=order.job_id))
                continue
            try:
                starts.append(_spec(order))
            except ValidationError as exc:
                rejected.append(
                    Rejected(attempt_id=order.attempt_id, job_id=order.job_id, message=exc.message)
                )
        elif order.action == "stop" and status.state is AttemptState.RUNNING:
            reason = order.reason or "stopped by the server"
            stops.append(
                StopOrder(attempt_id=order.attempt_id, grace_s=order.grace_s, reason=reason)
            )
    forgets: list[str] = []
    for status in observed:
        if status.attempt_id in listed:
            continue
        if status.state is AttemptState.RUNNING:
            reason = "the server no longer lists this attempt"
            stops.append(
                StopOrder(attempt_id=status.attempt_id, grace_s=default_grace_s, reason=reason)
            )
        elif status.attempt_id in drained:
            forgets.append(status.attempt_id)
    return Actions(
        starts=tuple(starts),
        stops=tuple(stops),
        forgets=tuple(forgets),
        rejected=tuple(rejected),
        orphans=tuple(orphans),
    )


def _spec(order: DesiredAttempt) -> AttemptSpec:
    return AttemptSpec(
        attempt_id=order.attempt_id,
        job_id=order.job_id,
        command=tuple(order.command),
        gpu_type=order.gpu_type,
        gpus=order.gpus,
        env=order.env,
        workdir=order.workdir,
    )
