"""Jobs: what a researcher asks for, and the states a job moves through."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from onecluster.errors import ValidationError
from onecluster.model._checks import check_name, check_non_negative, check_positive

__all__ = [
    "TERMINAL_STATES",
    "JobRecord",
    "JobSpec",
    "JobState",
    "PriorityClass",
    "SitePart",
    "kept_after",
]


class PriorityClass(enum.IntEnum):
    """Priority classes; a higher value is served first and may preempt lower pre-emptible work."""

    LOW = 0
    NORMAL = 50
    HIGH = 100
    CRITICAL = 200

    @classmethod
    def parse(cls, text: str) -> PriorityClass:
        """``'high'`` → :attr:`HIGH`; a clear error for anything else."""
        try:
            return cls[text.strip().upper()]
        except KeyError:
            names = ", ".join(p.name.lower() for p in cls)
            msg = f"unknown priority class {text!r}; use one of {names}"
            raise ValidationError(msg) from None


class JobState(enum.StrEnum):
    """Where a job is in its life.  Every submitted job ends in a terminal state.

    ``pending → running → (completed | failed)``; ``running → preempting → pending`` (requeued,
    never lost); ``* → cancelling → cancelled``.
    """

    PENDING = "pending"
    RUNNING = "running"
    PREEMPTING = "preempting"
    CANCELLING = "cancelling"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


#: States a job never leaves.
TERMINAL_STATES = frozenset({JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED})


@dataclass(frozen=True, slots=True, kw_only=True)
class JobSpec:
    """What a researcher submits: a compute spec and a dataset, never a site.

    ``gpu_types`` lists acceptable GPU types (empty: any).  ``max_sites`` > 1 lets the gang
    span several sites (for cross-site training); otherwise all its GPUs are in one site.
    ``duration_s`` is the researcher's estimate, used for backfill and reports.  ``workdir``
    is where the command runs at its site (an absolute path there; ``None``: a scratch
    directory of the attempt's own).

    Checkpoints: ``checkpoint_interval_s`` says the job saves its state at least that often,
    so a preemption loses at most that much work; ``checkpoint_on_sigterm`` says it saves its
    state when sent SIGTERM and exits within the preemption grace, so a preemption loses
    nothing.  The scheduler prefers victims that lose least, and the simulator and the
    reports count what preemption really cost.  Where the checkpoint lives is the job's
    business (its ``workdir`` or a dataset every attempt reaches).
    """

    team: str
    gpus: int
    duration_s: float
    name: str = "job"
    gpu_types: tuple[str, ...] = ()
    dataset: str | None = None
    dataset_bytes: int = 0
    priority: PriorityClass = PriorityClass.NORMAL
    preemptible: bool = False
    command: tuple[str, ...] = ()
    max_sites: int = 1
    workdir: str | None = None
    checkpoint_interval_s: float | None = None
    checkpoint_on_sigterm: bool = False

    def __post_init__(self) -> None:
        check_name("team", self.team)
        if not isinstance(self.gpus, int) or self.gpus < 1:
            msg = f"a job needs at least 1 GPU (got {self.gpus})"
            raise ValidationError(msg)
        check_positive("the estimated duration", self.duration_s)
        check_non_negative("the dataset size", self.dataset_bytes)
        check_positive("max_sites", self.max_sites)
        if self.checkpoint_interval_s is not None:
            check_positive("the checkpoint interval", self.checkpoint_interval_s)
            if self.checkpoint_interval_s < 1.0:
                every = self.checkpoint_interval_s
                msg = f"the checkpoint interval must be at least 1 s (got {every})"
                raise ValidationError(msg)
        if self.dataset is not None:
            check_name("dataset", self.dataset)
        if self.workdir is not None and (not self.workdir.startswith("/") or "\0" in self.workdir):
            msg = f"the working directory {self.workdir!r} must be an absolute path at the site"
            raise ValidationError(msg)
        object.__setattr__(self, "gpu_types", tuple(self.gpu_types))
        object.__setattr__(self, "command", tuple(self.command))

    def accepts(self, gpu_type: str) -> bool:
        """Whether this job may run on ``gpu_type``."""
        return not self.gpu_types or gpu_type in self.gpu_types

    def kept_after(self, ran_s: float) -> float:
        """Seconds of work a preemption after ``ran_s`` seconds of running keeps
        (:func:`kept_after`)."""
        return kept_after(ran_s, self.checkpoint_interval_s, self.checkpoint_on_sigterm)


def kept_after(ran_s: float, interval_s: float | None, on_sigterm: bool) -> float:
    """Seconds of work a preemption after ``ran_s`` seconds of running keeps (the rest is
    lost): all of it for a job that checkpoints on SIGTERM, the whole checkpoint intervals
    run for one that checkpoints every ``interval_s``, nothing otherwise."""
    ran = max(ran_s, 0.0)
    if on_sigterm:
        return ran
    if interval_s is not None and interval_s > 0:
        whole = ran / interval_s
        return ran if math.isinf(whole) else math.floor(whole) * interval_s
    return 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class SitePart:
    """The part of a job's gang placed at one site: ``gpus`` GPUs of ``gpu_type``."""

    site: str
    gpu_type: str
    gpus: int

    def __post_init__(self) -> None:
        if self.gpus < 1:
            msg = f"a placement part needs at least 1 GPU (got {self.gpus})"
            raise ValidationError(msg)


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRecord:
    """A job as the control plane keeps it: its spec, its state and its current (or last)
    placement."""

    id: str
    name: str
    team: str
    state: JobState
    gpus: int
    gpu_types: tuple[str, ...]
    duration_s: float
    dataset: str | None
    dataset_bytes: int
    priority: PriorityClass
    preemptible: bool
    command: tuple[str, ...]
    max_sites: int
    submitted_at: float
    queued_at: float
    started_at: float | None
    finished_at: float | None
    exit_code: int | None
    reason: str | None
    attempts: int
    preemptions: int
    borrowed: bool
    parts: tuple[SitePart, ...]
    #: While the site's cluster manager queues it: when it expects to start it, if it says.
    expected_start_at: float | None = None
    workdir: str | None = None
    checkpoint_interval_s: float | None = None
    checkpoint_on_sigterm: bool = False

    def spec(self) -> JobSpec:
        """The job's spec, as submitted."""
        return JobSpec(
            team=self.team,
            gpus=self.gpus,
            duration_s=self.duration_s,
            name=self.name,
            gpu_types=self.gpu_types,
            dataset=self.dataset,
            dataset_bytes=self.dataset_bytes,
            priority=self.priority,
            preemptible=self.preemptible,
            command=self.command,
            max_sites=self.max_sites,
            workdir=self.workdir,
            checkpoint_interval_s=self.checkpoint_interval_s,
            checkpoint_on_sigterm=self.checkpoint_on_sigterm,
        )
