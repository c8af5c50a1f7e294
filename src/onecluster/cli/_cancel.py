"""``onecluster cancel``: stop a job, whether it is queued or running."""

from __future__ import annotations

import typer

from onecluster.cli._config import open_client
from onecluster.cli._render import out_console

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add the ``cancel`` command to ``app``."""
    app.command("cancel")(cancel)


def cancel(
    ctx: typer.Context,
    job_ids: list[str] = typer.Argument(..., help="Jobs to cancel.", metavar="JOB_ID..."),
) -> None:
    """Cancel jobs.  A job that already finished is a conflict (exit 4)."""
    console = out_console()
    with open_client(ctx) as client:
        for job_id in job_ids:
            job = client.cancel(job_id)
            console.print(f"job [bold]{job.id}[/] is {job.state}")
