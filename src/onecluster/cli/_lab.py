"""``onecluster lab``: emulate the fabric's sites and circuits on this host (needs root)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

import typer
from rich.table import Table

from onecluster.cli._render import err_console, out_console
from onecluster.errors import ValidationError
from onecluster.lab import Lab, LabStatus

__all__ = ["register"]

_name_option = typer.Option("oclab", "--name", help="The lab's name (1-8 letters/digits).")


def register(app: typer.Typer) -> None:
    """Add the ``lab`` group to ``app``."""
    lab_app = typer.Typer(
        help="A multi-site fabric on this host: namespaces, emulated circuits, agents (root).",
        no_args_is_help=True,
    )
    lab_app.command("up")(up)
    lab_app.command("down")(down)
    lab_app.command("down-all")(down_all)
    lab_app.command("cut")(cut)
    lab_app.command("heal")(heal)
    lab_app.command("flap")(flap)
    lab_app.command("status")(status)
    lab_app.command("traffic")(traffic)
    app.add_typer(lab_app, name="lab")


def _lab(name: str, *, quiet: bool = False) -> Lab:
    console = err_console()
    return Lab(
        name,
        environ=dict(os.environ),
        progress=None if quiet else (lambda line: console.print(f"  {line}", style="dim")),
    )


def up(
    *,
    site: str | None = typer.Argument(None, help="Bring back a site taken down with `lab down`."),
    fabric: Path | None = typer.Option(None, "--fabric", help="Fabric file: build the lab."),
    scale: float = typer.Option(
        0.05, "--scale", help="Fraction of each circuit's capacity to emulate (rate limit)."
    ),
    mtu: int = typer.Option(1500, "--mtu", help="MTU of the emulated circuits."),
    port: int | None = typer.Option(None, "--port", help="Port of the lab's server."),
    name: str = _name_option,
) -> None:
    """Build the lab from --fabric (server, one namespace and agent per site, circuits), or
    bring back SITE."""
    lab = _lab(name)
    if (site is None) == (fabric is None):
        msg = "give either --fabric (build the lab) or a SITE (bring it back)"
        raise ValidationError(
            msg, hint="e.g. onecluster lab up --fabric examples/fabrics/three-site.yaml"
        )
    if site is not None:
        lab.site_up(site)
        out_console().print(f"site {site} is back: circuits healed, agent synced")
        return
    assert fabric is not None
    s = lab.up(fabric, scale=scale, mtu=mtu, port=port)
    console = out_console()
    console.print(f"[bold]lab {s.name}[/] is up: {len(s.sites)} sites, {len(s.circuits)} circuits")
    console.print(f"server {s.server_url}; admin token in {s.admin_token_file}")
    console.print(f"try: onecluster --state-dir {s.admin_token_file.parent} links --watch")


def down(
    site: str = typer.Argument(..., help="The site to lose."),
    name: str = _name_option,
) -> None:
    """Lose SITE as a power failure would: its circuits cut, its agent and jobs killed."""
    lab = _lab(name)
    cut = lab.site_down(site)
    out_console().print(f"site {site} is down (cut {', '.join(cut) or 'no circuit'})")


def down_all(name: str = _name_option) -> None:
    """Remove every namespace, device and process the lab made."""
    lab = _lab(name)
    removed = lab.down_all()
    out_console().print(f"lab {name} removed" if removed else f"no lab {name} on this host")


def cut(
    a: str = typer.Argument(..., help="One end."),
    b: str = typer.Argument(..., help="The other end."),
    circuit: str | None = typer.Option(None, "--circuit", help="Only this circuit of the pair."),
    name: str = _name_option,
) -> None:
    """Cut every circuit between A and B (or just --circuit)."""
    lab = _lab(name, quiet=True)
    out_console().print(f"cut {', '.join(lab.cut(a, b, circuit=circuit))}")


def heal(
    a: str = typer.Argument(..., help="One end."),
    b: str = typer.Argument(..., help="The other end."),
    circuit: str | None = typer.Option(None, "--circuit", help="Only this circuit of the pair."),
    name: str = _name_option,
) -> None:
    """End cuts and flaps between A and B (restarting an emulator that died)."""
    lab = _lab(name)
    out_console().print(f"healed {', '.join(lab.heal(a, b, circuit=circuit))}")


def flap(
    *,
    a: str = typer.Argument(..., help="One end."),
    b: str = typer.Argument(..., help="The other end."),
    period: float = typer.Option(..., "--period", help="Seconds from one outage to the next."),
    down_s: float = typer.Option(1.0, "--down", help="Seconds each outage lasts."),
    circuit: str | None = typer.Option(None, "--circuit", help="Only this circuit of the pair."),
    name: str = _name_option,
) -> None:
    """Make the circuits between A and B go down for --down seconds every --period seconds."""
    if not 0 < down_s < period:
        msg = f"--down ({down_s}) must be greater than 0 and shorter than --period ({period})"
        raise ValidationError(msg)
    lab = _lab(name, quiet=True)
    names = lab.flap(a, b, period_s=period, down_s=down_s, circuit=circuit)
    out_console().print(f"flapping {', '.join(names)}: down {down_s:g} s every {period:g} s")


def status(
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
    name: str = _name_option,
) -> None:
    """The lab's sites (namespace, agent) and circuits (emulator, state, counters)."""
    lab = _lab(name, quiet=True)
    s = lab.status()
    if as_json:
        typer.echo(json.dumps(_status_json(s), indent=2))
        return
    console = out_console()
    server = "[green]up[/]" if s.server_alive else "[red]not running[/]"
    console.print(f"[bold]lab {s.name}[/] (scale {s.scale:g}) — server {s.server_url} {server}")
    sites = Table(header_style="bold")
    for column in ("SITE", "NAMESPACE", "ADDRESS", "AGENT", "PROCESSES", "METRICS"):
        sites.add_column(column)
    for site in s.sites:
        agent = (
            "[red]site down[/]"
            if site.down
            else f"[green]pid {site.agent_pid}[/]"
            if site.agent_alive
            else "[red]not running[/]"
        )
        netns = site.netns if site.netns_exists else f"[red]{site.netns} missing[/]"
        sites.add_row(
            site.site, netns, site.service_ip, agent, str(site.processes), site.metrics_url
        )
    console.print(sites)
    circuits = Table(header_style="bold")
    for column in ("CIRCUIT", "ENDS", "RTT", "RATE", "LOSS", "EMULATOR", "FORWARDED", "DROPPED"):
        circuits.add_column(column)
    for c in s.circuits:
        e = c.emulator
        if e is None:
            state, forwarded, dropped = f"[red]DEAD: {c.problem}[/]", "-", "-"
        else:
            colour = {"up": "green", "cut": "red"}.get(e.state, "yellow")
            state = f"[{colour}]{e.state}[/] (pid {e.pid}, cpu {e.cpu_s:.1f} s)"
            forwarded = " / ".join(str(d["forwarded"]) for d in e.directions)
            dropped = " / ".join(str(d["lost"] + d["cut"] + d["overflow"]) for d in e.directions)
        circuits.add_row(
            c.circuit,
            f"{c.a}⇄{c.b}",
            f"{c.one_way_ms * 2:g} ms",
            f"{c.rate_bps / 1e6:g} Mbit/s",
            f"{c.loss:g}",
            state,
            forwarded,
            dropped,
        )
    console.print(circuits)


