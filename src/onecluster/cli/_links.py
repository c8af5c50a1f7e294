"""``onecluster links``, ``links check`` and ``routes``: circuits as measured, the planning
check against latency objectives and the route table (``events``, the alerts among others,
is in :mod:`onecluster.cli._events`)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer
from rich.live import Live
from rich.table import Table

from onecluster.cli import _events
from onecluster.cli._config import open_client
from onecluster.cli._errors import CheckFailedError
from onecluster.cli._render import format_age, out_console
from onecluster.schema import LinkOut, PairCheckOut, RouteTableOut

__all__ = ["register"]

_STATE_COLOURS = {"up": "green", "degraded": "yellow", "down": "red", "unknown": "dim"}
_VERDICT_COLOURS = {
    "ok": "green",
    "primary-only": "yellow",
    "violated": "red",
    "unreachable": "red",
}


def register(app: typer.Typer) -> None:
    """Add ``links`` (with ``links check``), ``routes`` and ``events`` to ``app``."""
    links_app = typer.Typer(
        help="Circuits as the agents' probes measure them.", invoke_without_command=True
    )
    links_app.callback()(links)
    links_app.command("check")(check)
    app.add_typer(links_app, name="links")
    app.command("routes")(routes)
    _events.register(app)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def links_table(found: list[LinkOut]) -> Table:
    """One row per circuit end: its view, RTT min/p50/p99, jitter, PDV p99 and loss."""
    table = Table(header_style="bold")
    for column in ("CIRCUIT", "STATE", "SEEN FROM", "RTT MIN/P50/P99", "JITTER", "PDV P99", "LOSS"):
        table.add_column(column)
    for link in found:
        colour = _STATE_COLOURS.get(link.state, "white")
        for i, end in enumerate(link.ends):
            first = i == 0
            rtts = "/".join(_ms(v) for v in (end.rtt_min_ms, end.rtt_p50_ms, end.rtt_p99_ms))
            table.add_row(
                f"{link.circuit} ({link.rtt_ms:g} ms)" if first else "",
                f"[{colour}]{link.state}[/] {format_age(link.since)}" if first else "",
                f"{end.site} [{_STATE_COLOURS.get(end.state, 'white')}]{end.state}[/]",
                rtts,
                _ms(end.jitter_ms),
                _ms(end.pdv_p99_ms),
                f"{end.loss:.1%} ({end.lost}/{end.sent} in all)",
            )
    table.caption = "ms over the last 10 s of probes; jitter per RFC 3550; (fabric RTT)"
    return table


def links(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    watch: bool = typer.Option(False, "--watch", help="Refresh until Ctrl-C."),
    interval: float = typer.Option(1.0, "--interval", min=0.1, help="Seconds between refreshes."),
) -> None:
    """Every circuit: its state and what both ends' probes measure."""
    if ctx.invoked_subcommand is not None:
        return
    with open_client(ctx) as client:
        if as_json:
            typer.echo(
                json.dumps([link.model_dump(mode="json") for link in client.links()], indent=2)
            )
            return
        if not watch:
            out_console().print(links_table(client.links()))
            return
        with Live(links_table(client.links()), console=out_console(), auto_refresh=False) as live:
            while True:
                time.sleep(interval)
                live.update(links_table(client.links()), refresh=True)


def check_table(checks: list[PairCheckOut]) -> Table:
    """One row per site pair: primary and backup RTT against the objective."""
    table = Table(header_style="bold")
    for column in ("PAIR", "PRIMARY", "RTT", "BACKUP", "RTT ", "OBJECTIVE", "VERDICT"):
        table.add_column(column)
    for c in checks:
        colour = _VERDICT_COLOURS[c.verdict]
        objective = f"< {c.max_rtt_ms:g} ms" if c.max_rtt_ms is not None else "-"
        if c.reason:
            objective += f" ({c.reason})"
        table.add_row(
            f"{c.a}–{c.b}",
            " → ".join(c.primary_sites) or "none",
            _ms(c.primary_rtt_ms),
            " → ".join(c.backup_sites) or "none",
            _ms(c.backup_rtt_ms),
            objective,
            f"[{colour}]{c.verdict}[/]",
        )
    return table


def check(
    ctx: typer.Context,
    fabric: Path | None = typer.Option(
        None, "--fabric", help="Check this fabric file offline (its RTTs), without a server."
    ),
    configured: bool = typer.Option(
        False, "--configured", help="Use the fabric's RTTs even where probes measured them."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Primary and backup RTT of every site pair against the latency objectives.

    Exits 9 when an objective fails on either path or a pair cannot be reached at all.
    """
    if fabric is not None:
        checks = _offline(fabric)
        source = f"{fabric} (configured RTTs)"
    else:
        with open_client(ctx) as client:
            checks = client.links_check(measured=not configured)
        measured = any(c.measured for c in checks)
        source = "measured minimum RTTs" if measured else "the fabric's RTTs (nothing measured yet)"
    if as_json:
        typer.echo(json.dumps([c.model_dump(mode="json") for c in checks], indent=2))
    else:
        console = out_console()
        console.print(check_table(checks))
        console.print(f"from {source}; primary-only: the objective is lost when one circuit fails")
    failing = [
        c
        for c in checks
        if c.verdict == "unreachable" or (c.max_rtt_ms is not None and c.verdict != "ok")
    ]
    if failing:
        pairs = ", ".join(f"{c.a}–{c.b} ({c.verdict})" for c in failing)
        noun = "pair fails" if len(failing) == 1 else "pairs fail"
        msg = f"{len(failing)} site {noun} the check: {pairs}"
        raise CheckFailedError(
            msg, hint="docs/links.md (Planning check) says what each verdict means"
        )


def _offline(path: Path) -> list[PairCheckOut]:
    from onecluster.fabric import load_fabric
    from onecluster.topology import check_pairs

    return [PairCheckOut.of(p, measured=False) for p in check_pairs(load_fabric(path))]


def routes_table(table: RouteTableOut) -> Table:
    """One row per (source, destination) pair."""
    out = Table(header_style="bold")
    for column in ("FROM", "TO", "NEXT HOP", "PRIMARY", "RTT", "BACKUP", "RTT "):
        out.add_column(column)
    for r in table.routes:
        out.add_row(
            r.src,
            r.dst,
            f"{r.next_circuit} → {r.next_site}" if r.next_circuit else "[red]unreachable[/]",
            " + ".join(r.circuits) or "-",
            _ms(r.rtt_ms),
            " + ".join(r.backup_circuits) or "[yellow]none[/]",
            _ms(r.backup_rtt_ms),
        )
    down = ", ".join(table.down) or "none"
    out.caption = f"version {table.version}, changed {format_age(table.changed_at)}; down: {down}"
    return out


def routes(
    ctx: typer.Context,
    site: str | None = typer.Option(None, "--site", help="Only this site's routes."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """The route table every site follows: next hop, primary and disjoint backup path."""
    with open_client(ctx) as client:
        table = client.routes(site)
    if as_json:
        typer.echo(table.model_dump_json(indent=2))
        return
    out_console().print(routes_table(table))
