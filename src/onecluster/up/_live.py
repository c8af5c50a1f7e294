"""The live view of ``up``: per-site GPU bars, the queue, job counts and recent events.

:func:`render_view` is a pure function of a :class:`ViewState` snapshot, so it can be
tested by rendering to a string; ``up`` refreshes it about twice a second from
``/api/v1/stats`` and ``/api/v1/sites``.  Every line of it fits an 80-column terminal.  Where
stdout is not a terminal (a pipe, a log file) :class:`PlainProgress` prints one plain
:func:`progress_line` every few seconds instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from onecluster.schema import SiteOut, StatsOut

__all__ = ["PlainProgress", "ViewState", "progress_line", "render_summary", "render_view"]


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
    # one line per event, however long: a wrapped event would push the view off the screen
    events = Text(
        "\n".join(state.events[-8:]) or "waiting for the first job…",
        style="dim",
        no_wrap=True,
        overflow="ellipsis",
    )
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


def progress_line(state: ViewState) -> str:
    """The view as one plain line, for a pipe or a log file."""
    line = (
        f"{min(state.elapsed_s, state.duration_s):.0f}s/{state.duration_s:.0f}s  "
        f"submitted {state.submitted}/{state.to_submit}"
    )
    if state.stats is not None:
        s = state.stats
        line += (
            f"  queue {s.pending}  running {s.running}  completed {s.completed}"
            f"  failed {s.failed}  GPUs {s.gpus_busy}/{s.gpus_total} ({s.utilization:.1%})"
        )
    return line


class PlainProgress:
    """The live view where there is no terminal to redraw: ``write`` gets a
    :func:`progress_line` for the first view, then one every ``every_s`` seconds of the
    replay, and one for the last view (the end of the replay)."""

    def __init__(self, write: Callable[[str], None], *, every_s: float = 5.0) -> None:
        self._write = write
        self._every_s = every_s
        self._next_at = 0.0

    def __call__(self, state: ViewState) -> None:
        if state.elapsed_s >= self._next_at or state.elapsed_s >= state.duration_s:
            self._write(progress_line(state))
            self._next_at = state.elapsed_s + self._every_s


def _sites_table(sites: Sequence[SiteOut], stats: StatsOut | None) -> Table:
    table = Table(header_style="bold", expand=True, box=None)
    table.add_column("SITE", no_wrap=True)
    table.add_column("AGENT", no_wrap=True)
    table.add_column("GPUS BUSY", ratio=1)
    table.add_column("BUSY/TOTAL", justify="right", no_wrap=True)
    table.add_column("UTIL", justify="right", no_wrap=True)
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
            f"{busy / total:.1%}" if total else "-",
            str(site_stats.pending) if site_stats is not None else "-",
        )
    if stats is not None:
        table.add_row(
            Text("all", style="bold"),
            "",
            ProgressBar(total=max(stats.gpus_total, 1), completed=stats.gpus_busy, width=None),
            f"{stats.gpus_busy}/{stats.gpus_total}",
            f"{stats.utilization:.1%}",
            str(stats.pending),
            style="bold",
        )
    return table


def _counts(stats: StatsOut) -> Text:
    # the GPU utilisation and the queue are the table's "all" row; this line stays under 80
    # columns with four-digit counts
    return Text.assemble(
        ("running ", "bold"),
        f"{stats.running}  ",
        ("completed ", "bold"),
        f"{stats.completed}  ",
        ("failed ", "bold"),
        f"{stats.failed}  ",
        ("cancelled ", "bold"),
        f"{stats.cancelled}  ",
        ("preemptions ", "bold"),
        f"{stats.preemptions}",
        no_wrap=True,
        overflow="ellipsis",
    )
