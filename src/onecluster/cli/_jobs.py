"""``onecluster jobs``: list jobs, show one, or say why a pending one waits."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from onecluster.cli._config import open_client
from onecluster.cli._render import format_duration, format_time, jobs_table, out_console
from onecluster.cli._why import why_view
from onecluster.errors import ValidationError

if TYPE_CHECKING:
    from onecluster.schema import JobOut

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add the ``jobs`` command to ``app``."""
    app.command("jobs")(jobs)


def jobs(
    ctx: typer.Context,
    *,
    job_id: str | None = typer.Argument(None, help="Show only this job, in detail."),
    state: str | None = typer.Option(None, "--state", help="Only jobs in this state."),
    team: str | None = typer.Option(None, "--team", help="Only this team's jobs."),
    site: str | None = typer.Option(None, "--site", help="Only jobs placed at this site."),
    limit: int = typer.Option(100, "--limit", min=1, max=1000, help="At most this many."),
    offset: int = typer.Option(0, "--offset", min=0, help="Skip this many (newest first)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    why: bool = typer.Option(
        False, "--why", help="Say why the pending job JOB_ID waits, and what it waits behind."
    ),
) -> None:
    """List jobs (members see their team's only), show one job, or say why one waits."""
    if why and job_id is None:
        msg = "--why explains one job: give its id"
        raise ValidationError(msg, hint="onecluster jobs JOB_ID --why")
    with open_client(ctx) as client:
        if job_id is not None and why:
            explained = client.why(job_id)
            if as_json:
                typer.echo(json.dumps(explained.model_dump(mode="json"), indent=2))
            else:
                out_console().print(why_view(explained))
            return
        if job_id is not None:
            job = client.job(job_id)
            if as_json:
                typer.echo(json.dumps(job.model_dump(mode="json"), indent=2))
            else:
                out_console().print(_detail(job))
            return
        found = client.jobs(state=state, team=team, site=site, limit=limit, offset=offset)
    if as_json:
        typer.echo(json.dumps([j.model_dump(mode="json") for j in found], indent=2))
        return
    console = out_console()
    if not found:
        console.print("no jobs")
        return
    console.print(jobs_table(found))


def _detail(job: JobOut) -> Table:
    data = job.model_dump(mode="json")
    table = Table(show_header=False, box=None)
    table.add_column(style="bold")
    table.add_column()
    for key, value in data.items():
        if key.endswith("_at"):
            shown = format_time(value)
        elif key in ("duration_s", "checkpoint_interval_s"):
            shown = format_duration(value)
        elif key == "parts":
            shown = ", ".join(f"{p['site']}:{p['gpu_type']}x{p['gpus']}" for p in value) or "-"
        elif isinstance(value, list):
            shown = " ".join(str(v) for v in value) or "-"
        else:
            shown = "-" if value is None else str(value)
        table.add_row(key, shown)
    return table
