"""``onecluster plan``: what spreading one training job over the fabric's sites would cost.

Parses the flags, loads the fabric, builds :class:`~onecluster.planner.PlanInputs` and
renders :func:`~onecluster.planner.plan` as a table or, with ``--json``, one JSON object.
Every default lives in ``PlanInputs``; a flag left out is not passed (``docs/planner.md``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from onecluster.cli._render import err_console, out_console
from onecluster.errors import ValidationError

if TYPE_CHECKING:
    from onecluster.planner import Plan

__all__ = ["parse_count", "parse_site_counts", "register"]

_SUFFIX = {
    "": 1.0,
    "k": 1e3,
    "m": 1e6,
    "b": 1e9,
    "g": 1e9,
    "t": 1e12,
    "ki": 2.0**10,
    "mi": 2.0**20,
    "gi": 2.0**30,
}
_COUNT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-z]*)\s*$", re.IGNORECASE)


def register(app: typer.Typer) -> None:
    """Add the ``plan`` command to ``app``."""
    app.command("plan")(plan_command)


def parse_count(text: str, *, what: str) -> float:
    """``'70e9'``, ``'70B'``, ``'4Mi'`` → a number (K, M, B or G, T decimal; Ki, Mi, Gi binary).

    Raises :class:`ValidationError` for anything else.
    """
    match = _COUNT.match(text)
    factor = _SUFFIX.get(match.group(2).lower()) if match else None
    if match is None or factor is None:
        msg = f"{what} {text!r} is not a number"
        raise ValidationError(msg, hint="e.g. 70e9, 70B, 4Mi (K M B T decimal, Ki Mi Gi binary)")
    return float(match.group(1)) * factor


def parse_site_counts(text: str, *, what: str) -> int | dict[str, int]:
    """``'512'`` (every chosen site) or ``'shanghai=512,singapore=256'`` (per site)."""

    def whole(value: str, where: str) -> int:
        try:
            return int(value.strip())
        except ValueError:
            msg = f"{what} {where}{value.strip()!r} is not a whole number"
            raise ValidationError(msg, hint="e.g. 512, or shanghai=512,singapore=512") from None

    if "=" not in text:
        return whole(text, "")
    counts: dict[str, int] = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or not name:
            msg = f"{what} {text!r}: {part.strip()!r} is not site=N"
            raise ValidationError(msg, hint="e.g. shanghai=512,singapore=512")
        if name in counts:
            msg = f"{what} names site {name} twice"
            raise ValidationError(msg)
        counts[name] = whole(value, f"of site {name} ")
    return counts


def _chosen_sites(
    all_sites: tuple[str, ...], sites: str | None, counts: int | dict[str, int]
) -> list[str]:
    named = [s.strip() for s in sites.split(",") if s.strip()] if sites else None
    if isinstance(counts, dict):
        if named is not None and set(named) != set(counts):
            msg = f"--sites ({', '.join(named)}) and the sites given counts differ"
            raise ValidationError(msg, hint="give counts for exactly the sites of --sites")
        return named or list(counts)
    return named if named is not None else list(all_sites)


def plan_command(
    *,
    fabric_path: Path = typer.Option(..., "--fabric", help="Fabric file (YAML)."),
    model_params: str = typer.Option(
        ..., "--model-params", help="Parameters of the model: 70e9 or 70B."
    ),
    gpus_per_site: str | None = typer.Option(
        None,
        "--gpus-per-site",
        help="GPUs the job uses at each chosen site: one number, or site=N,site=N.",
    ),
    nodes_per_site: str | None = typer.Option(
        None, "--nodes-per-site", help="Instead of --gpus-per-site: nodes, the same forms."
    ),
    sites: str | None = typer.Option(
        None,
        "--sites",
        help="Sites to spread over, a,b \\[default: those of --gpus-per-site, else all].",
    ),
    gpus_per_node: int | None = typer.Option(
        None, "--gpus-per-node", help="GPUs per node \\[default: 8]."
    ),
    gpu_type: str | None = typer.Option(
        None, "--gpu-type", help="H100, H200, H800, A100 or L40S \\[default: H100]."
    ),
    gpu_tflops: float | None = typer.Option(
        None, "--gpu-tflops", help="Peak dense BF16 TFLOP/s per GPU \\[default: the type's]."
    ),
    mfu: float | None = typer.Option(
        None, "--mfu", help="Model FLOPs utilisation of the co-located run \\[default: 0.40]."
    ),
    tokens_per_step: str | None = typer.Option(
        None, "--tokens-per-step", help="Global batch in tokens \\[default: 4Mi]."
    ),
    step_time_s: float | None = typer.Option(
        None,
        "--step-time-s",
        help="Measured co-located step time; replaces 6·P·tokens / (GPUs·peak·MFU).",
    ),
    nic_gbps: float | None = typer.Option(
        None,
        "--nic-gbps",
        help="Per-node share of the circuit, Gbit/s \\[default: capacity / the site's nodes].",
    ),
    intra_gbps: float | None = typer.Option(
        None, "--intra-gbps", help="In-site bandwidth per GPU, Gbit/s \\[default: 400]."
    ),
    bytes_per_param: float | None = typer.Option(
        None, "--bytes-per-param", help="Gradient bytes per parameter on the wire \\[default: 2]."
    ),
    h: int | None = typer.Option(None, "--h", help="DiLoCo inner steps per sync \\[default: 100]."),
    bits: int | None = typer.Option(
        None, "--bits", help="DiLoCo pseudo-gradient bits: 32, 16, 8 or 4 \\[default: 8]."
    ),
    buckets: int | None = typer.Option(
        None, "--buckets", help="Cross-site DDP calls per step \\[default: 1]."
    ),
    overlap: float | None = typer.Option(
        None,
        "--overlap",
        help="Share of a step's compute DDP's sync may hide behind \\[default: 0].",
    ),
    window_bytes: str | None = typer.Option(
        None, "--window-bytes", help="Per-connection window cap \\[default: 4Mi, NCCL_BUFFSIZE]."
    ),
    streams_per_node: int | None = typer.Option(
        None, "--streams-per-node", help="WAN connections per node \\[default: 8 per GPU]."
    ),
    detection_timeout_s: float | None = typer.Option(
        None, "--detection-timeout-s", help="Heartbeat timeout \\[default: 5, torchft's]."
    ),
    state_bytes_per_param: float | None = typer.Option(
        None,
        "--state-bytes-per-param",
        help="State a rejoining site fetches per parameter \\[default: 6, bf16 + fp32 momentum].",
    ),
    rejoin_overhead_s: float | None = typer.Option(
        None, "--rejoin-overhead-s", help="Fixed cost of a rejoin \\[default: 10]."
    ),
    target_penalty: float | None = typer.Option(
        None, "--target-penalty", help="Largest acceptable slowdown \\[default: 0.05]."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object on stdout."),
) -> None:
    """Predict step time, utilisation and WAN bandwidth of DDP and DiLoCo across sites."""
    from onecluster.fabric import load_fabric
    from onecluster.planner import (
        GPUS_PER_NODE,
        PlanInputs,
        SitePlan,
        fabric_notes,
        plan,
        ring_from_fabric,
    )

    if (gpus_per_site is None) == (nodes_per_site is None):
        msg = "plan needs exactly one of --gpus-per-site and --nodes-per-site"
        raise ValidationError(msg, hint="e.g. --gpus-per-site 512 or --nodes-per-site 64")
    fabric = load_fabric(fabric_path)
    counts = parse_site_counts(
        gpus_per_site or nodes_per_site or "",
        what="--gpus-per-site" if gpus_per_site is not None else "--nodes-per-site",
    )
    order, hops = ring_from_fabric(fabric, _chosen_sites(fabric.site_names, sites, counts))
    per_node = 1 if gpus_per_site is not None else (gpus_per_node or GPUS_PER_NODE)
    options: dict[str, Any] = {
        "gpus_per_node": gpus_per_node,
        "gpu_type": gpu_type,
        "gpu_tflops": gpu_tflops,
        "mfu": mfu,
        "step_time_s": step_time_s,
        "nic_gbps": nic_gbps,
        "intra_gbps": intra_gbps,
        "bytes_per_param": bytes_per_param,
        "h": h,
        "bits": bits,
        "buckets": buckets,
        "overlap": overlap,
        "streams_per_node": streams_per_node,
        "detection_timeout_s": detection_timeout_s,
        "state_bytes_per_param": state_bytes_per_param,
        "rejoin_overhead_s": rejoin_overhead_s,
        "target_penalty": target_penalty,
    }
    if tokens_per_step is not None:
        options["tokens_per_step"] = parse_count(tokens_per_step, what="--tokens-per-step")
    if window_bytes is not None:
        options["window_bytes"] = parse_count(window_bytes, what="--window-bytes")
    inputs = PlanInputs(
        model_params=parse_count(model_params, what="--model-params"),
        sites=tuple(
            SitePlan(name, (counts if isinstance(counts, int) else counts[name]) * per_node)
            for name in order
        ),
        hops=hops,
        **{k: v for k, v in options.items() if v is not None},
    )
    result = plan(inputs)
    warn = err_console()
    for note in fabric_notes(fabric, inputs):
        warn.print(f"[yellow]note:[/] {note}")
    if as_json:
        body = result.to_json()
        body["fabric"] = fabric.name
        typer.echo(json.dumps(body, indent=2))
        return
    _render(fabric.name, result)


def _count(value: float) -> str:
    """``70e9`` → ``'70B'``; ``1.2e12`` → ``'1.2T'``."""
    for factor, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if value >= factor:
            return f"{value / factor:.3g}{suffix}"
    return f"{value:.3g}"


def _gbps(value: float | None) -> str:
    return "unreachable" if value is None else f"{value:.3g}"


def _render(fabric_name: str, result: Plan) -> None:
    i, console = result.inputs, out_console()
    where = " + ".join(f"{s.name} {s.gpus}" for s in i.sites)
    console.print(
        f"[bold]plan[/] · {fabric_name} · {_count(i.model_params)} parameters on {i.total_gpus:,} "
        f"{i.gpu_type} ({where}) · step compute {i.step_compute_s:.3g} s"
    )
    for hop in i.hops:
        km, source = hop.distance
        console.print(
            f"  {hop.a} ↔ {hop.b}: {hop.rtt_ms:g} ms RTT, {hop.capacity_gbps:g} Gbit/s, "
            f"{km:,.0f} km ({'fabric' if source == 'fabric' else 'from RTT'}) "
            f"via {', '.join(hop.circuits) or '-'}"
        )
    table = Table(title_justify="left", box=None, pad_edge=False)
    for column in ("mode", "step s", "util", "penalty", "sync s", "bound by"):
        table.add_column(column, justify="left" if column in ("mode", "bound by") else "right")
    for column in ("GB/site/sync", "avg Gb/s/node", "need Gb/s/node", "ok"):
        table.add_column(column, justify="right")
    for m in result.modes:
        table.add_row(
            m.label,
            f"{m.step_s:.3g}",
            f"{m.utilisation:.1%}",
            f"{m.penalty:+,.1%}" if m.penalty < 10 else f"{m.penalty:+,.0%}",
            f"{m.sync_s:.3g}",
            m.binding,
            f"{m.wan_bytes_per_site / 1e9:.3g}",
            f"{m.average_gbps_per_node:.3g}",
            _gbps(m.needed_gbps_per_node),
            "yes" if m.meets_target else "no",
        )
    console.print(table)
    v, c = result.verdict, result.critic
    console.print(f"[bold]verdict[/]: {v.mode or 'none'}: {v.reason}")
    console.print(f"[bold]the critic's three numbers[/] ({c.mode}):")
    console.print(
        f"  link distance     {c.link_distance_km:,.0f} km "
        f"({'fabric' if c.distance_source == 'fabric' else 'estimated from RTT'}), "
        f"{c.rtt_ms:g} ms RTT"
    )
    burst = "" if c.burst_gbps_per_node is None else f", burst {_gbps(c.burst_gbps_per_node)}"
    console.print(
        f"  bandwidth / node  average {c.average_gbps_per_node:.3g} Gbit/s{burst}; the WAN "
        f"gives {c.available_gbps_per_node:.3g}, the site {c.in_site_gbps_per_node:,.0f} "
        f"({c.oversubscription:,.0f}× oversubscribed)"
    )
    r = c.recovery
    console.print(
        f"  recovery          survivors go on after {r.survivors_s:.3g} s "
        f"(detection {r.detection_s:g} s + one interval); a site rejoins in {r.rejoin_s:.3g} s "
        f"({r.state_bytes / 1e9:.3g} GB at {r.rejoin_gbps:.3g} Gbit/s); "
        f"at most {r.steps_lost_at_most} steps lost"
    )
