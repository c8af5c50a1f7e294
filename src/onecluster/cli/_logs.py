"""``onecluster logs``: print a job's output, optionally following it until the job ends."""

from __future__ import annotations

import sys
import time

import typer

from onecluster.cli._config import open_client

__all__ = ["register"]

_TERMINAL = frozenset({"completed", "failed", "cancelled"})


def register(app: typer.Typer) -> None:
    """Add the ``logs`` command to ``app``."""
    app.command("logs")(logs)


def logs(
    ctx: typer.Context,
    job_id: str = typer.Argument(..., help="The job."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing until it ends."),
    interval: float = typer.Option(1.0, "--interval", min=0.1, help="Seconds between polls."),
) -> None:
    """Print the output of a job's attempts (stdout and stderr, as the agent collected it)."""
    offset = 0
    with open_client(ctx) as client:
        while True:
            chunk = client.logs(job_id, offset=offset)
            if chunk.data:
                sys.stdout.write(chunk.data)
                sys.stdout.flush()
            offset = chunk.offset
            if not follow:
                return
            if str(client.job(job_id).state) in _TERMINAL:
                # one last read: output may have arrived between the two calls
                tail = client.logs(job_id, offset=offset)
                sys.stdout.write(tail.data)
                sys.stdout.flush()
                return
            time.sleep(interval)
