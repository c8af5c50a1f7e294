"""``onecluster submit``: queue a job with a compute spec and a dataset, never a site."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from onecluster.cli._config import open_client
from onecluster.cli._render import out_console, parse_duration
from onecluster.errors import ValidationError
from onecluster.model import PriorityClass

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
    team: str = typer.Option(..., "--team", help="Team the job belongs to."),
    gpus: int = typer.Option(..., "--gpus", min=1, help="GPUs the job needs (a gang)."),
    gpu_type: list[str] = typer.Option(
        [], "--gpu-type", help="Acceptable GPU type; repeat for several (default: any)."
    ),
    duration: str = typer.Option(
        ..., "--duration", help="Estimated run time: seconds or 90s, 30m, 2h, 1d."
    ),
    dataset: str | None = typer.Option(None, "--dataset", help="Dataset the job reads."),
    dataset_gb: float | None = typer.Option(
        None, "--dataset-gb", min=0.0, help="Dataset size \\[default: as the fabric declares it]."
    ),
    priority: str = typer.Option("normal", "--priority", help="low, normal, high or critical."),
    preemptible: bool = typer.Option(False, "--preemptible", help="May be preempted."),
    name: str = typer.Option("job", "--name", help="A name to recognise the job by."),
    max_sites: int = typer.Option(1, "--max-sites", min=1, help="Sites the gang may span."),
    workdir: str | None = typer.Option(
        None,
        "--workdir",
        help=(
            "Directory the command runs in at its site (a relative one is taken from here: "
            "for sites that share this filesystem) \\[default: a scratch directory of its own]."
        ),
        show_default=False,
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the job as JSON."),
    quiet: bool = typer.Option(
        False,
        "--quiet",
        "-q",
        help="Print only the job id (for scripts: JOB=$(onecluster submit -q …)).",
    ),
) -> None:
    """Submit a job; the scheduler picks the site."""
    from onecluster.schema import JobSubmit

    if as_json and quiet:
        msg = "--json and --quiet ask for two different outputs; give one"
        raise ValidationError(msg)
    if workdir is not None and not workdir.strip():
        msg = "--workdir is empty; give the directory the job runs in at its site"
        raise ValidationError(msg)
    if not command:
        msg = "submit needs the command the job runs"
        raise ValidationError(msg, hint="put it after --, e.g. onecluster submit ... -- sleep 60")
    body = JobSubmit(
        name=name,
        team=team,
        gpus=gpus,
        duration_s=parse_duration(duration),
        gpu_types=list(gpu_type),
        dataset=dataset,
        dataset_gb=dataset_gb,
        priority=PriorityClass.parse(priority).name.lower(),
        preemptible=preemptible,
        command=list(command),
        max_sites=max_sites,
        workdir=None if workdir is None else str(Path(workdir).absolute()),
    )
    with open_client(ctx) as client:
        job = client.submit(body)
    if as_json:
        typer.echo(json.dumps(job.model_dump(mode="json"), indent=2))
        return
    if quiet:
        typer.echo(job.id)
        return
    out_console().print(f"submitted job [bold]{job.id}[/] ({job.name}, {job.state})")
