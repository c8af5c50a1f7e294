"""Attempts waiting for their dataset: each of a job that names a registered dataset waits,
unhanded to its agent, until its site holds a complete replica of the version chosen for it.

The reconcile loop looks at every waiting attempt (:meth:`Staging.staging_attempts`): it
marks the attempt ready with its replica's directory (:meth:`Staging.data_ready`), or starts
the transfer that brings the data and waits for it (:meth:`Staging.data_waits`, which also
keeps the job's ``reason`` showing the progress), or fails the run when the data cannot come
(:meth:`Staging.data_failed`: the job fails with the reason, as for an order no site can run).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from onecluster.model import AttemptState
from onecluster.store._tables import AttemptRow, JobRow, ReplicaRow
from onecluster.store._transactions import Transactions
from onecluster.store._transitions import end_attempt, event, lock_jobs, settle_job

__all__ = ["Staging", "StagingAttempt"]

#: How a job's ``reason`` begins while one of its attempts waits for its dataset.
WAITING_FOR_DATA = "waiting for data"


@dataclass(frozen=True, slots=True)
class StagingAttempt:
    """An attempt waiting for ``dataset`` at ``site``; ``data_wait`` is the transfer bringing
    it (or the mark that nobody looked yet)."""

    attempt_id: str
    job_id: str
    site: str
    dataset: str
    data_wait: str


class Staging(Transactions):
    """The staging of attempts' datasets (mixed into :class:`~onecluster.store.Store`)."""

    def staging_attempts(self) -> list[StagingAttempt]:
        """Every attempt that is starting and waits for its dataset."""

        def work(s: Session) -> list[StagingAttempt]:
            rows = s.execute(
                select(AttemptRow, JobRow.dataset)
                .join(JobRow, JobRow.id == AttemptRow.job_id)
                .where(
                    AttemptRow.data_wait.is_not(None),
                    AttemptRow.state == AttemptState.STARTING.value,
                )
                .order_by(AttemptRow.started_at, AttemptRow.id)
            )
            return [
                StagingAttempt(a.id, a.job_id, a.site, dataset or "", a.data_wait or "")
                for a, dataset in rows
            ]

        return self._read(work)

    def replica_path(self, dataset: str, root: str, site: str) -> str | None:
        """Where ``site`` holds all of version ``root`` of ``dataset`` (``None``: it does not)."""

        def work(s: Session) -> str | None:
            row = s.get(ReplicaRow, (dataset, root, site))
            return row.path if row is not None and row.state == "complete" else None

        return self._read(work)

    def data_ready(self, attempt_id: str, dataset_dir: str, *, now: float) -> None:
        """The attempt's dataset is at its site, in ``dataset_dir``: hand it out."""

        def work(s: Session) -> None:
            attempt, job = _locked(s, attempt_id)
            if attempt is None or attempt.data_wait is None:
                return
            attempt.data_wait = None
            attempt.dataset_dir = dataset_dir
            attempt.data_ready_at = now
            if (job.reason or "").startswith(WAITING_FOR_DATA):
                job.reason = None
            event(
                s,
                now,
                "data_ready",
                f"job {job.id}: {job.dataset} is at {attempt.site} ({dataset_dir}); starting",
                job.id,
            )

        self._run(work)

    def data_waits(self, attempt_id: str, transfer_id: str, reason: str, *, now: float) -> None:
        """The attempt waits for transfer ``transfer_id``; its job says why in ``reason``."""

        def work(s: Session) -> None:
            attempt, job = _locked(s, attempt_id)
            if attempt is None or attempt.data_wait is None:
                return
            if attempt.data_wait != transfer_id:
                event(s, now, "data_staging", f"job {job.id}: {reason}", job.id)
            attempt.data_wait = transfer_id
            if job.reason != reason:
                job.reason = reason

        self._run(work)

    def data_failed(self, attempt_id: str, message: str, *, now: float) -> None:
        """The attempt's dataset cannot come to its site: the run ends and the job fails
        with ``message`` (no site would fare better with data that cannot be moved)."""

        def work(s: Session) -> None:
            attempt, job = _locked(s, attempt_id)
            if attempt is None or attempt.data_wait is None:
                return
            attempt.data_wait = None
            end_attempt(attempt, AttemptState.EXITED, None, now)
            attempt.stop_reason = message
            settle_job(s, job, now)

        self._run(work)


def _locked(s: Session, attempt_id: str) -> tuple[AttemptRow | None, JobRow]:
    """The attempt (``None`` unless it still starts) with its job, the job locked first."""
    attempt = s.get(AttemptRow, attempt_id)
    if attempt is None:
        return None, JobRow()
    job = lock_jobs(s, [attempt.job_id])[attempt.job_id]
    s.refresh(attempt, with_for_update=True)
    if attempt.state != AttemptState.STARTING.value:
        return None, job
    return attempt, job
