"""The typed configuration of ``onecluster up``, built by the CLI and passed down."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

from onecluster.errors import ValidationError

__all__ = ["UpConfig"]


@dataclass(frozen=True, slots=True, kw_only=True)
class UpConfig:
    """Everything ``up`` needs.

    ``port=None`` means 8080 if it is free, else any free port.  ``trace_path`` is the trace
    to replay a slice of; ``None`` means the fitted generator.  ``jobs=None`` sizes the
    workload from ``duration_s``.  ``wait=False`` stops everything right after the summary.
    ``keep_state`` keeps the database and agent directories of an earlier run.  ``python`` is
    the interpreter the children run under.  Construction raises :class:`ValidationError`
    for values that cannot work.
    """

    fabric_path: Path
    state_dir: Path = Path(".state")
    host: str = "127.0.0.1"
    port: int | None = None
    duration_s: float = 90.0
    trace_path: Path | None = None
    jobs: int | None = None
    seed: int = 1
    wait: bool = True
    keep_state: bool = False
    startup_timeout_s: float = 60.0
    stop_grace_s: float = 10.0
    python: str = field(default=sys.executable)

    def __post_init__(self) -> None:
        if not (self.duration_s > 0 and math.isfinite(self.duration_s)):
            msg = f"the replay duration must be greater than 0 seconds (got {self.duration_s})"
            raise ValidationError(msg)
        if self.port is not None and not 1 <= self.port <= 65535:
            msg = f"port {self.port} is not between 1 and 65535"
            raise ValidationError(msg)
        if self.jobs is not None and self.jobs < 1:
            msg = f"the workload needs at least one job (got {self.jobs})"
            raise ValidationError(msg)
        if not self.startup_timeout_s > 0:
            msg = "the startup timeout must be greater than 0 seconds"
            raise ValidationError(msg)

    @property
    def job_count(self) -> int:
        """Jobs to replay: ``jobs``, or about 3.5 per second of replay (8 to 600).

        Enough jobs that gangs stay node-sized (8–32 GPUs) and the queue, borrowing and
        preemption are visible; few enough that a 2-core machine runs them as real processes.
        """
        if self.jobs is not None:
            return self.jobs
        return max(8, min(600, round(self.duration_s * 3.5)))
