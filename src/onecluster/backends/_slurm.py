"""The Slurm backend: every attempt is a Slurm batch job on the site's cluster.

onecluster decides *which site*; the site's Slurm decides *which nodes*.  Each attempt is
submitted with ``sbatch`` as a job named ``oc-<attempt id>`` asking for ``--gres=gpu:<type>:N``
(the fabric's GPU type in lower case is the GRES type), ``--no-requeue`` (onecluster requeues
preempted work itself, so a job never runs twice), the attempt's environment on top of the
agent's plus ``ONECLUSTER_JOB_ID``, ``ONECLUSTER_ATTEMPT_ID`` and ``ONECLUSTER_SITE``, its
output in ``<work_dir>/attempts/<id>/output.log``.  ``attempt.json`` next to it records the
Slurm job id, so a restarted agent follows the jobs its predecessor submitted.

States come from ``squeue --states=all --json`` in one call per poll: pending, running and
completing jobs are *running* for onecluster (``started_at`` is Slurm's start time once the
job runs); completed and failed ones *exited* with Slurm's exit code; a job cancelled or
preempted by someone other than onecluster, or one the controller forgot, is *lost* (its job
is requeued, not failed).  Stopping sends SIGTERM to the job's steps and, after the grace,
cancels it.  Capacity is the GRES of the nodes that can run jobs (``sinfo --json``).

A pending job is *queued*: ``squeue``'s start time of a pending job is Slurm's own estimate
of when it will start (``expected_start_at``) and its state reason (``Resources``,
``Priority`` …) says why it waits.  ``started_at``/``finished_at`` are Slurm's times, which
the monthly report counts as the job's GPU-hours.

A controller that does not answer never stops the agent: ``poll`` returns the last statuses
it saw, ``start`` raises :class:`BackendError` at once (retried on the next sync), and
:meth:`problem` says why, so the agent reports the site *degraded* and the scheduler places
nothing more here.  While it is down, Slurm is asked again at most once a second and each
command gives up after 3 s, so a hung controller cannot stall the agent past its lease.  A
submission that timed out may have happened all the same: it is followed by its job name,
and only given up once Slurm answers without it.  When Slurm answers again the jobs are
followed where they are — none lost, none started twice.  A job Slurm refuses (``sbatch``
fails) also marks the site degraded, for a minute or until a submission succeeds.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from onecluster.backends._logs import read_chunk
from onecluster.backends._protocol import AttemptSpec, AttemptStatus, LogSlice
from onecluster.backends._slurm_cli import SlurmCli, SlurmJob, SlurmUnavailable
from onecluster.errors import BackendError, PlatformError
from onecluster.model import AttemptState

__all__ = ["SlurmBackend"]

_log = logging.getLogger("onecluster.backends.slurm")

_LOG = "output.log"
_RECORD = "attempt.json"
_SCRIPT = "run.sh"
_ACTIVE = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING"}
_FAILED = {"FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL", "DEADLINE"}
#: A job the controller does not list this soon after submission is not taken for lost.
_GRACE_UNLISTED_S = 30.0
_CAPACITY_TTL_S = 5.0
#: At most one ``squeue`` a second, however often the agent polls.
_MIN_POLL_S = 1.0
#: How long a refused submission keeps the site degraded (unless one succeeds first).
_REFUSED_FOR_S = 60.0
#: The Slurm job id of a submission that timed out, until ``squeue`` shows it by name.
_UNKNOWN_ID = 0


@dataclass(slots=True, kw_only=True)
class _Attempt:
    """What the backend remembers of one attempt (also its ``attempt.json``)."""

    attempt_id: str
    job_id: str
    slurm_job_id: int
    submitted_at: float
    stop_asked_at: float | None = None
    kill_at: float | None = None
    cancelled: bool = False


class SlurmBackend:
    """A :class:`~onecluster.backends.ClusterBackend` on the site's Slurm cluster.

    ``gpu_types`` are the site's GPU types as the fabric names them (``H800``); the GRES type
    of each is its lower-case name.  ``environ`` is the agent's environment, which jobs get
    beneath their own.  Not thread-safe: one owner (the agent) calls it.
    """

    def __init__(
        self,
        site: str,
        *,
        slurm_conf: Path,
        work_dir: Path,
        gpu_types: Sequence[str],
        environ: Mapping[str, str] | None = None,
        cpus_per_gpu: int = 1,
        mem_per_gpu_mb: int = 256,
        cli: SlurmCli | None = None,
    ) -> None:
        self._site = site
        self._root = work_dir / "attempts"
        self._root.mkdir(parents=True, exist_ok=True)
        self._types = {t.lower(): t for t in gpu_types}
        # jobs get the agent's environment beneath their own, as local ones do
        self._environ = dict(os.environ if environ is None else environ)
        self._cpus_per_gpu = cpus_per_gpu
        self._mem_per_gpu_mb = mem_per_gpu_mb
        self._cli = cli or SlurmCli(slurm_conf, environ=self._environ)
        self._attempts: dict[str, _Attempt] = {}
        self._last: dict[str, AttemptStatus] = {}
        self._capacity: dict[str, int] = {}
        self._capacity_at = float("-inf")
        self._polled_at = float("-inf")
        self.healthy = True
        self._down_reason = ""
        self._refused: tuple[float, str] | None = None
        self._recover()

    @property
    def name(self) -> str:
        """``slurm``."""
        return "slurm"

    # -- attempts ---------------------------------------------------------------------------

    def start(self, attempt: AttemptSpec) -> None:
        """Submit ``attempt`` as a batch job unless it is already known."""
        if attempt.attempt_id in self._attempts or attempt.attempt_id in self._last:
            return
        gres = attempt.gpu_type.lower()
        if gres not in self._types:
            msg = f"site {self._site} has no {attempt.gpu_type} GPUs in its Slurm cluster"
            raise BackendError(msg)
        if not self.healthy:
            msg = f"Slurm of site {self._site} does not answer: {self._down_reason}"
            raise SlurmUnavailable(msg, hint="the attempt is submitted once Slurm answers")
        path = self._root / attempt.attempt_id
        path.mkdir(parents=True, exist_ok=True)
        script = path / _SCRIPT
        # the command as an argv (script arguments), never a shell string; exec: its exit
        # status is the job's, 127 when it cannot be found
        script.write_text('#!/bin/sh\nexec "$@"\n')
        script.chmod(0o755)
        env = {
            **self._environ,
            **attempt.env,
            "ONECLUSTER_JOB_ID": attempt.job_id,
            "ONECLUSTER_ATTEMPT_ID": attempt.attempt_id,
            "ONECLUSTER_SITE": self._site,
            "ONECLUSTER_SCRATCH": str(path),
        }
        argv = [
            f"--job-name={_job_name(attempt.attempt_id)}",
            f"--gres=gpu:{gres}:{attempt.gpus}",
            f"--cpus-per-task={self._cpus_per_gpu * attempt.gpus}",
            f"--mem={self._mem_per_gpu_mb * attempt.gpus}M",
            f"--output={path / _LOG}",
            f"--chdir={attempt.workdir or path}",
            "--no-requeue",
            "--export=ALL",
            str(script),
            *attempt.command,
        ]
        try:
            slurm_job_id = self._cli.submit(argv, env=env)
        except SlurmUnavailable as exc:
            self._mark_down(exc)
            if not exc.maybe_done:
                raise
            # sbatch timed out: the job may exist; follow it by name (poll) rather than risk
            # submitting it twice
            slurm_job_id = _UNKNOWN_ID
        except BackendError as exc:
            self._refused = (time.monotonic(), exc.message)
            raise
        else:
            self._refused = None
        record = _Attempt(
            attempt_id=attempt.attempt_id,
            job_id=attempt.job_id,
            slurm_job_id=slurm_job_id,
            submitted_at=time.time(),
        )
        self._attempts[attempt.attempt_id] = record
        self._save(record)
        self._last[attempt.attempt_id] = AttemptStatus(
            attempt_id=attempt.attempt_id, job_id=attempt.job_id, state=AttemptState.RUNNING
        )
        if slurm_job_id == _UNKNOWN_ID:
            _log.warning(
                "submitting attempt %s timed out; following it by name", attempt.attempt_id
            )
        else:
            _log.info("attempt %s is Slurm job %d", attempt.attempt_id, slurm_job_id)

    def stop(self, attempt_id: str, grace_s: float, reason: str) -> None:
        """SIGTERM the job's steps now (a pending job is cancelled at once); cancel it after
        ``grace_s`` if it still runs."""
        record = self._attempts.get(attempt_id)
        status = self._last.get(attempt_id)
        if record is None or status is None or status.state is not AttemptState.RUNNING:
            return
        if record.stop_asked_at is not None:
            return
        now = time.time()
        record.stop_asked_at, record.kill_at = now, now + grace_s
        self._save(record)
        try:
            if status.started_at is None:  # still pending: nothing to be graceful with
                self._cancel(record)
            else:
                self._cli.cancel(self._target(record), signal="TERM")
        except PlatformError as exc:
            _log.warning(
                "cannot stop Slurm job %d yet (%s): %s", record.slurm_job_id, reason, exc.message
            )

    def _cancel(self, record: _Attempt) -> None:
        self._cli.cancel(self._target(record))
        record.cancelled = True
        self._save(record)

    @staticmethod
    def _target(record: _Attempt) -> int | str:
        """The job to signal: its id, or its name while the id is unknown."""
        if record.slurm_job_id == _UNKNOWN_ID:
            return _job_name(record.attempt_id)
        return record.slurm_job_id

    def poll(self) -> list[AttemptStatus]:
        """Every attempt's status from one ``squeue`` call (the last known ones while the
        controller does not answer)."""
        if not self._attempts or time.monotonic() - self._polled_at < _MIN_POLL_S:
            return list(self._last.values())  # the agent polls between syncs: spare slurmctld
        self._polled_at = time.monotonic()
        try:
            listed = self._cli.jobs()
        except SlurmUnavailable as exc:
            self._mark_down(exc)
            return list(self._last.values())
        self._mark_up()
        jobs = {j.job_id: j for j in listed}
        named = {j.name: j for j in listed}
        now = time.time()
        for attempt_id, record in list(self._attempts.items()):
            if record.slurm_job_id == _UNKNOWN_ID:
                found = named.get(_job_name(attempt_id))
                if found is None and now - record.submitted_at >= _GRACE_UNLISTED_S:
                    # Slurm answers and never had it: the timed-out submission did not happen
                    _log.warning("attempt %s was never submitted; starting it afresh", attempt_id)
                    del self._attempts[attempt_id], self._last[attempt_id]
                    shutil.rmtree(self._root / attempt_id, ignore_errors=True)
                    continue
                if found is not None:
                    record.slurm_job_id = found.job_id
                    self._save(record)
            status = self._status(record, jobs.get(record.slurm_job_id), now)
            self._last[attempt_id] = status
            overdue = record.kill_at is not None and now >= record.kill_at
            if status.state is AttemptState.RUNNING and overdue and not record.cancelled:
                try:
                    self._cancel(record)
                except PlatformError as exc:
                    _log.warning("cannot cancel Slurm job %d: %s", record.slurm_job_id, exc.message)
            if status.state is not AttemptState.RUNNING:
                del self._attempts[attempt_id]  # finished: nothing more to ask Slurm
        return list(self._last.values())

    def _status(self, record: _Attempt, job: SlurmJob | None, now: float) -> AttemptStatus:
        def status(state: AttemptState, code: int | None = None) -> AttemptStatus:
            started = float(job.start_time) if job is not None and job.start_time else None
            finished = (
                float(job.end_time)
                if job is not None and job.end_time and state is not AttemptState.RUNNING
                else None
            )
            return AttemptStatus(
                attempt_id=record.attempt_id,
                job_id=record.job_id,
                state=state,
                exit_code=code,
                started_at=started,
                finished_at=finished,
            )

        if job is None:
            if now - record.submitted_at < _GRACE_UNLISTED_S:
                return status(AttemptState.RUNNING)
            return status(AttemptState.LOST)  # the controller forgot it (purged, or reset)
        if job.state in _ACTIVE:
            if job.state == "PENDING":  # its start_time is Slurm's estimate, not a start
                return AttemptStatus(
                    attempt_id=record.attempt_id,
                    job_id=record.job_id,
                    state=AttemptState.RUNNING,
                    queued=True,
                    expected_start_at=float(job.start_time) if job.start_time else None,
                    waiting_reason=job.reason if job.reason not in ("", "None") else None,
                )
            return status(AttemptState.RUNNING)
        if job.state == "COMPLETED":
            return status(AttemptState.EXITED, job.exit_code)
        if job.state in _FAILED:
            return status(AttemptState.EXITED, job.exit_code or 1)  # 128 + N: killed by signal N
        if job.state == "CANCELLED" and record.stop_asked_at is not None:
            return status(AttemptState.EXITED, job.exit_code or 143)  # stopped as asked
        return status(AttemptState.LOST)  # cancelled or preempted by someone else: requeue

    def read_logs(self, attempt_id: str, offset: int = 0, limit: int = 65536) -> LogSlice:
        """The job's output file, as Slurm writes it."""
        status = self._last.get(attempt_id)
        final = status is not None and status.state is not AttemptState.RUNNING
        data, next_offset = read_chunk(self._root / attempt_id / _LOG, offset, limit, final=final)
        return LogSlice(attempt_id=attempt_id, offset=offset, next_offset=next_offset, data=data)

    def forget(self, attempt_id: str) -> None:
        """Drop a finished attempt and its files."""
        status = self._last.get(attempt_id)
        if status is None or status.state is AttemptState.RUNNING:
            return
        del self._last[attempt_id]
        shutil.rmtree(self._root / attempt_id, ignore_errors=True)

    def capacity(self) -> Mapping[str, int]:
        """GPUs per fabric type on the nodes that can run jobs (the last known while Slurm
        does not answer: the site is degraded then, see :meth:`problem`)."""
        now = time.monotonic()
        if now - self._capacity_at < _CAPACITY_TTL_S or not self.healthy:
            return dict(self._capacity)
        try:
            gres = self._cli.gpus()
        except SlurmUnavailable as exc:
            self._mark_down(exc)
            return dict(self._capacity)
        self._capacity = {self._types[t]: n for t, n in gres.items() if t in self._types}
        self._capacity_at = now
        return dict(self._capacity)

    def problem(self) -> str | None:
        """Why this site takes no work now: Slurm does not answer, or refused a job lately."""
        if not self.healthy:
            return f"Slurm does not answer: {self._down_reason}"
        if self._refused is not None:
            at, why = self._refused
            if time.monotonic() - at < _REFUSED_FOR_S:
                return f"Slurm refused a job: {why}"
            self._refused = None
        return None

    def _mark_down(self, exc: SlurmUnavailable) -> None:
        if self.healthy:
            _log.warning("Slurm of site %s does not answer: %s", self._site, exc.message)
        self.healthy = False
        self._down_reason = exc.message

    def _mark_up(self) -> None:
        if not self.healthy:
            _log.warning("Slurm of site %s answers again", self._site)
            self._capacity_at = float("-inf")  # read it afresh
        self.healthy = True
        self._down_reason = ""

    def close(self, grace_s: float = 5.0) -> None:
        """Cancel every job still running (best effort); idempotent."""
        del grace_s  # Slurm's KillWait is the grace of a cancel
        for record in list(self._attempts.values()):
            try:
                self._cancel(record)
            except PlatformError as exc:
                _log.warning("cannot cancel Slurm job %d: %s", record.slurm_job_id, exc.message)

    # -- records ----------------------------------------------------------------------------

    def _save(self, record: _Attempt) -> None:
        path = self._root / record.attempt_id / _RECORD
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"version": 1, **asdict(record)}))
        tmp.replace(path)

    def _recover(self) -> None:
        """Follow the jobs an earlier agent submitted (their records are on disk)."""
        for path in sorted(self._root.glob(f"*/{_RECORD}")):
            try:
                body = json.loads(path.read_text())
                body.pop("version", None)
                record = _Attempt(**body)
            except (OSError, ValueError, TypeError) as exc:
                _log.warning("ignoring the unreadable attempt record %s: %s", path, exc)
                continue
            self._attempts[record.attempt_id] = record
            self._last[record.attempt_id] = AttemptStatus(
                attempt_id=record.attempt_id, job_id=record.job_id, state=AttemptState.RUNNING
            )


def _job_name(attempt_id: str) -> str:
    """The Slurm job name of an attempt (unique: attempt ids are)."""
    return f"oc-{attempt_id}"
