"""The local backend: every attempt is a real child process tree on simulated GPU slots.

Layout under ``work_dir``: ``attempts/<attempt_id>/`` is the attempt's scratch directory and
holds ``output.log`` (stdout and stderr together) and ``attempt.json`` (its record, so that a
restarted agent knows what an earlier one left behind).  The command runs in the attempt's
``workdir`` when it has one (a directory that must exist here), else in the scratch directory.

Each attempt gets the lowest free slot ids of its GPU type, exported as
``ONECLUSTER_GPU_SLOTS=3,4,5`` and ``CUDA_VISIBLE_DEVICES=3,4,5`` along with
``ONECLUSTER_JOB_ID``, ``ONECLUSTER_ATTEMPT_ID``, ``ONECLUSTER_SITE`` and
``ONECLUSTER_SCRATCH`` (the scratch directory); the attempt's own ``env`` comes on top of the
agent's environment, and these six on top of both.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onecluster.backends._logs import read_chunk
from onecluster.backends._process import kill_stray_group
from onecluster.backends._protocol import AttemptSpec, AttemptStatus, LogSlice
from onecluster.backends._slots import SlotPool, SlotUsage
from onecluster.clock import Clock, SystemClock
from onecluster.errors import BackendError
from onecluster.model import AttemptState
from onecluster.process import Child

__all__ = ["LocalBackend", "LocalStats"]

_LOG = "output.log"
_RECORD = "attempt.json"


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalStats:
    """A snapshot for dashboards: attempts by state and slot usage per GPU type."""

    running: int
    finished: int
    slots: tuple[SlotUsage, ...]


@dataclass(slots=True, kw_only=True)
class _Attempt:
    """Mutable bookkeeping for one attempt (private to the backend)."""

    spec_id: str
    job_id: str
    path: Path
    child: Child | None
    state: AttemptState
    started_at: float | None
    exit_code: int | None = None
    finished_at: float | None = None
    kill_at: float | None = None

    def status(self) -> AttemptStatus:
        return AttemptStatus(
            attempt_id=self.spec_id,
            job_id=self.job_id,
            state=self.state,
            exit_code=self.exit_code,
            started_at=self.started_at,
            finished_at=self.finished_at,
        )


class LocalBackend:
    """A :class:`~onecluster.backends.ClusterBackend` of local processes for one site.

    Slots are never over-committed: ``start`` raises :class:`BackendError` when the attempt
    needs more free slots of its type than remain.  A command that cannot be executed is
    recorded as exited with 127 (not found) or 126 (other failures) and a log line saying why.
    ``forget`` deletes the attempt's directory.  Not thread-safe: one owner (the agent) calls it.
    """

    def __init__(
        self,
        site: str,
        pools: Mapping[str, int],
        work_dir: Path,
        clock: Clock | None = None,
    ) -> None:
        self._site = site
        self._slots = SlotPool(pools)
        self._clock: Clock = clock or SystemClock()
        self._root = Path(work_dir) / "attempts"
        self._root.mkdir(parents=True, exist_ok=True)
        self._attempts: dict[str, _Attempt] = {}
        self._recover()

    @property
    def name(self) -> str:
        """Always ``"local"``."""
        return "local"

    # -- the ClusterBackend protocol --------------------------------------------------------

    def start(self, attempt: AttemptSpec) -> None:
        """Start ``attempt`` on free slots unless it is already known (see class docstring)."""
        if attempt.attempt_id in self._attempts:
            return
        slots = self._slots.take(attempt.attempt_id, attempt.gpu_type, attempt.gpus)
        path = self._root / attempt.attempt_id
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            self._slots.give_back(attempt.attempt_id)
            msg = f"cannot create the working directory {path} for attempt {attempt.attempt_id}"
            raise BackendError(msg, hint=str(exc)) from exc
        ids = ",".join(str(i) for i in slots)
        env = {
            **os.environ,
            **attempt.env,
            "ONECLUSTER_GPU_SLOTS": ids,
            "CUDA_VISIBLE_DEVICES": ids,
            "ONECLUSTER_JOB_ID": attempt.job_id,
            "ONECLUSTER_ATTEMPT_ID": attempt.attempt_id,
            "ONECLUSTER_SITE": self._site,
            "ONECLUSTER_SCRATCH": str(path),
        }
        now = self._clock.now()
        record = _Attempt(
            spec_id=attempt.attempt_id,
            job_id=attempt.job_id,
            path=path,
            child=None,
            state=AttemptState.RUNNING,
            started_at=now,
        )
        self._attempts[attempt.attempt_id] = record
        cwd = Path(attempt.workdir) if attempt.workdir else path
        if not cwd.is_dir():
            what = "is not a directory" if cwd.exists() else "does not exist here"
            self._note(record, f"cannot start: the working directory {cwd} {what}")
            self._finish(record, 126)
            return
        try:
            record.child = Child.spawn(attempt.command, env=env, cwd=cwd, log_path=path / _LOG)
        except (OSError, ValueError) as exc:
            # ValueError: an argument or env value Popen refuses (e.g. an embedded NUL byte).
            code = 127 if isinstance(exc, FileNotFoundError) else 126
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            self._note(record, f"cannot start {attempt.command[0]!r}: {why}")
            self._finish(record, code)
            return
        self._save(record)

    def stop(self, attempt_id: str, grace_s: float, reason: str) -> None:
        """SIGTERM the attempt's process group now; ``poll`` sends SIGKILL after ``grace_s``.

        ``grace_s <= 0`` kills at once.  A second stop may shorten the grace, never extend it.
        """
        record = self._attempts.get(attempt_id)
        if record is None or record.child is None or record.state is not AttemptState.RUNNING:
            return
        if not math.isfinite(grace_s) or grace_s <= 0:  # a NaN or endless grace kills at once
            self._note(record, f"stopping ({reason}): SIGKILL, no grace period")
            record.child.signal(signal.SIGKILL)
            record.kill_at = float("inf")
            return
        deadline = self._clock.now() + grace_s
        if record.kill_at is None:
            self._note(record, f"stopping ({reason}): SIGTERM, SIGKILL after {grace_s:g} s")
            record.child.signal(signal.SIGTERM)
        if record.kill_at is None or deadline < record.kill_at:
            record.kill_at = deadline

    def poll(self) -> list[AttemptStatus]:
        """Reap exited attempts (freeing their slots), escalate overdue stops, report all."""
        now = self._clock.now()
        for record in self._attempts.values():
            if record.state is not AttemptState.RUNNING or record.child is None:
                continue
            code = record.child.exit_code()
            if code is not None:
                self._finish(record, code)
            elif record.kill_at is not None and now >= record.kill_at:
                self._note(record, "grace period over: SIGKILL")
                record.child.signal(signal.SIGKILL)
                record.kill_at = float("inf")
        return [r.status() for r in self._attempts.values()]

    def read_logs(self, attempt_id: str, offset: int = 0, limit: int = 65536) -> LogSlice:
        """Up to ``limit`` bytes of the attempt's log from ``offset`` (empty if unknown)."""
        record = self._attempts.get(attempt_id)
        path = (record.path if record else self._root / attempt_id) / _LOG
        final = record is None or record.state is not AttemptState.RUNNING
        data, next_offset = read_chunk(path, offset, limit, final=final)
        return LogSlice(attempt_id=attempt_id, offset=offset, next_offset=next_offset, data=data)

    def forget(self, attempt_id: str) -> None:
        """Drop a finished attempt and delete its directory; running attempts are kept."""
        record = self._attempts.get(attempt_id)
        if record is None or record.state is AttemptState.RUNNING:
            return
        del self._attempts[attempt_id]
        shutil.rmtree(record.path, ignore_errors=True)

    def capacity(self) -> Mapping[str, int]:
        """Slots per GPU type, as given at construction."""
        return self._slots.capacity

    def problem(self) -> str | None:
        """Never any: the machine's own processes always take work (or refuse one attempt)."""
        return None

    def close(self, grace_s: float = 5.0) -> None:
        """SIGTERM every running attempt, SIGKILL what is left after ``grace_s`` real seconds,
        and reap them all.  Blocks for at most about ``grace_s + 5`` seconds.  ``poll`` and
        ``read_logs`` still answer afterwards."""
        running = [r for r in self._attempts.values() if r.state is AttemptState.RUNNING]
        for record in running:
            self.stop(record.spec_id, grace_s, "the backend is closing")
        deadline = time.monotonic() + grace_s
        while any(r.state is AttemptState.RUNNING for r in running):
            self.poll()
            if time.monotonic() >= deadline:
                break
            time.sleep(0.02)
        for record in running:
            if record.state is AttemptState.RUNNING and record.child is not None:
                record.child.signal(signal.SIGKILL)
        # SIGKILL cannot be refused, but a process stuck in the kernel may take a moment.
        deadline = time.monotonic() + 5.0
        while any(r.state is AttemptState.RUNNING for r in running):
            self.poll()
            if time.monotonic() >= deadline:
                break
            time.sleep(0.005)

    # -- beyond the protocol ----------------------------------------------------------------

    def statistics(self) -> LocalStats:
        """Attempts by state and slots per GPU type, as a frozen snapshot."""
        running = sum(r.state is AttemptState.RUNNING for r in self._attempts.values())
        return LocalStats(
            running=running,
            finished=len(self._attempts) - running,
            slots=self._slots.usage(),
        )

    # -- private ----------------------------------------------------------------------------

    def _finish(self, record: _Attempt, code: int) -> None:
        record.state = AttemptState.EXITED
        record.exit_code = code
        record.finished_at = self._clock.now()
        record.kill_at = None
        self._slots.give_back(record.spec_id)
        self._save(record)

    def _note(self, record: _Attempt, line: str) -> None:
        """Append an ``onecluster:`` line to the attempt's log (best effort)."""
        try:
            with (record.path / _LOG).open("a", encoding="utf-8") as log:
                log.write(f"onecluster: {line}\n")
        except OSError:
            return

    def _save(self, record: _Attempt) -> None:
        body = {
            "attempt_id": record.spec_id,
            "job_id": record.job_id,
            "pid": record.child.pid if record.child else None,
            "started_at": record.started_at,
            "exit_code": record.exit_code,
            "finished_at": record.finished_at,
        }
        try:
            (record.path / _RECORD).write_text(json.dumps(body), encoding="utf-8")
        except OSError:
            return

    def _recover(self) -> None:
        """Adopt what an earlier backend on this ``work_dir`` left: finished attempts are
        reported as exited; unfinished ones have their process group killed (it can no longer
        be followed) and are reported as ``lost``.  Either way they are never started again."""
        for path, body in _records(self._root):
            attempt_id, job_id = str(body["attempt_id"]), str(body["job_id"])
            record = _Attempt(
                spec_id=attempt_id,
                job_id=job_id,
                path=path,
                child=None,
                state=AttemptState.EXITED,
                started_at=body.get("started_at"),
                exit_code=body.get("exit_code"),
                finished_at=body.get("finished_at"),
            )
            if record.exit_code is None:
                pid = body.get("pid")
                if isinstance(pid, int) and kill_stray_group(pid, attempt_id):
                    self._note(record, "killed: left running by an earlier agent")
                record.state = AttemptState.LOST
                record.finished_at = self._clock.now()
            self._attempts[attempt_id] = record


