"""``onecluster submit``: queue a job with a compute spec and a dataset, never a site."""

from __future__ import annotations

import typer

from onecluster.cli._job_options import (
    AS_JSON,
    CHECKPOINT_EVERY,
    CHECKPOINT_ON_SIGTERM,
    DATASET,
    GPU_TYPES,
    PRIORITY,
    TEAM,
    WORKDIR,
    check_options,
    job_body,
    quiet_option,
    send_job,
    show_submitted,
)
from onecluster.errors import ValidationError

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add the ``submit`` command to ``app``."""
    app.command("submit")(submit)


def submit(
    ctx: typer.Context,
    *,
    command: list[str] = typer.Argument(
        None, help="The command to run, after `--` (e.g. -- python train.py).", show_default=False
    ),
    team: str = TEAM,
    gpus: int = typer.Option(..., "--gpus", min=1, help="GPUs the job needs (a gang)."),
    gpu_type: list[str] = GPU_TYPES,
    duration: str = typer.Option(
        ..., "--duration", help="Estimated run time: seconds or 90s, 30m, 2h, 1d."
    ),
    dataset: str | None = DATASET,
    dataset_gb: float | None = typer.Option(
        None, "--dataset-gb", min=0.0, help="Dataset size \\[default: as the fabric declares it]."
    ),
    priority: str = PRIORITY,
    preemptible: bool = typer.Option(False, "--preemptible", help="May be preempted."),
    name: str = typer.Option("job", "--name", help="A name to recognise the job by."),
    max_sites: int = typer.Option(1, "--max-sites", min=1, help="Sites the gang may span."),
    workdir: str | None = WORKDIR,
    checkpoint_every: str | None = CHECKPOINT_EVERY,
    checkpoint_on_sigterm: bool = CHECKPOINT_ON_SIGTERM,
    as_json: bool = AS_JSON,
    quiet: bool = quiet_option("submit"),
) -> None:
    """Submit a job; the scheduler picks the site."""
    check_options(as_json=as_json, quiet=quiet, workdir=workdir)
    if not command:
        msg = "submit needs the command the job runs"
        raise ValidationError(msg, hint="put it after --, e.g. onecluster submit ... -- sleep 60")
    body = job_body(
        name=name,
        team=team,
        gpus=gpus,
        duration=duration,
        gpu_types=gpu_type,
        dataset=dataset,
        dataset_gb=dataset_gb,
        priority=priority,
        preemptible=preemptible,
        command=command,
        max_sites=max_sites,
        workdir=workdir,
        checkpoint_every=checkpoint_every,
        checkpoint_on_sigterm=checkpoint_on_sigterm,
    )
    show_submitted(send_job(ctx, body), as_json=as_json, quiet=quiet)
