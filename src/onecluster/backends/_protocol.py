"""The one narrow seam to a site's cluster: :class:`ClusterBackend` and the values it speaks.

Every backend (local processes today, Slurm and Kubernetes later) runs *attempts*: one run of
a job's command on some GPUs of one type at this site.  The agent drives a backend only
through this Protocol, so a fake or a new backend needs nothing else.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from onecluster.errors import ValidationError
from onecluster.model import OBSERVED_ATTEMPT_STATES, AttemptState

__all__ = ["AttemptSpec", "AttemptStatus", "ClusterBackend", "LogSlice"]

# Attempt ids become directory names and environment values, so keep them to a safe alphabet.
_ATTEMPT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptSpec:
    """What to run: ``command`` (an argv tuple, never a shell string) on ``gpus`` GPUs of
    ``gpu_type``, with extra ``env``, in ``workdir`` (an absolute path at the site; ``None``:
    the attempt's own scratch directory).  Raises :class:`ValidationError` when malformed."""

    attempt_id: str
    job_id: str
    command: tuple[str, ...]
    gpu_type: str
    gpus: int
    env: Mapping[str, str] = field(default_factory=dict)
    workdir: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.attempt_id, str) or not _ATTEMPT_ID.match(self.attempt_id):
            msg = (
                f"attempt id {self.attempt_id!r} is not valid: use 1-128 letters, digits, "
                "'_', '.', ':' or '-', starting with a letter or digit"
            )
            raise ValidationError(msg)
        if not self.job_id:
            msg = f"attempt {self.attempt_id} has no job id"
            raise ValidationError(msg)
        if not self.command or not all(isinstance(a, str) and a for a in self.command):
            msg = (
                f"attempt {self.attempt_id} needs a command: a non-empty list of non-empty strings"
            )
            raise ValidationError(msg)
        if not isinstance(self.gpus, int) or self.gpus < 1:
            msg = f"attempt {self.attempt_id} needs at least 1 GPU (got {self.gpus})"
            raise ValidationError(msg)
        if not self.gpu_type:
            msg = f"attempt {self.attempt_id} needs a gpu_type such as 'H100'"
            raise ValidationError(msg)
        if self.workdir is not None and (not self.workdir.startswith("/") or "\0" in self.workdir):
            msg = f"attempt {self.attempt_id}: the working directory {self.workdir!r} is not an "
            msg += "absolute path"
            raise ValidationError(msg)
        object.__setattr__(self, "env", dict(self.env))


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptStatus:
    """One attempt as last observed.

    ``exit_code`` is set once the attempt has ``exited`` (a process killed by signal N reports
    ``128 + N``, as shells do; a command that could not be started reports 127 or 126).
    A ``lost`` attempt is one the backend can no longer follow; its ``exit_code`` may be None.
    ``queued``: a running attempt the site's cluster manager holds but has not started yet
    (``expected_start_at`` is its estimate, ``waiting_reason`` its reason, when it gives them).
    ``started_at``/``finished_at`` are when it really ran (epoch seconds, the site's clock).
    """

    attempt_id: str
    job_id: str
    state: AttemptState
    exit_code: int | None = None
    started_at: float | None = None
    finished_at: float | None = None
    queued: bool = False
    expected_start_at: float | None = None
    waiting_reason: str | None = None

    def __post_init__(self) -> None:
        if self.state not in OBSERVED_ATTEMPT_STATES:
            msg = f"a backend observes attempts running, exited or lost, not {self.state}"
            raise ValidationError(msg)


@dataclass(frozen=True, slots=True, kw_only=True)
class LogSlice:
    """Log text of one attempt from byte ``offset`` up to byte ``next_offset``.

    Offsets count bytes of the attempt's log; a chunk never splits a UTF-8 character
    (undecodable bytes come back as U+FFFD).  ``data`` is empty when nothing new was written.
    """

    attempt_id: str
    offset: int
    next_offset: int
    data: str


@runtime_checkable
class ClusterBackend(Protocol):
    """A site's cluster, as the agent sees it.

    Contracts every implementation keeps:

    * ``start`` is idempotent per ``attempt_id``: a second call for a known attempt (running,
      exited or lost) does nothing.  It raises :class:`~onecluster.errors.BackendError` when it
      cannot place the attempt (unknown GPU type, not enough free GPUs); a command that cannot
      be executed is not an error, it shows up in ``poll`` as exited with 127 (or 126).
    * ``stop`` never blocks for the grace period: it asks the attempt to end (SIGTERM-style) and
      the backend kills it hard once ``grace_s`` has passed (checked on ``poll``).  Stopping an
      unknown or finished attempt does nothing.
    * ``poll`` reports every attempt the backend still holds, until ``forget`` drops it.
    * ``close`` ends every attempt (grace, then hard kill) and releases the backend.
    """

    @property
    def name(self) -> str:
        """The backend kind as the fabric names it (``local``, ``slurm``, ``kubernetes``)."""
        ...

    def start(self, attempt: AttemptSpec) -> None:
        """Start ``attempt`` unless it is already known."""
        ...

    def stop(self, attempt_id: str, grace_s: float, reason: str) -> None:
        """Ask ``attempt_id`` to end; kill it hard after ``grace_s`` seconds."""
        ...

    def poll(self) -> list[AttemptStatus]:
        """The current status of every attempt held, oldest first."""
        ...

    def read_logs(self, attempt_id: str, offset: int = 0, limit: int = 65536) -> LogSlice:
        """At most ``limit`` bytes of the attempt's log from byte ``offset``."""
        ...

    def forget(self, attempt_id: str) -> None:
        """Drop a finished (exited or lost) attempt; running attempts are kept."""
        ...

    def capacity(self) -> Mapping[str, int]:
        """GPUs per type that this backend manages (in use or not)."""
        ...

    def problem(self) -> str | None:
        """Why the site's cluster cannot take work now (its manager does not answer …), or
        ``None`` when it can.  The agent reports it; the server then places nothing there."""
        ...

    def close(self, grace_s: float = 5.0) -> None:
        """End every running attempt and release the backend; idempotent."""
        ...
