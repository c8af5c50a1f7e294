"""``onecluster sites``: every site, its status and how busy its GPU pools are."""

from __future__ import annotations

import json

import typer
from rich.markup import escape
from rich.table import Table

from onecluster.cli._config import open_client
from onecluster.cli._render import format_age, out_console

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add the ``sites`` command to ``app``."""
    app.command("sites")(sites)


def sites(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """List the sites of the fabric with their pools (GPUs used / total)."""
    with open_client(ctx) as client:
        found = client.sites()
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
            f"{p.gpu_type} {p.used}/{p.count} at {p.cost_per_gpu_hour:.2f}/h" for p in site.pools
        )
        table.add_row(
            site.name,
            site.region,
            site.jurisdiction,
            site.backend,
            f"[{colours.get(status, 'yellow')}]{status}[/]"
            + (f"\n{escape(site.problem)}" if site.problem else ""),
            format_age(site.last_heartbeat),
            pools,
        )
    out_console().print(table)
