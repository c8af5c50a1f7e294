"""``onecluster simulate``: replay a trace on a fabric under a policy, on a virtual clock."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from onecluster.cli._options import Policy
from onecluster.cli._render import err_console, out_console
from onecluster.errors import ValidationError
from onecluster.model import Fabric

if TYPE_CHECKING:
    from onecluster.workload import TraceJob

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add the ``simulate`` command to ``app``."""
    app.command("simulate")(simulate)


def simulate(
    *,
    fabric_path: Path = typer.Option(..., "--fabric", help="Fabric file (YAML)."),
    trace: Path | None = typer.Option(
        None, "--trace", help="Trace CSV (the project's format or an Alibaba v2023 pod list)."
    ),
    generate_jobs: int | None = typer.Option(
        None,
        "--generate",
        min=1,
        help="Instead of --trace: this many jobs from the fitted generator.",
    ),
    policy: Policy = typer.Option(Policy.UNIFIED, "--policy", help="unified, separate or fifo."),
    compare: Policy | None = typer.Option(
        None,
        "--compare",
        help="Also replay under this policy (e.g. separate) and print, per team, the wait, JCT "
        "and GPU-hours under both: would any team lose?",
    ),
    limit: int | None = typer.Option(None, "--limit", min=1, help="Replay at most this many jobs."),
    skip: int = typer.Option(0, "--skip", min=0, help="Skip this many jobs of the trace first."),
    time_scale: float = typer.Option(1.0, "--time-scale", help="Divide arrival times by this."),
    load: float | None = typer.Option(
        None,
        "--load",
        help="Instead of --time-scale: compress arrivals so the jobs ask for this share of the "
        "fabric's GPU-time (1.0 = every GPU busy).",
    ),
    max_duration: float | None = typer.Option(
        None,
        "--max-duration",
        help="Clip run times to this many seconds (Alibaba pods include months-long services).",
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the generator (with --generate)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object on stdout."),
) -> None:
    """Simulate a workload on a fabric; deterministic for the same inputs."""
    from onecluster.cli._compare import comparison_table
    from onecluster.fabric import load_fabric
    from onecluster.simulate import MIN_JOBS, compare_teams
    from onecluster.simulate import simulate as run_simulation
    from onecluster.workload import at_load

    if (trace is None) == (generate_jobs is None):
        msg = "simulate needs exactly one of --trace and --generate"
        raise ValidationError(msg, hint="e.g. --trace trace.csv, or --generate 500")
    if load is not None and time_scale != 1.0:
        msg = "--load and --time-scale both set the arrival rate; give one of them"
        raise ValidationError(msg)
    fabric = load_fabric(fabric_path)
    warn = err_console()
    jobs = _jobs(
        fabric,
        trace,
        generate_jobs,
        limit=limit,
        skip=skip,
        time_scale=time_scale,
        max_duration=max_duration,
        seed=seed,
        warnings=warn.print,
    )
    if not jobs:
        skipped = f" after skipping {skip}" if skip else ""
        msg = f"{trace} holds no GPU job to simulate{skipped}"
        raise ValidationError(
            msg, hint="CPU pods (num_gpu 0) and pods never scheduled are left out"
        )
    if load is not None:
        jobs, scale = at_load(jobs, fabric.total_gpus, load)
        warn.print(f"arrivals compressed ×{scale:.3g} to an offered load of {load:.0%}")
    result = run_simulation(fabric, jobs, policy.value, seed=seed)
    for warning in result.warnings:
        warn.print(f"[yellow]warning:[/] {warning}")
    baseline = None if compare is None else run_simulation(fabric, jobs, compare.value, seed=seed)
    rows = () if baseline is None else compare_teams(result, baseline)
    body = result.to_json()
    if baseline is not None:
        body["compare"] = {
            "policy": baseline.policy,
            "result": baseline.to_json(),
            "teams": [r.to_json() for r in rows],
            "losing_teams": [r.team for r in rows if r.loses],
        }
    if as_json:
        typer.echo(json.dumps(body, indent=2))
        return
    console = out_console()
    summary = Table(
        title=f"simulation · {fabric.name} · policy {policy.value}",
        title_justify="left",
        show_header=False,
        box=None,
    )
    summary.add_column(style="bold")
    summary.add_column(justify="right")
    for key in (
        "jobs",
        "jobs_completed",
        "jobs_rejected",
        "gpu_utilization",
        "window_utilization",
        "mean_wait_s",
        "p95_wait_s",
        "mean_jct_s",
        "p95_jct_s",
        "preemptions",
        "makespan_s",
        "arrival_span_s",
        "sim_wall_s",
    ):
        summary.add_row(key, str(body[key]))
    console.print(summary)
    console.print(_utilization_note(body), soft_wrap=False)
    console.print(_breakdown("team", body["teams"]))
    console.print(_breakdown("site", body["sites"]))
    if baseline is not None:
        console.print(comparison_table(rows, after=policy.value, before=baseline.policy))
        losing = [r.team for r in rows if r.loses]
        console.print(
            f"teams that lose under {policy.value}: {', '.join(losing)}"
            if losing
            else f"no team with {MIN_JOBS}+ jobs waits longer under {policy.value} "
            f"than under {baseline.policy} (× 1.1 + 60 s)"
        )


def _jobs(
    fabric: Fabric,
    trace: Path | None,
    generate_jobs: int | None,
    *,
    limit: int | None,
    skip: int,
    time_scale: float,
    max_duration: float | None,
    seed: int,
    warnings: Callable[[str], None],
) -> Sequence[TraceJob]:
    from onecluster.workload import generate, load_trace, trace_format

    teams = [t.name for t in fabric.teams]
    homes = {t.name: t.home_site for t in fabric.teams}
    if trace is None:
        assert generate_jobs is not None
        return generate(
            generate_jobs,
            seed,
            teams or ["default"],
            home_sites=homes,
            time_scale=time_scale,
            max_duration_s=max_duration,
        )
    jobs = load_trace(
        trace,
        teams=teams,
        home_sites=homes,
        time_scale=time_scale,
        skip=skip,
        limit=limit,
        max_duration_s=max_duration,
    )
    if trace_format(trace) != "alibaba":
        return jobs
    # the trace's GPU models (V100M16, G2 …) are not the fabric's; let such jobs run anywhere
    known = fabric.gpu_types
    foreign = sorted({t for j in jobs for t in j.gpu_types if t not in known})
    if foreign:
        warnings(
            f"[yellow]warning:[/] GPU models {', '.join(foreign)} of the trace are not in "
            "the fabric; jobs asking for them may run on any GPU type"
        )
    return [
        dataclasses.replace(j, gpu_types=tuple(t for t in j.gpu_types if t in known)) for j in jobs
    ]


def _utilization_note(body: dict[str, Any]) -> str:
    """Why neither utilisation is the offered load (docs/workload.md, "Offered load")."""
    return (
        "gpu_utilization: busy GPU-time ÷ (GPUs × makespan, first arrival to last completion, "
        f"{body['makespan_s']:,.0f} s); window_utilization: the same over the arrival span "
        f"({body['arrival_span_s']:,.0f} s).  An offered load counts each job's whole GPU-time "
        "against the arrival span, but GPUs fill up only as jobs arrive and late jobs run on "
        "after the span: both approach the load when the span is long beside the run times."
    )


def _breakdown(kind: str, rows: dict[str, dict[str, object]]) -> Table:
    table = Table(title=f"by {kind}", title_justify="left", header_style="bold")
    table.add_column(kind.upper())
    columns = list(next(iter(rows.values())).keys()) if rows else []
    for column in columns:
        table.add_column(column.upper(), justify="right")
    for name, values in rows.items():
        table.add_row(name, *(str(values[c]) for c in columns))
    return table
