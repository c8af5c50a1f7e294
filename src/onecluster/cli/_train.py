"""``onecluster train``: submit a training run as one gang job over several sites.

It is ``submit`` with the shape of a training run: ``--sites N --gpus-per-site G`` asks for a
gang of ``N*G`` GPUs that may span ``N`` sites, and the command each site runs is the
training launcher (``python -m onecluster.training launch -- COMMAND``), which starts one
worker per GPU of its site's part and restarts the ones that die.  The workers of all sites
find each other through the attempt's ``$ONECLUSTER_GANG_*`` (``docs/contracts.md``).
"""

from __future__ import annotations

import shlex
import sys

import typer
from rich.markup import escape

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
from onecluster.cli._render import out_console
from onecluster.errors import ValidationError

__all__ = ["launcher_command", "register"]

#: The module the command of every site runs (the launcher of ``onecluster.training``).
LAUNCHER_MODULE = "onecluster.training"


def register(app: typer.Typer) -> None:
    """Add the ``train`` command to ``app``."""
    app.command("train")(train)


def launcher_command(command: list[str], *, python: str) -> list[str]:
    """What each site runs: the training launcher with ``python``, then ``command`` (each
    worker's) after ``--`` so that the launcher takes none of its arguments as its own."""
    return [python, "-m", LAUNCHER_MODULE, "launch", "--", *command]


def train(
    ctx: typer.Context,
    *,
    command: list[str] = typer.Argument(
        None,
        help="What each worker runs, after `--` (e.g. -- python train.py).",
        show_default=False,
    ),
    team: str = TEAM,
    sites: int = typer.Option(..., "--sites", min=1, help="Sites the run may span (1: one site)."),
    gpus_per_site: int = typer.Option(
        ..., "--gpus-per-site", min=1, help="GPUs per site; the gang asks for --sites times this."
    ),
    gpu_type: list[str] = GPU_TYPES,
    duration: str = typer.Option(
        "1d", "--duration", help="Estimated run time: seconds or 90s, 30m, 2h, 1d."
    ),
    dataset: str | None = DATASET,
    priority: str = PRIORITY,
    name: str = typer.Option("train", "--name", help="A name to recognise the run by."),
    workdir: str | None = WORKDIR,
    checkpoint_every: str | None = CHECKPOINT_EVERY,
    checkpoint_on_sigterm: bool = CHECKPOINT_ON_SIGTERM,
    as_json: bool = AS_JSON,
    quiet: bool = quiet_option("train"),
) -> None:
    """Submit a training run over several sites: one gang job whose every site runs one
    worker per GPU; the scheduler picks the sites."""
    check_options(as_json=as_json, quiet=quiet, workdir=workdir)
    if not command:
        msg = "train needs the command each worker runs"
        raise ValidationError(
            msg,
            hint="put it after --, e.g. onecluster train --team T --sites 2 --gpus-per-site 8 "
            "-- python train.py",
        )
    gpus = sites * gpus_per_site
    body = job_body(
        name=name,
        team=team,
        gpus=gpus,
        duration=duration,
        gpu_types=gpu_type,
        dataset=dataset,
        dataset_gb=None,
        priority=priority,
        preemptible=False,
        command=launcher_command(command, python=sys.executable),
        max_sites=sites,
        workdir=workdir,
        checkpoint_every=checkpoint_every,
        checkpoint_on_sigterm=checkpoint_on_sigterm,
    )
    job = send_job(ctx, body)
    if not show_submitted(job, as_json=as_json, quiet=quiet):
        return
    console = out_console()
    console.print(
        f"  {gpus} GPUs on at most {sites} site{'s' if sites > 1 else ''} "
        f"(about {gpus_per_site} each), one worker per GPU: {escape(shlex.join(command))}"
    )
    console.print(
        "  its workers find each other through $ONECLUSTER_GANG_* "
        "(sites, rank, addresses, GPUs, port)"
    )
