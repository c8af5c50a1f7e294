"""``onecluster sites``: every site, its status and how busy its GPU pools are."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

import typer
from rich.markup import escape
from rich.table import Table

from onecluster.cli._config import open_client
from onecluster.cli._render import format_age, out_console
from onecluster.errors import UnavailableError

if TYPE_CHECKING:
    from onecluster.client import Client
    from onecluster.schema import SiteOut

__all__ = ["register"]

#: How often ``--wait-up`` asks.
_POLL_S = 0.5


def register(app: typer.Typer) -> None:
    """Add the ``sites`` command to ``app``."""
    app.command("sites")(sites)


def sites(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    wait_up: float | None = typer.Option(
        None,
        "--wait-up",
        min=0.0,
        metavar="SECONDS",
        help="Wait until every site is up (at most SECONDS; exit 6 naming the others).",
        show_default=False,
    ),
) -> None:
    """List the sites of the fabric with their pools (GPUs used / total)."""
    with open_client(ctx) as client:
        found = client.sites() if wait_up is None else _until_all_up(client, wait_up)
    if as_json:
        typer.echo(json.dumps([s.model_dump(mode="json") for s in found], indent=2))
        return
    table = Table(header_style="bold")
    for column in ("SITE", "REGION", "JURIS.", "BACKEND", "AGENT", "HEARTBEAT", "POOLS"):
        table.add_column(column)
    colours = {"up": "green", "down": "red"}
    for site in found:
        status = str(site.status)
        pools = "\n".join(
            f"{p.gpu_type} {p.used}/{p.count} at {p.cost_per_gpu_hour:.2f}/h"
            + (" [yellow]draining[/]" if p.draining else "")
            for p in site.pools
        )
        table.add_row(
            site.name,
            site.region,
            site.jurisdiction,
            site.backend,
            f"[{colours.get(status, 'yellow')}]{status}[/]"
            + (f"\n{escape(site.problem)}" if site.problem else "")
            + ("\n[yellow]draining[/]" if site.draining else ""),
            format_age(site.last_heartbeat),
            pools,
        )
    out_console().print(table)


def _until_all_up(client: Client, timeout_s: float) -> list[SiteOut]:
    """The sites once all are up; :class:`UnavailableError` naming the others after
    ``timeout_s`` (a server that does not answer yet is waited for too)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            found = client.sites()
        except UnavailableError:
            found = None
        if found is not None and all(s.status == "up" for s in found):
            return found
        if time.monotonic() >= deadline:
            if found is None:
                msg = f"the server did not answer within {timeout_s:g} s"
                raise UnavailableError(msg, hint="is `onecluster server` running?")
            late = ", ".join(f"{s.name} ({s.status})" for s in found if s.status != "up")
            msg = f"not every site came up within {timeout_s:g} s: {late}"
            raise UnavailableError(msg, hint="start an agent per site: `onecluster agent --site S`")
        time.sleep(_POLL_S)
