"""Job bodies: what ``POST /jobs`` accepts and what every job route returns."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, field_validator

from onecluster.errors import ImpossibleJobError
from onecluster.model import MAX_DATASET_BYTES, JobSpec, PriorityClass
from onecluster.schema._bounds import (
    MAX_CHECKPOINT_INTERVAL_S,
    MAX_COMMAND_ARGS,
    MAX_COMMAND_CHARS,
    MAX_DURATION_S,
    MIN_CHECKPOINT_INTERVAL_S,
    STRICT,
    WHOLE,
    DatasetName,
    GpuCount,
    GpuType,
    JobName,
    TeamName,
)

__all__ = ["GB", "JobOut", "JobSubmit", "LogsOut", "PartOut", "PriorityName"]

#: Bytes in one GB as the API counts them (decimal, like the fabric file).
GB = 1_000_000_000

PriorityName = Literal["low", "normal", "high", "critical"]


class JobSubmit(BaseModel):
    """A job as a researcher submits it: a compute spec and a dataset, never a site.

    ``dataset_gb`` left out means "the size the fabric declares for ``dataset``" (or 0).
    Unknown fields are refused so that a typo never silently changes a job; types are strict
    (``"8"`` is not a number of GPUs) and every field is bounded (``docs/contracts.md``).
    """

    model_config = STRICT

    name: JobName = "job"
    team: TeamName
    gpus: GpuCount
    duration_s: float = Field(gt=0, le=MAX_DURATION_S, allow_inf_nan=False)
    gpu_types: list[GpuType] = Field(default_factory=list, max_length=64)
    dataset: DatasetName | None = None
    dataset_gb: float | None = Field(
        default=None, ge=0, le=MAX_DATASET_BYTES / GB, allow_inf_nan=False
    )
    priority: PriorityName = "normal"
    preemptible: bool = False
    command: list[Annotated[str, Field(max_length=MAX_COMMAND_CHARS)]] = Field(
        default_factory=list, max_length=MAX_COMMAND_ARGS
    )
    max_sites: Annotated[int, Field(ge=1, le=1000), WHOLE] = 1
    #: Where the command runs at its site: an absolute path there (``None``: a scratch
    #: directory of the attempt's own, ``$ONECLUSTER_SCRATCH``).
    workdir: str | None = Field(default=None, min_length=1, max_length=4096)
    #: The job saves its state at least this often (seconds): a preemption loses at most
    #: that much of its work.  Its attempts get it as ``$ONECLUSTER_CHECKPOINT_INTERVAL_S``.
    #: At least a second: no job saves its state more often, and a smaller interval would
    #: only make the arithmetic of what a preemption keeps overflow.
    checkpoint_interval_s: float | None = Field(
        default=None,
        ge=MIN_CHECKPOINT_INTERVAL_S,
        le=MAX_CHECKPOINT_INTERVAL_S,
        allow_inf_nan=False,
    )
    #: The job saves its state when sent SIGTERM and exits within the stop grace: a
    #: preemption loses none of its work.
    checkpoint_on_sigterm: bool = False

    @field_validator("command")
    @classmethod
    def _command_fits(cls, command: list[str]) -> list[str]:
        total = sum(len(arg) for arg in command)
        if total > MAX_COMMAND_CHARS:
            msg = (
                f"the command is {total} characters long; at most {MAX_COMMAND_CHARS} are "
                "allowed (put a longer script in a file and run that)"
            )
            raise ValueError(msg)
        if any("\x00" in arg for arg in command):
            msg = "an argument of the command holds a NUL character, which no program can take"
            raise ValueError(msg)
        return command

    def to_spec(self, *, dataset_bytes: int | None = None) -> JobSpec:
        """The domain :class:`JobSpec`; ``dataset_bytes`` overrides ``dataset_gb`` when given.

        Raises :class:`ImpossibleJobError` for a job that asks for no GPU or has no command
        to run, and the domain's :class:`~onecluster.errors.ValidationError` for a malformed
        name or team.
        """
        if self.gpus < 1:
            msg = f"job {self.name!r} asks for {self.gpus} GPUs; a job needs at least 1 GPU"
            raise ImpossibleJobError(msg, hint="set gpus to 1 or more")
        if not self.command or not self.command[0].strip():
            msg = f"job {self.name!r} has no command; a job needs a command to run"
            raise ImpossibleJobError(
                msg,
                hint='give the program and its arguments, e.g. "command": ["python", "train.py"]'
                " (onecluster submit … -- python train.py)",
            )
        if dataset_bytes is None:
            dataset_bytes = round((self.dataset_gb or 0.0) * GB)
        return JobSpec(
            team=self.team,
            gpus=self.gpus,
            duration_s=self.duration_s,
            name=self.name,
            gpu_types=tuple(self.gpu_types),
            dataset=self.dataset,
            dataset_bytes=dataset_bytes,
            priority=PriorityClass.parse(self.priority),
            preemptible=self.preemptible,
            command=tuple(self.command),
            max_sites=self.max_sites,
            workdir=self.workdir,
            checkpoint_interval_s=self.checkpoint_interval_s,
            checkpoint_on_sigterm=self.checkpoint_on_sigterm,
        )


class PartOut(BaseModel):
    """The part of a job's gang placed at one site."""

    site: str
    gpu_type: str
    gpus: int


class JobOut(BaseModel):
    """A job as every job route returns it (times are epoch seconds or ``null``)."""

    id: str
    name: str
    team: str
    state: str
    gpus: int
    gpu_types: list[str]
    duration_s: float
    dataset: str | None
    dataset_bytes: int
    priority: str
    preemptible: bool
    command: list[str]
    max_sites: int
    submitted_at: float
    started_at: float | None
    finished_at: float | None
    parts: list[PartOut]
    borrowed: bool
    attempts: int
    preemptions: int
    exit_code: int | None
    reason: str | None
    #: While the site's cluster manager queues it: when that expects to start it.
    expected_start_at: float | None = None
    #: Where its command runs at its site (``None``: a scratch directory of its own).
    workdir: str | None = None
    #: How often it said it saves its state (seconds; ``None``: it did not say).
    checkpoint_interval_s: float | None = None
    #: Whether it said it saves its state on SIGTERM, within the stop grace.
    checkpoint_on_sigterm: bool = False


class LogsOut(BaseModel):
    """A slice of a job's log: ``data`` from the asked offset; ``offset`` is where to ask next."""

    offset: int
    data: str
