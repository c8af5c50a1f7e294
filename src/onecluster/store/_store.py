"""The :class:`Store`: the one repository the server reads and changes state through."""

from __future__ import annotations

import secrets
import time
import uuid
from collections.abc import Sequence

from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session

from onecluster.errors import ConflictError, NotFoundError
from onecluster.model import TERMINAL_STATES, AttemptRecord, JobRecord, JobSpec, JobState
from onecluster.store._convert import attempt_record, job_record, site_record
from onecluster.store._data import DataStore
from onecluster.store._engine import make_engine, migrate
from onecluster.store._events import EventValues, record_events
from onecluster.store._fabrics import Fabrics
from onecluster.store._leadership import Leadership
from onecluster.store._link_carry import LinkCarries
from onecluster.store._records import (
    Assignment,
    EventRecord,
    PreemptOrder,
    SiteRecord,
    StartOrder,
    SyncReport,
    TokenRecord,
)
from onecluster.store._register_rows import RegisterRows
from onecluster.store._sync import DEFAULT_LEASE_S, expire_site, record_sync
from onecluster.store._tables import AgentRow, AttemptRow, Base, EventRow, JobRow, LogRow, TokenRow
from onecluster.store._transitions import (
    ACTIVE,
    PENDING_CHANGED,
    event,
    lock_jobs,
    preempt,
    start,
    stop_run,
)
from onecluster.store._transitions import settle_job as _settle

__all__ = ["Store"]


