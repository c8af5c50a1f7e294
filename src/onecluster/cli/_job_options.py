"""What ``submit`` and ``train`` share: their common options, the request body they build,
the call that sends it and how the submitted job is shown."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from onecluster.cli._config import open_client
from onecluster.cli._render import out_console, parse_duration
from onecluster.errors import ValidationError
from onecluster.model import PriorityClass

if TYPE_CHECKING:
    from onecluster.schema import JobOut, JobSubmit

__all__ = [
    "AS_JSON",
    "CHECKPOINT_EVERY",
    "CHECKPOINT_ON_SIGTERM",
    "DATASET",
    "GPU_TYPES",
    "PRIORITY",
    "TEAM",
    "WORKDIR",
    "check_options",
    "job_body",
    "quiet_option",
    "send_job",
    "show_submitted",
]

TEAM = typer.Option(..., "--team", help="Team the job belongs to.")
GPU_TYPES = typer.Option(
    [], "--gpu-type", help="Acceptable GPU type; repeat for several (default: any)."
)
DATASET = typer.Option(None, "--dataset", help="Dataset the job reads.")
PRIORITY = typer.Option("normal", "--priority", help="low, normal, high or critical.")
WORKDIR = typer.Option(
    None,
    "--workdir",
    help=(
        "Directory the command runs in at its site (a relative one is taken from here: "
        "for sites that share this filesystem) \\[default: a scratch directory of its own]."
    ),
    show_default=False,
)
CHECKPOINT_EVERY = typer.Option(
    None,
    "--checkpoint-every",
    help=(
        "The job saves its state at least this often (seconds or 90s, 30m, 2h, 1d): a "
        "preemption loses at most that much work; its attempts get it as "
        "$ONECLUSTER_CHECKPOINT_INTERVAL_S."
    ),
    show_default=False,
)
CHECKPOINT_ON_SIGTERM = typer.Option(
    False,
    "--checkpoint-on-sigterm",
    help=(
        "The job saves its state on SIGTERM and exits within the stop grace: a preemption "
        "loses nothing."
    ),
)
AS_JSON = typer.Option(False, "--json", help="Print the job as JSON.")


def quiet_option(command: str) -> bool:
    """The ``--quiet`` option of ``command`` (its help shows how a script uses it)."""
    option: bool = typer.Option(
        False,
        "--quiet",
        "-q",
        help=f"Print only the job id (for scripts: JOB=$(onecluster {command} -q …)).",
    )
    return option


def check_options(*, as_json: bool, quiet: bool, workdir: str | None) -> None:
    """:class:`ValidationError` when both ``--json`` and ``--quiet`` are given, or an empty
    ``--workdir`` (checked before anything else, so nothing is sent)."""
    if as_json and quiet:
        msg = "--json and --quiet ask for two different outputs; give one"
        raise ValidationError(msg)
    if workdir is not None and not workdir.strip():
        msg = "--workdir is empty; give the directory the job runs in at its site"
        raise ValidationError(msg)


def job_body(
    *,
    name: str,
    team: str,
    gpus: int,
    duration: str,
    gpu_types: Sequence[str],
    dataset: str | None,
    dataset_gb: float | None,
    priority: str,
    preemptible: bool,
    command: Sequence[str],
    max_sites: int,
    workdir: str | None,
    checkpoint_every: str | None,
    checkpoint_on_sigterm: bool,
) -> JobSubmit:
    """The request body of a job from option values (passed by :func:`check_options`): the
    duration and the checkpoint interval parsed, the priority normalised, a relative
    ``workdir`` made absolute from the current directory.

    :class:`ValidationError` for a duration, interval or priority that does not parse;
    pydantic's error for a value out of the API's bounds (the CLI maps both to exit 2).
    """
    from onecluster.schema import JobSubmit

    return JobSubmit(
        name=name,
        team=team,
        gpus=gpus,
        duration_s=parse_duration(duration),
        gpu_types=list(gpu_types),
        dataset=dataset,
        dataset_gb=dataset_gb,
        priority=PriorityClass.parse(priority).name.lower(),
        preemptible=preemptible,
        command=list(command),
        max_sites=max_sites,
        workdir=None if workdir is None else str(Path(workdir).absolute()),
        checkpoint_interval_s=(
            None
            if checkpoint_every is None
            else parse_duration(checkpoint_every, what="the checkpoint interval")
        ),
        checkpoint_on_sigterm=checkpoint_on_sigterm,
    )


def send_job(ctx: typer.Context, body: JobSubmit) -> JobOut:
    """Submit ``body`` with the client of ``ctx``'s configuration; the job as queued."""
    with open_client(ctx) as client:
        return client.submit(body)


def show_submitted(job: JobOut, *, as_json: bool, quiet: bool) -> bool:
    """Print the submitted job: as JSON, its id alone, or a line for people.  Returns whether
    it printed that line (a command may add its own lines after it, never to JSON or to an
    id that a script reads)."""
    if as_json:
        typer.echo(json.dumps(job.model_dump(mode="json"), indent=2))
        return False
    if quiet:
        typer.echo(job.id)
        return False
    out_console().print(f"submitted job [bold]{job.id}[/] ({job.name}, {job.state})")
    return True
