"""Agent syncs and lost sites, each applied inside the caller's transaction.

A sync is level-triggered and idempotent: reports about attempts that already ended, that
the server does not know, or that belong to another site change nothing; a log chunk that
was stored before is not stored twice.  The answer is always the full desired set.

An attempt ends only on what its agent says of it (exited, lost, refused), when its site's
lease runs out unrenewed (:func:`expire_site`), or when it was never started in
``START_TIMEOUT_S``: a sync that does not mention an attempt says nothing about it.  Every
sync renews the site's lease for ``lease_s``; the length granted is stored with the site, so
a server restarted with a shorter setting still honours what it granted.
"""

from __future__ import annotations

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from onecluster.errors import ConflictError
from onecluster.model import AttemptState, JobState
from onecluster.store._convert import site_parts
from onecluster.store._records import AgentReport, Assignment, GangMember, LogChunk, SyncReport
from onecluster.store._tables import AgentRow, AttemptRow, JobRow, LogRow
from onecluster.store._transitions import (
    ACTIVE,
    active_attempts_at,
    end_attempt,
    event,
    lock_jobs,
    settle_job,
)

__all__ = ["DEFAULT_LEASE_S", "START_TIMEOUT_S", "expire_site", "record_sync"]

#: How many replaced agent ids a site remembers (their syncs are refused).
_REPLACED_KEPT = 16

#: How a job's ``reason`` begins while the site's cluster manager queues it.
_QUEUED = "queued by the cluster manager at "

#: How long an attempt may wait for its agent to start it before it counts as lost.
START_TIMEOUT_S = 120.0

#: The lease a sync grants unless the server says otherwise (``onecluster server --lease``):
#: long enough for running jobs to outlive an outage of the whole control plane of about
#: 14 minutes (``docs/architecture.md``; decisions 166 and 193).  A silent site takes no new
#: work after 30 s whatever the lease (``server/_views.py``, ``SILENT_S``).
DEFAULT_LEASE_S = 900.0


def record_sync(
    session: Session, site: str, report: SyncReport, now: float, *, lease_s: float
) -> list[Assignment]:
    """Record one sync of ``site``'s agent, renew its lease for ``lease_s`` from ``now``, and
    return the attempts wanted there (handing the new ones to this agent)."""
    agent = session.get(AgentRow, site, with_for_update=True)
    if agent is None:
        agent = AgentRow(
            site=site,
            agent_id=report.agent_id,
            backend=report.backend,
            last_heartbeat=now,
            capacity=dict(report.capacity),
            down=False,
            problem=None,
            lease_s=lease_s,
        )
        session.add(agent)
        event(session, now, "site_up", f"site {site} is up (agent {report.agent_id})")
    else:
        if agent.agent_id != report.agent_id:
            _replace_agent(session, agent, report.agent_id, now)
        if agent.down:
            event(session, now, "site_up", f"site {site} is back (agent {report.agent_id})")
        agent.agent_id = report.agent_id
        agent.backend = report.backend
        agent.last_heartbeat = now
        agent.capacity = dict(report.capacity)
        agent.down = False
        agent.lease_s = lease_s
    _note_problem(session, agent, report.problem, now)

    reported = {r.attempt_id: r for r in report.attempts}
    # Lock the jobs first, then (re)read their attempts: every attempt change happens under
    # its job's lock, so what is read after the lock is current.
    jobs = lock_jobs(session, session.scalars(_job_ids_of(site, list(reported))))
    known = {
        a.id: a
        for a in session.scalars(
            select(AttemptRow)
            .where(AttemptRow.job_id.in_(sorted(jobs)), AttemptRow.site == site)
            .execution_options(populate_existing=True)
        )
    }
    touched: set[str] = set()
    # What was handed to a replaced agent whose lease may still run is not taken as lost yet.
    held_elsewhere = agent.replaced_until is not None and now <= agent.replaced_until
    for attempt in known.values():
        report_of = reported.get(attempt.id)
        if (
            held_elsewhere
            and report_of is not None
            and report_of.state == "lost"
            and attempt.handed_to not in (None, report.agent_id)
        ):
            continue
        if _apply(attempt, jobs[attempt.job_id], report_of, now):
            touched.add(attempt.job_id)
    for job_id in sorted(touched):
        settle_job(session, jobs[job_id], now)
    _append_logs(session, site, report.logs)
    return desired(session, site, jobs, agent_id=report.agent_id)


