"""Replay the demo workload through the live API and feed the live view.

The loop submits each job with its team's member token when its time comes, polls
``/stats``, ``/sites`` and ``/jobs`` about twice a second, turns job state changes into
events, and hands a :class:`ViewState` to the view.  Time and sleeping are injected so the
loop's logic can be tested without waiting.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from onecluster.errors import UnavailableError, ValidationError
from onecluster.schema import JobOut, JobSubmit, StatsOut
from onecluster.up._live import ViewState
from onecluster.up._workload import DemoJob, DemoWorkload

if TYPE_CHECKING:
    from onecluster.client import Client

__all__ = ["ReplayResult", "job_events", "replay"]

#: Most jobs one ``/jobs`` poll returns; the demo never has more.
_JOBS_PAGE = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayResult:
    """What the replay did: jobs submitted, refused and sent without an answer (whether the
    server took them is unknown: a replica lost mid-request), utilisation sampled, final
    stats."""

    submitted: int
    rejected: int
    mean_utilization: float | None
    stats: StatsOut
    unanswered: int = 0


def job_events(
    previous: Mapping[str, str], jobs: Sequence[JobOut]
) -> tuple[dict[str, str], list[str]]:
    """Compare job states with the last poll: ``(states now, one sentence per change)``.

    A job seen for the first time in a non-pending state counts as a change from pending.
    """
    states = dict(previous)
    events: list[str] = []
    for job in sorted(jobs, key=lambda j: (j.started_at or 0.0, j.id)):
        before = previous.get(job.id, "pending")
        states[job.id] = job.state
        if job.state == before:
            continue
        where = ", ".join(f"{p.site} {p.gpu_type}×{p.gpus}" for p in job.parts)
        if job.state == "running":
            borrowed = " (borrowed)" if job.borrowed else ""
            events.append(f"started   {job.name} [{job.team}] on {where}{borrowed}")
        elif job.state == "completed":
            events.append(f"completed {job.name} [{job.team}]")
        elif job.state == "failed":
            events.append(f"failed    {job.name} [{job.team}]: {job.reason or job.exit_code}")
        else:
            events.append(f"{job.state:<9} {job.name} [{job.team}]")
    return states, events


def replay(
    workload: DemoWorkload,
    *,
    fabric_name: str,
    duration_s: float,
    admin: Client,
    members: Mapping[str, Client],
    show: Callable[[ViewState], None],
    check_alive: Callable[[], None] = lambda: None,
    refresh_s: float = 0.5,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> ReplayResult:
    """Run the replay for ``duration_s`` seconds of ``clock`` and return what happened.

    ``check_alive`` is called every refresh and should raise if a process the demo needs has
    died.  A job the API refuses (e.g. an impossible gang) is an event, not a failure, and so
    is a submission that got no answer (the replica it went to was lost mid-request; it is
    not sent again, which could run it twice).  A poll that no server answers raises
    :class:`UnavailableError`.
    """
    pending: deque[DemoJob] = deque(workload.jobs)
    events: deque[str] = deque(maxlen=50)
    states: dict[str, str] = {}
    samples: list[float] = []
    outcomes: Counter[str] = Counter()
    start = clock()
    while True:
        elapsed = clock() - start
        while pending and pending[0].at_s <= elapsed:
            outcomes[_submit(pending.popleft(), members, events)] += 1
        check_alive()
        stats = admin.stats()
        samples.append(stats.utilization)
        states, changes = job_events(states, admin.jobs(limit=_JOBS_PAGE))
        events.extend(changes)
        show(
            ViewState(
                fabric=fabric_name,
                elapsed_s=elapsed,
                duration_s=duration_s,
                submitted=outcomes["submitted"],
                to_submit=len(workload.jobs),
                stats=stats,
                sites=tuple(admin.sites()),
                events=tuple(events),
            )
        )
        if elapsed >= duration_s:
            break
        next_due = pending[0].at_s - elapsed if pending else refresh_s
        sleep(max(0.0, min(refresh_s, next_due, duration_s - elapsed)))
    return ReplayResult(
        submitted=outcomes["submitted"],
        rejected=outcomes["refused"],
        unanswered=outcomes["unanswered"],
        mean_utilization=sum(samples) / len(samples) if samples else None,
        stats=admin.stats(),
    )


_Outcome = Literal["submitted", "refused", "unanswered"]


def _submit(job: DemoJob, members: Mapping[str, Client], events: deque[str]) -> _Outcome:
    client = members.get(job.team)
    if client is None:
        events.append(f"skipped   {job.name}: no member token for team {job.team}")
        return "refused"
    body = JobSubmit(
        name=job.name,
        team=job.team,
        gpus=job.gpus,
        duration_s=max(job.run_s, 0.1),
        command=job.command,
    )
    try:
        client.submit(body)
    except ValidationError as exc:
        events.append(f"refused   {job.name} [{job.team}] {job.gpus} GPUs: {exc.message}")
        return "refused"
    except UnavailableError as exc:
        events.append(f"no answer {job.name} [{job.team}]: {exc.message}")
        return "unanswered"
    events.append(f"submitted {job.name} [{job.team}] {job.gpus} GPUs, {job.run_s:.0f}s")
    return "submitted"
