"""The live view of ``up``: per-site GPU bars, the queue, job counts and recent events.

:func:`render_view` is a pure function of a :class:`ViewState` snapshot, so it can be
tested by rendering to a string; ``up`` refreshes it about twice a second from
``/api/v1/stats`` and ``/api/v1/sites``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from onecluster.schema import SiteOut, StatsOut

__all__ = ["ViewState", "render_summary", "render_view"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ViewState:
    """What the live view shows at one instant."""

    fabric: str
    elapsed_s: float
    duration_s: float
    submitted: int
    to_submit: int
    stats: StatsOut | None
    sites: tuple[SiteOut, ...]
    events: tuple[str, ...]


def render_view(state: ViewState) -> RenderableType:
    """The whole live view as one Rich renderable."""
    title = (
        f"onecluster up · fabric {state.fabric} · "
        f"{min(state.elapsed_s, state.duration_s):.0f}s / {state.duration_s:.0f}s · "
        f"submitted {state.submitted}/{state.to_submit}"
    )
    parts: list[RenderableType] = [_sites_table(state.sites, state.stats)]
    if state.stats is not None:
        parts.append(_counts(state.stats))
    events = Text("\n".join(state.events[-8:]) or "waiting for the first job…", style="dim")
    parts.append(Panel(events, title="recent events", title_align="left"))
    return Panel(Group(*parts), title=title, title_align="left")


def render_summary(stats: StatsOut, *, mean_utilization: float | None) -> Table:
    """The end-of-replay summary, from ``/api/v1/stats`` (and the utilisation sampled from it)."""
    table = Table(title="summary", title_justify="left", show_header=False, box=None)
    table.add_column(style="bold")
    table.add_column(justify="right")
    if mean_utilization is not None:
        table.add_row("mean GPU utilisation during the replay", f"{mean_utilization:.1%}")
    table.add_row("GPU utilisation now", f"{stats.utilization:.1%}")
    table.add_row("GPUs (busy / total)", f"{stats.gpus_busy} / {stats.gpus_total}")
    table.add_row("jobs completed", str(stats.completed))
    table.add_row("jobs failed", str(stats.failed))
    table.add_row("jobs cancelled", str(stats.cancelled))
    table.add_row("jobs running", str(stats.running))
    table.add_row("jobs pending", str(stats.pending))
    table.add_row("preemptions", str(stats.preemptions))
    table.add_row("mean queue wait", f"{stats.mean_wait_s:.1f}s")
    table.add_row("p95 queue wait", f"{stats.p95_wait_s:.1f}s")
    return table


def _sites_table(sites: Sequence[SiteOut], stats: StatsOut | None) -> Table:
    table = Table(header_style="bold", expand=True, box=None)
    table.add_column("SITE", no_wrap=True)
    table.add_column("AGENT", no_wrap=True)
    table.add_column("GPUS BUSY", ratio=1)
    table.add_column("BUSY/TOTAL", justify="right", no_wrap=True)
    table.add_column("QUEUED", justify="right", no_wrap=True)
    colours = {"up": "green", "down": "red"}
    for site in sites:
        total = sum(p.count for p in site.pools)
        busy = sum(p.used for p in site.pools)
        site_stats = stats.sites.get(site.name) if stats is not None else None
        table.add_row(
            site.name,
            Text(site.status, style=colours.get(site.status, "yellow")),
            ProgressBar(total=max(total, 1), completed=busy, width=None),
            f"{busy}/{total}",
            str(site_stats.pending) if site_stats is not None else "-",
        )
    return table


def _counts(stats: StatsOut) -> Text:
    return Text.assemble(
        ("queue ", "bold"),
        f"{stats.pending}  ",
        ("running ", "bold"),
        f"{stats.running}  ",
        ("completed ", "bold"),
        f"{stats.completed}  ",
        ("failed ", "bold"),
        f"{stats.failed}  ",
        ("preemptions ", "bold"),
        f"{stats.preemptions}  ",
        ("utilisation ", "bold"),
        f"{stats.utilization:.1%}",
    )