def _replace_agent(session: Session, agent: AgentRow, agent_id: str, now: float) -> None:
    """Let ``agent_id`` take ``agent``'s site over (a restarted agent, or a second one), unless
    it is an agent the site replaced before: :class:`ConflictError`, nothing recorded — it
    stops its attempts when its own lease runs out."""
    if agent_id in agent.replaced:
        msg = (
            f"site {agent.site} is run by agent {agent.agent_id} now; this agent ({agent_id}) "
            "was replaced by it"
        )
        raise ConflictError(msg, hint="stop this agent: one agent runs a site")
    if not agent.down:
        until = agent.last_heartbeat + agent.lease_s
        agent.replaced_until = max(agent.replaced_until or until, until)
    agent.replaced = [*agent.replaced[-(_REPLACED_KEPT - 1) :], agent.agent_id]
    event(
        session,
        now,
        "site_agent_replaced",
        f"site {agent.site}: agent {agent_id} replaces agent {agent.agent_id}; what that one "
        "ran is given up once its lease ends",
    )


def _job_ids_of(site: str, attempt_ids: list[str]) -> Select[str]:
    """Jobs with an active attempt at ``site`` or with one of ``attempt_ids`` there."""
    mine = AttemptRow.state.in_(ACTIVE) | AttemptRow.id.in_(attempt_ids)
    return select(AttemptRow.job_id).where(AttemptRow.site == site, mine).distinct()


def _note_problem(session: Session, agent: AgentRow, problem: str | None, now: float) -> None:
    """Record (and announce, on change) that the site's cluster cannot take work, or can again."""
    problem = problem[:2000] if problem else None
    if problem == agent.problem:
        return
    if problem is not None and agent.problem is None:
        event(session, now, "site_degraded", f"site {agent.site} is degraded: {problem}")
    elif problem is None:
        event(session, now, "site_recovered", f"site {agent.site} takes work again")
    agent.problem = problem


def _apply(attempt: AttemptRow, job: JobRow, report: AgentReport | None, now: float) -> bool:
    """Apply one report to one attempt; whether its job may need settling."""
    state = AttemptState(attempt.state)
    if state in (AttemptState.EXITED, AttemptState.LOST):
        return False
    if report is not None:
        _note_times(attempt, job, report, now)
    if report is None:
        since = attempt.data_ready_at or attempt.started_at
        waiting = attempt.data_wait is not None  # never handed out: its dataset is not there
        if state is AttemptState.STARTING and not waiting and now - since > START_TIMEOUT_S:
            # The agent keeps refusing to start it (no such GPUs or slots there): give the
            # job back to the scheduler rather than let it wait at this site forever.
            end_attempt(attempt, AttemptState.LOST, None, now)
            return True
        return False
    if report.state == "running":
        if state is AttemptState.STARTING and not report.queued:
            attempt.state = AttemptState.RUNNING
        return False
    if report.state == "exited":
        end_attempt(attempt, AttemptState.EXITED, report.exit_code, now)
    elif report.state == "refused":
        # Not the job's own failure, but no site would run the order either: it fails with
        # the agent's reason rather than go round the sites.
        end_attempt(attempt, AttemptState.EXITED, None, now)
        attempt.stop_reason = f"refused by the agent: {report.reason or 'no reason given'}"
    else:
        end_attempt(attempt, AttemptState.LOST, None, now)
    return True


def _note_times(attempt: AttemptRow, job: JobRow, report: AgentReport, now: float) -> None:
    """Keep when the attempt really ran (inside onecluster's own span of it) and, while the
    site's cluster manager queues it, when that expects to start it."""
    if report.started_at is not None and attempt.ran_from is None and not report.queued:
        attempt.ran_from = min(max(report.started_at, attempt.started_at), now)
    if report.finished_at is not None and attempt.ran_from is not None:
        attempt.ran_until = min(max(report.finished_at, attempt.ran_from), now)
    if report.queued and report.state == "running":
        job.expected_start_at = report.expected_start_at
        where = _QUEUED + attempt.site
        job.reason = f"{where}: {report.waiting_reason}" if report.waiting_reason else where
        return
    job.expected_start_at = None
    if (job.reason or "").startswith(_QUEUED):
        job.reason = None


