"""The live view fits an 80-column terminal, and where stdout is no terminal a plain line of
progress comes every few seconds instead."""

from __future__ import annotations

import io

from rich.console import Console

from onecluster.schema import PoolOut, SiteOut, SiteStatsOut, StatsOut
from onecluster.up._live import PlainProgress, ViewState, progress_line, render_view

SITES = (("shanghai", "H800", 512, 480), ("singapore", "H100", 384, 384), ("tokyo", "H100", 304, 8))


def _view(elapsed_s: float = 42.0, *, events: tuple[str, ...] = ()) -> ViewState:
    """A busy moment of a long replay: four-digit counts everywhere."""
    stats = StatsOut(
        gpus_total=1200,
        gpus_busy=872,
        utilization=872 / 1200,
        pending=1234,
        running=2345,
        completed=3456,
        failed=4567,
        cancelled=5678,
        preemptions=6789,
        mean_wait_s=1.5,
        p95_wait_s=3.0,
        sites={name: SiteStatsOut(gpus=n, busy=b, pending=7) for name, _, n, b in SITES},
    )
    sites = tuple(
        SiteOut(
            name=name,
            region="r",
            jurisdiction="X",
            backend="local",
            status="up",
            last_heartbeat=0.0,
            pools=[PoolOut(gpu_type=gpu, count=n, cost_per_gpu_hour=1.0, used=b)],
        )
        for name, gpu, n, b in SITES
    )
    return ViewState(
        fabric="three-site",
        elapsed_s=elapsed_s,
        duration_s=90,
        submitted=315,
        to_submit=315,
        stats=stats,
        sites=sites,
        events=events,
    )


def _render(view: ViewState, width: int) -> list[str]:
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(render_view(view))
    return out.getvalue().splitlines()


def test_the_live_view_fits_80_columns_without_cutting_or_wrapping_a_figure() -> None:
    long_event = "failed    job-0042 [vision]: " + "the command exited with status 1 " * 4
    view = _view(events=("submitted job-0001 [llm] 256 GPUs, 12s", long_event))
    lines = _render(view, 80)
    assert all(len(line) <= 80 for line in lines)
    # nothing wraps: the view has as many lines as on a terminal wide enough for anything
    assert len(lines) == len(_render(view, 240)), "\n".join(lines)
    # the job counts are one line, every figure on it whole
    counts = [line for line in lines if "running" in line]
    assert len(counts) == 1, "\n".join(lines)
    for figure in ("running 2345", "completed 3456", "failed 4567", "preemptions 6789"):
        assert figure in counts[0], "\n".join(lines)
    # per site and in all: busy/total, utilisation and the queue on the site's own line
    for name, _, total, busy in SITES:
        row = next(line for line in lines if f" {name} " in line)
        assert f"{busy}/{total}" in row and f"{busy / total:.1%}" in row
    total_row = next(line for line in lines if " all " in line)
    assert "872/1200" in total_row and "72.7%" in total_row and "1234" in total_row
    # an event too long for the screen is one line, cut, not wrapped onto the next
    assert sum("job-0042" in line for line in lines) == 1
    assert any("job-0042" in line and line.rstrip(" │").endswith("…") for line in lines)
    # and the whole view fits a 24-row terminal with the eight latest events
    assert len(_render(_view(events=tuple(f"event {i}" for i in range(20))), 80)) <= 22


def test_plain_progress_prints_the_first_view_then_a_line_every_five_seconds_and_the_last() -> None:
    printed: list[str] = []
    progress = PlainProgress(printed.append, every_s=5.0)
    for tick in range(0, 181):  # a 90 s replay refreshed twice a second
        progress(_view(elapsed_s=tick / 2))
    assert len(printed) == 19  # 0, 5, …, 85 s and the end at 90 s
    assert printed[0].startswith("0s/90s") and printed[-1].startswith("90s/90s")
    assert printed[1].startswith("5s/90s")
    assert printed[-1] == progress_line(_view(elapsed_s=90))
    assert "submitted 315/315" in printed[-1] and "completed 3456" in printed[-1]
    assert "GPUs 872/1200 (72.7%)" in printed[-1]


def test_a_progress_line_before_the_first_stats_says_what_it_knows() -> None:
    view = ViewState(
        fabric="f",
        elapsed_s=0.2,
        duration_s=30,
        submitted=0,
        to_submit=9,
        stats=None,
        sites=(),
        events=(),
    )
    assert progress_line(view) == "0s/30s  submitted 0/9"