def _status_json(s: LabStatus) -> dict[str, object]:
    body = asdict(s)
    body["directory"] = str(body["directory"])
    body["admin_token_file"] = str(body["admin_token_file"])
    return body


def traffic(
    *,
    src: str = typer.Argument(..., help="Sending site."),
    dst: str = typer.Argument(..., help="Receiving site."),
    seconds: float = typer.Option(10.0, "--seconds", help="How long to send."),
    udp: bool = typer.Option(False, "--udp", help="Numbered datagrams instead of one TCP stream."),
    pps: float = typer.Option(500.0, "--pps", help="Datagrams per second (with --udp)."),
    name: str = _name_option,
) -> None:
    """Send test traffic from SRC to DST over the current routes; print the receive rate."""
    lab = _lab(name, quiet=True)
    console = out_console()
    previous = 0
    last_t = 0.0
    for sample in lab.traffic(
        src, dst, seconds=seconds, proto="udp" if udp else "tcp", pps=pps, interval_s=1.0
    ):
        span = max(sample.t - last_t, 1e-9)
        rate = (sample.bytes - previous) * 8 / span / 1e6
        extra = f"  longest gap {sample.gap_s * 1000:.0f} ms" if sample.gap_s is not None else ""
        label = "total" if sample.done else f"{sample.t:6.1f} s"
        if sample.done:
            rate = sample.bytes * 8 / max(sample.t, 1e-9) / 1e6
        console.print(f"{label}  {rate:8.1f} Mbit/s{extra}")
        previous, last_t = sample.bytes, sample.t