def _append_logs(session: Session, site: str, chunks: tuple[LogChunk, ...]) -> None:
    """Store new log text once: the part of a chunk below the attempt's stored size is skipped."""
    if not chunks:
        return
    ids = sorted({c.attempt_id for c in chunks})
    attempts = {
        a.id: a
        for a in session.scalars(select(AttemptRow).where(AttemptRow.id.in_(ids)))
        if a.site == site
    }
    jobs = {
        j.id: j
        for j in session.scalars(
            select(JobRow).where(JobRow.id.in_(sorted({a.job_id for a in attempts.values()})))
        )
    }
    for chunk in sorted(chunks, key=lambda c: (c.attempt_id, c.offset)):
        attempt = attempts.get(chunk.attempt_id)
        if attempt is None:
            continue
        skip = attempt.log_size - chunk.offset
        data = chunk.data[skip:] if skip > 0 else chunk.data
        if not data:
            continue
        job = jobs[attempt.job_id]
        session.add(
            LogRow(
                job_id=job.id, attempt_id=attempt.id, offset=job.log_size, size=len(data), data=data
            )
        )
        attempt.log_size = max(attempt.log_size, chunk.offset) + len(data)
        job.log_size += len(data)


def desired(
    session: Session, site: str, jobs: dict[str, JobRow], *, agent_id: str
) -> list[Assignment]:
    """The attempts wanted at ``site``: active ones run, stopping ones stop.  Attempts not
    yet handed to an agent are handed to ``agent_id`` (only it may start them)."""
    # An attempt still waiting for its dataset is not handed out; a stop of one is (the
    # agent, which never had it, reports it lost).
    wanted = [
        a
        for a in active_attempts_at(session, site)
        if a.data_wait is None or a.state == AttemptState.STOPPING
    ]
    for attempt in wanted:
        if attempt.handed_to is None:
            attempt.handed_to = agent_id
    missing = {a.job_id for a in wanted} - set(jobs)
    if missing:
        jobs = {
            **jobs,
            **{
                j.id: j
                for j in session.scalars(select(JobRow).where(JobRow.id.in_(sorted(missing))))
            },
        }
    gangs = _gangs(session, {a.job_id: jobs[a.job_id] for a in wanted})
    return [
        Assignment(
            attempt_id=a.id,
            job_id=a.job_id,
            site=site,
            action="stop" if a.state == AttemptState.STOPPING else "run",
            command=tuple(jobs[a.job_id].command),
            gpu_type=a.gpu_type,
            gpus=a.gpus,
            reason=a.stop_reason,
            handed_to=a.handed_to,
            workdir=jobs[a.job_id].workdir,
            dataset_dir=a.dataset_dir,
            gang=_gang_with(gangs[a.job_id], a),
            checkpoint_interval_s=jobs[a.job_id].checkpoint_interval_s,
        )
        for a in wanted
    ]


def _gangs(session: Session, jobs: dict[str, JobRow]) -> dict[str, tuple[GangMember, ...]]:
    """Each job's parts in part order (the site ranks), each with the address its site's agent
    announced for traffic from other sites (``None`` while it announced none)."""
    parts = {job_id: site_parts(job.parts) for job_id, job in jobs.items()}
    sites = sorted({p.site for job_parts in parts.values() for p in job_parts})
    addresses: dict[str, str | None] = {}
    if sites:
        rows = session.execute(
            select(AgentRow.site, AgentRow.data_address).where(AgentRow.site.in_(sites))
        )
        addresses = {site: address for site, address in rows}
    return {
        job_id: tuple(
            GangMember(site=p.site, address=addresses.get(p.site), gpus=p.gpus) for p in job_parts
        )
        for job_id, job_parts in parts.items()
    }


def _gang_with(gang: tuple[GangMember, ...], attempt: AttemptRow) -> tuple[GangMember, ...]:
    """``gang``, unless it lacks the attempt's own site (a run the job's parts no longer
    describe): then ``()``, a gang of the attempt alone — never a rank that is not its own."""
    return gang if any(m.site == attempt.site for m in gang) else ()


def expire_site(session: Session, site: str, now: float) -> bool:
    """Mark ``site`` down and its active attempts lost (their jobs are requeued), if its lease
    has run out at ``now`` — checked again under the site's lock, so a sync that renewed it
    meanwhile wins.  Returns whether the site was expired."""
    agent = session.get(AgentRow, site, with_for_update=True, populate_existing=True)
    if agent is None or agent.down or agent.last_heartbeat + agent.lease_s >= now:
        return False
    agent.down = True
    lost = active_attempts_at(session, site)
    jobs = lock_jobs(session, {a.job_id for a in lost})
    for attempt in lost:
        end_attempt(attempt, AttemptState.LOST, None, now)
    for job_id in sorted(jobs):
        if jobs[job_id].state != JobState.PENDING:
            settle_job(session, jobs[job_id], now)
    event(
        session,
        now,
        "site_down",
        f"site {site} is down: its lease of {agent.lease_s:g} s ran out unrenewed; "
        f"{len(lost)} attempts lost",
    )
    return True
