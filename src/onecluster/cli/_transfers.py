"""``onecluster transfers``: the transfers under way (or every one), and ``transfers cancel``."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import typer
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from onecluster.cli._config import open_client
from onecluster.cli._push import paths_note, summary
from onecluster.cli._render import (
    format_bytes,
    format_duration,
    format_rate,
    out_console,
)

if TYPE_CHECKING:
    from onecluster.schema import TransferOut

__all__ = ["register"]

_COLOURS = {
    "queued": "dim",
    "running": "green",
    "waiting": "yellow",
    "done": "blue",
    "failed": "red",
    "cancelled": "magenta",
}


def register(app: typer.Typer) -> None:
    """Add ``transfers`` (with ``transfers cancel``) to ``app``."""
    group = typer.Typer(
        help="Transfers of dataset versions between sites.", invoke_without_command=True
    )
    group.callback()(transfers)
    group.command("cancel")(cancel)
    app.add_typer(group, name="transfers")


def transfers(
    ctx: typer.Context,
    *,
    show_all: bool = typer.Option(False, "--all", help="Every transfer, not only active ones."),
    watch: bool = typer.Option(False, "--watch", help="Refresh until Ctrl-C."),
    interval: float = typer.Option(1.0, "--interval", min=0.1, help="Seconds between refreshes."),
    limit: int = typer.Option(100, "--limit", min=1, max=10_000, help="At most this many."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Transfers, newest first: dataset and version, from and to, state, bytes verified of
    the total, rate, ETA and the paths carrying them."""
    if ctx.invoked_subcommand is not None:
        return
    state = "all" if show_all else "active"
    with open_client(ctx) as client:
        found = client.transfers(state=state, limit=limit)
        if as_json:
            typer.echo(json.dumps([t.model_dump(mode="json") for t in found], indent=2))
            return
        if not watch:
            out_console().print(_table(found) if found else _none(show_all))
            return
        with Live(_table(found), console=out_console(), auto_refresh=False) as live:
            while True:
                time.sleep(interval)
                live.update(_table(client.transfers(state=state, limit=limit)), refresh=True)


def _none(show_all: bool) -> str:
    return "no transfers" if show_all else "no transfers under way (--all lists every one)"


def _table(found: Sequence[TransferOut]) -> Table:
    table = Table(header_style="bold")
    for column in ("ID", "DATASET", "FROM → TO", "STATE", "VERIFIED", "RATE", "ETA", "PATHS"):
        table.add_column(column, no_wrap=column in {"ID", "STATE"})
    for t in found:
        share = f" ({t.bytes_done / t.bytes_total:.0%})" if t.bytes_total else ""
        state = f"[{_COLOURS.get(t.state, 'white')}]{t.state}[/]"
        if t.error:
            state += f"\n{escape(t.error)}"
        table.add_row(
            t.id,
            f"{t.dataset}@{t.root[:12]}",
            f"{t.src} → {t.dst}",
            state,
            f"{format_bytes(t.bytes_done)} of {format_bytes(t.bytes_total)}{share}",
            format_rate(t.rate_bps),
            format_duration(t.eta_s),
            escape(paths_note(t)),
        )
    return table


def cancel(
    ctx: typer.Context,
    transfer_ids: list[str] = typer.Argument(..., help="The transfers to cancel."),
) -> None:
    """Cancel transfers; their agents stop them at their next sync (one that already ended is
    a conflict, exit 4).  What the destination verified so far stays there, partial."""
    with open_client(ctx) as client:
        for transfer_id in transfer_ids:
            out_console().print(summary(client.cancel_transfer(transfer_id)), markup=False)