class Store(DataStore, Leadership, Fabrics, LinkCarries, RegisterRows):
    """Jobs, attempts, tokens, sites, logs and events in one SQL database, and the datasets,
    scans, transfers and replicas of :class:`DataStore`.

    Every method is one transaction: a job's state changes together with its attempts and
    an event, or not at all.  Methods are thread-safe (one session per call).  Database
    outages surface as :class:`UnavailableError`; unknown ids as :class:`NotFoundError`.
    """

    @classmethod
    def open(cls, url: str) -> Store:
        """Connect to ``url`` and bring its schema to the newest version."""
        engine = make_engine(url)
        migrate(engine)
        return cls(engine)

    # -- jobs -----------------------------------------------------------------------------

    def add_job(self, spec: JobSpec, *, now: float) -> JobRecord:
        """Store a newly submitted job as pending and return it with its new id."""
        return self.add_jobs([spec], now=now)[0]

    def add_jobs(self, specs: Sequence[JobSpec], *, now: float) -> list[JobRecord]:
        """Store several submitted jobs in one transaction (group commit); all or none."""
        records = [_new_job(spec, now) for spec in specs]
        if not records:
            return records
        rows = [
            {
                **{f: getattr(r, f) for f in _JOB_SCALARS},
                "state": r.state.value,
                "priority": int(r.priority),
                "gpu_types": list(r.gpu_types),
                "command": list(r.command),
                "parts": [],
                "log_size": 0,
            }
            for r in records
        ]
        events: list[EventValues] = [
            {
                "time": now,
                "kind": "submitted",
                "job_id": r.id,
                "message": f"job {r.id} submitted by team {r.team}",
            }
            for r in records
        ]

        def work(s: Session) -> list[JobRecord]:
            # Core inserts: submission is the API's hottest write path.  The events go in at
            # commit, in commit order, as every event does.
            s.connection().execute(insert(_JOBS), rows)
            record_events(s, events)
            return records

        return self._run(work)

    def job(self, job_id: str) -> JobRecord:
        """The job ``job_id``; :class:`NotFoundError` if there is none."""
        return self._read(lambda s: job_record(_get_job(s, job_id)))

    def jobs(
        self,
        *,
        state: str | None = None,
        team: str | None = None,
        site: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[JobRecord]:
        """Jobs, newest first, filtered by state, team and the site of any of their attempts."""
        query = select(JobRow)
        if state is not None:
            query = query.where(JobRow.state == state)
        if team is not None:
            query = query.where(JobRow.team == team)
        if site is not None:
            ran_there = select(AttemptRow.job_id).where(AttemptRow.site == site)
            query = query.where(JobRow.id.in_(ran_there))
        query = query.order_by(JobRow.submitted_at.desc(), JobRow.id.desc())
        query = query.limit(limit).offset(offset)
        return self._read(lambda s: [job_record(r) for r in s.scalars(query)])

    def pending_jobs(self) -> list[JobRecord]:
        """Every pending job, oldest first."""
        query = select(JobRow).where(JobRow.state == JobState.PENDING)
        query = query.order_by(JobRow.submitted_at, JobRow.id)
        return self._read(lambda s: [job_record(r) for r in s.scalars(query)])

    def running_jobs(self) -> list[tuple[JobRecord, list[AttemptRecord]]]:
        """Jobs whose current run holds GPUs, each with its active attempts."""

        def work(s: Session) -> list[tuple[JobRecord, list[AttemptRecord]]]:
            attempts = list(s.scalars(select(AttemptRow).where(AttemptRow.state.in_(ACTIVE))))
            by_job: dict[str, list[AttemptRecord]] = {}
            for a in attempts:
                by_job.setdefault(a.job_id, []).append(attempt_record(a))
            rows = s.scalars(select(JobRow).where(JobRow.id.in_(sorted(by_job))))
            return [(job_record(r), by_job[r.id]) for r in rows]

        return self._read(work)

    def attempts(self, job_id: str) -> list[AttemptRecord]:
        """Every attempt of ``job_id``, oldest run first."""
        query = select(AttemptRow).where(AttemptRow.job_id == job_id)
        query = query.order_by(AttemptRow.run, AttemptRow.id)
        return self._read(lambda s: [attempt_record(a) for a in s.scalars(query)])

    def cancel_job(self, job_id: str, *, now: float) -> JobRecord:
        """Cancel a job: a pending one at once, a running one once its attempts exit.

        Raises :class:`ConflictError` for a job that already ended.
        """

        def work(s: Session) -> JobRecord:
            job = _get_job(s, job_id, lock=True)
            if job.state in TERMINAL_STATES:
                msg = f"job {job_id} already ended ({job.state}); there is nothing to cancel"
                raise ConflictError(msg)
            if job.state == JobState.PENDING:
                s.info[PENDING_CHANGED] = True
                job.state = JobState.CANCELLED
                job.finished_at = now
                job.reason = "cancelled before it started"
                event(s, now, "cancelled", f"job {job_id} cancelled while pending", job_id)
            elif job.state != JobState.CANCELLING:
                job.state = JobState.CANCELLING
                job.reason = "cancelled"
                stop_run(s, job, "cancelled", now)
                event(s, now, "cancelling", f"job {job_id} is being cancelled", job_id)
                _settle(s, job, now)
            return job_record(job)

        return self._run(work)

    def apply_plan(
        self, starts: Sequence[StartOrder], preemptions: Sequence[PreemptOrder], *, now: float
    ) -> tuple[int, int]:
        """Apply a scheduling pass in one transaction; returns (started, preempted).

        A start for a job that is no longer pending, or a preemption of a job no longer
        running (it was cancelled meanwhile), is skipped.
        """

        def work(s: Session) -> tuple[int, int]:
            jobs = lock_jobs(s, [o.job_id for o in starts] + [o.job_id for o in preemptions])
            started = sum(start(s, jobs[o.job_id], o, now) for o in starts if o.job_id in jobs)
            stopped = sum(
                preempt(s, jobs[o.job_id], o.reason, now) for o in preemptions if o.job_id in jobs
            )
            return started, stopped

        return self._run(work)

    # -- sites and agents -----------------------------------------------------------------

    def sync(
        self, site: str, report: SyncReport, *, now: float, lease_s: float = DEFAULT_LEASE_S
    ) -> list[Assignment]:
        """Record an agent sync of ``site`` and renew its lease for ``lease_s``; returns the
        attempts wanted there.  Only a committed sync grants the lease: a database that cannot
        be written grants nothing (:class:`UnavailableError`)."""
        return self._run(lambda s: record_sync(s, site, report, now, lease_s=lease_s))

    def sites(self) -> list[SiteRecord]:
        """Every site whose agent has synced at least once."""
        return self._read(lambda s: [site_record(r) for r in s.scalars(select(AgentRow))])

    def expire_sites(self, *, now: float) -> list[str]:
        """Mark sites whose lease has run out unrenewed down; returns their names.

        The lease is the one granted with the site's last sync (``SiteRecord.lease_s``), not
        the server's setting now.  Their active attempts are lost and their jobs requeued, in
        the same transaction; a site whose agent synced meanwhile is left alone.
        """

        def work(s: Session) -> list[str]:
            stale = select(AgentRow.site).where(
                AgentRow.down.is_(False), AgentRow.last_heartbeat + AgentRow.lease_s < now
            )
            return [site for site in sorted(s.scalars(stale)) if expire_site(s, site, now)]

        return self._run(work)

    # -- logs and events ------------------------------------------------------------------

    def logs(self, job_id: str, offset: int = 0, limit: int = 1 << 20) -> tuple[int, str]:
        """A job's log from character ``offset`` (at most ``limit`` characters).

        Returns ``(next_offset, text)``; :class:`NotFoundError` for an unknown job.
        """

        def work(s: Session) -> tuple[int, str]:
            _get_job(s, job_id)
            rows = s.scalars(
                select(LogRow)
                .where(LogRow.job_id == job_id, LogRow.offset + LogRow.size > offset)
                .order_by(LogRow.offset)
            )
            text = "".join(r.data[max(0, offset - r.offset) :] for r in rows)[:limit]
            return offset + len(text), text

        return self._read(work)

    def events(
        self,
        *,
        job_id: str | None = None,
        kind_prefix: str | None = None,
        after: int | None = None,
        limit: int = 100,
    ) -> list[EventRecord]:
        """Events oldest first: the newest ``limit`` of them, or with ``after`` the first
        ``limit`` whose id is greater (to follow the stream); of one job when ``job_id`` is
        given, of the kinds starting with ``kind_prefix`` when that is.

        The stream is gap-free: events are committed in id order (see
        :mod:`onecluster.store._events`), so a follower that asks again with the last id it
        got as ``after`` sees every event committed after it, each once, in id order."""
        query = select(EventRow)
        if job_id is not None:
            query = query.where(EventRow.job_id == job_id)
        if kind_prefix is not None:
            query = query.where(EventRow.kind.startswith(kind_prefix, autoescape=True))
        if after is not None:
            query = query.where(EventRow.id > after).order_by(EventRow.id).limit(limit)
        else:
            query = query.order_by(EventRow.id.desc()).limit(limit)

        def work(s: Session) -> list[EventRecord]:
            rows = sorted(s.scalars(query), key=lambda r: r.id)
            return [
                EventRecord(time=r.time, kind=r.kind, job_id=r.job_id, message=r.message, id=r.id)
                for r in rows
            ]

        return self._read(work)

    def add_events(self, events: Sequence[tuple[str, str]], *, now: float) -> None:
        """Record ``(kind, message)`` events that concern no job, in one transaction."""
        if not events:
            return

        def work(s: Session) -> None:
            for kind, message in events:
                event(s, now, kind, message)

        self._run(work)

    # -- statistics and usage -------------------------------------------------------------

    def job_counts(self) -> dict[JobState, int]:
        """Jobs per state (every state present, zero included)."""
        query = select(JobRow.state, func.count()).group_by(JobRow.state)

        def work(s: Session) -> dict[JobState, int]:
            counts = dict.fromkeys(JobState, 0)
            for state, n in s.execute(query):
                counts[JobState(state)] = n
            return counts

        return self._read(work)

    def total_preemptions(self) -> int:
        """Preemptions over every job."""
        query = select(func.coalesce(func.sum(JobRow.preemptions), 0))
        return self._read(lambda s: int(s.execute(query).scalar_one()))

    def waits(self) -> list[float]:
        """Seconds from queueing to start of every run that started."""
        query = select(AttemptRow.waited_s).group_by(
            AttemptRow.job_id, AttemptRow.run, AttemptRow.waited_s
        )
        return self._read(lambda s: [float(w) for w in s.scalars(query)])

    def pending_by_team(self) -> dict[str, int]:
        """Pending jobs per team."""
        query = select(JobRow.team, func.count()).where(JobRow.state == JobState.PENDING)
        query = query.group_by(JobRow.team)
        return self._read(lambda s: {team: int(n) for team, n in s.execute(query)})

    def usage(self, start: float, end: float) -> list[tuple[AttemptRecord, JobRecord]]:
        """Attempts that held GPUs during [start, end), each with its job (its team, and
        its checkpoints for what a preemption lost).

        Attempts still active count up to ``finished_at = None`` (the caller clips).
        """
        query = (
            select(AttemptRow, JobRow)
            .join(JobRow, JobRow.id == AttemptRow.job_id)
            .where(AttemptRow.started_at < end)
            .where((AttemptRow.finished_at.is_(None)) | (AttemptRow.finished_at >= start))
            .order_by(AttemptRow.started_at, AttemptRow.id)
        )

        def work(s: Session) -> list[tuple[AttemptRecord, JobRecord]]:
            jobs: dict[str, JobRecord] = {}
            found = []
            for attempt, job in s.execute(query):
                if job.id not in jobs:
                    jobs[job.id] = job_record(job)
                found.append((attempt_record(attempt), jobs[job.id]))
            return found

        return self._read(work)

    # -- tokens ---------------------------------------------------------------------------

    def add_token(
        self,
        *,
        role: str,
        sha256: str,
        now: float,
        team: str | None = None,
        site: str | None = None,
        holder: str | None = None,
    ) -> TokenRecord:
        """Store a token by the SHA-256 of its secret (``holder``: who holds it)."""

        def work(s: Session) -> TokenRecord:
            row = TokenRow(
                id=uuid.uuid4().hex[:12],
                role=role,
                team=team,
                site=site,
                sha256=sha256,
                created_at=now,
                revoked=False,
                holder=holder,
            )
            s.add(row)
            return _token_record(row)

        return self._run(work)

    def token(self, sha256: str) -> TokenRecord | None:
        """The live (not revoked) token whose secret hashes to ``sha256``, or ``None``."""
        query = select(TokenRow).where(TokenRow.sha256 == sha256, TokenRow.revoked.is_(False))

        def work(s: Session) -> TokenRecord | None:
            row = s.scalars(query).first()
            return None if row is None else _token_record(row)

        return self._read(work)

    def has_admin_token(self) -> bool:
        """Whether a live admin token exists."""
        query = select(TokenRow.id).where(TokenRow.role == "admin", TokenRow.revoked.is_(False))
        return self._read(lambda s: s.scalars(query.limit(1)).first() is not None)

    def revoke_token(self, token_id: str) -> None:
        """Revoke token ``token_id``; :class:`NotFoundError` if there is none."""

        def work(s: Session) -> None:
            row = s.get(TokenRow, token_id)
            if row is None:
                msg = f"there is no token with id {token_id}"
                raise NotFoundError(msg)
            row.revoked = True

        self._run(work)


def _new_job(spec: JobSpec, now: float) -> JobRecord:
    return JobRecord(
        id=_new_job_id(),
        name=spec.name,
        team=spec.team,
        state=JobState.PENDING,
        gpus=spec.gpus,
        gpu_types=spec.gpu_types,
        duration_s=spec.duration_s,
        dataset=spec.dataset,
        dataset_bytes=spec.dataset_bytes,
        priority=spec.priority,
        preemptible=spec.preemptible,
        command=spec.command,
        max_sites=spec.max_sites,
        submitted_at=now,
        queued_at=now,
        started_at=None,
        finished_at=None,
        exit_code=None,
        reason=None,
        attempts=0,
        preemptions=0,
        borrowed=False,
        parts=(),
        workdir=spec.workdir,
        checkpoint_interval_s=spec.checkpoint_interval_s,
        checkpoint_on_sigterm=spec.checkpoint_on_sigterm,
    )


_JOBS = Base.metadata.tables["jobs"]

#: Job columns stored exactly as the record holds them.
_JOB_SCALARS = (
    "id",
    "name",
    "team",
    "gpus",
    "duration_s",
    "dataset",
    "dataset_bytes",
    "preemptible",
    "max_sites",
    "submitted_at",
    "queued_at",
    "started_at",
    "finished_at",
    "exit_code",
    "reason",
    "attempts",
    "preemptions",
    "borrowed",
    "workdir",
    "checkpoint_interval_s",
    "checkpoint_on_sigterm",
)


def _new_job_id() -> str:
    """A unique job id that sorts in creation order (wall-clock microseconds, then random),
    so that jobs submitted within the same (virtual) second still list in order."""
    return f"j-{time.time_ns() // 1000:013x}{secrets.token_hex(3)}"


def _get_job(s: Session, job_id: str, *, lock: bool = False) -> JobRow:
    row = s.get(JobRow, job_id, with_for_update=lock)
    if row is None:
        msg = f"there is no job {job_id}"
        raise NotFoundError(msg, hint="list jobs with `onecluster jobs`")
    return row


def _token_record(row: TokenRow) -> TokenRecord:
    return TokenRecord(
        id=row.id,
        role=row.role,
        team=row.team,
        site=row.site,
        created_at=row.created_at,
        revoked=row.revoked,
        holder=row.holder,
    )
