"""Job bodies: what ``POST /jobs`` accepts and what every job route returns."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from onecluster.errors import ImpossibleJobError
from onecluster.model import JobSpec, PriorityClass

__all__ = ["GB", "JobOut", "JobSubmit", "LogsOut", "PartOut", "PriorityName"]

#: Bytes in one GB as the API counts them (decimal, like the fabric file).
GB = 1_000_000_000

PriorityName = Literal["low", "normal", "high", "critical"]


class JobSubmit(BaseModel):
    """A job as a researcher submits it: a compute spec and a dataset, never a site.

    ``dataset_gb`` left out means "the size the fabric declares for ``dataset``" (or 0).
    Unknown fields are refused so that a typo never silently changes a job.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "job"
    team: str
    gpus: int = Field(ge=0)
    duration_s: float = Field(gt=0, allow_inf_nan=False)
    gpu_types: list[str] = Field(default_factory=list)
    dataset: str | None = None
    dataset_gb: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    priority: PriorityName = "normal"
    preemptible: bool = False
    command: list[str] = Field(default_factory=list)
    max_sites: int = Field(default=1, ge=1)
    #: Where the command runs at its site: an absolute path there (``None``: a scratch
    #: directory of the attempt's own, ``$ONECLUSTER_SCRATCH``).
    workdir: str | None = Field(default=None, min_length=1, max_length=4096)

    def to_spec(self, *, dataset_bytes: int | None = None) -> JobSpec:
        """The domain :class:`JobSpec`; ``dataset_bytes`` overrides ``dataset_gb`` when given.

        Raises :class:`ImpossibleJobError` for a job that asks for no GPU, and the domain's
        :class:`~onecluster.errors.ValidationError` for a malformed name or team.
        """
        if self.gpus < 1:
            msg = f"job {self.name!r} asks for {self.gpus} GPUs; a job needs at least 1 GPU"
            raise ImpossibleJobError(msg, hint="set gpus to 1 or more")
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


class LogsOut(BaseModel):
    """A slice of a job's log: ``data`` from the asked offset; ``offset`` is where to ask next."""

    offset: int
    data: str