def _records(root: Path) -> list[tuple[Path, dict[str, Any]]]:
    """The attempt records under ``root`` that can be read (others are skipped)."""
    found: list[tuple[Path, dict[str, Any]]] = []
    if not root.is_dir():
        return found
    for path in sorted(root.iterdir()):
        try:
            body = json.loads((path / _RECORD).read_text(encoding="utf-8"))
            str(body["attempt_id"]), str(body["job_id"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if isinstance(body, dict):
            found.append((path, body))
    return found


def kill_leftovers(
    work_dir: Path, *, before: Callable[[list[str]], None] | None = None
) -> list[str]:
    """Kill the jobs a local agent on ``work_dir`` left running (it died, was killed, or its
    lease ran out while it could not act).

    Its jobs run in their own sessions, so they outlive it; this reads its attempt records and
    SIGKILLs every unfinished attempt's process group that still belongs to that attempt.
    ``before`` is told the ids first (to note them before anything is killed).  Returns the
    attempt ids killed.  Used by whoever started the agent (``onecluster up``) and by the
    agent's watchdog.
    """
    unfinished = [
        (body["pid"], str(body["attempt_id"]))
        for _, body in _records(Path(work_dir) / "attempts")
        if isinstance(body.get("pid"), int) and body.get("exit_code") is None
    ]
    if before is not None and unfinished:
        before([attempt_id for _, attempt_id in unfinished])
    return [a for pid, a in unfinished if kill_stray_group(pid, a)]
