"""The before-and-after table per team, shared by ``simulate --compare`` and ``report gpu``."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from onecluster.simulate import MIN_JOBS, TeamComparison

__all__ = ["comparison_table"]


def comparison_table(rows: Sequence[TeamComparison], *, after: str, before: str) -> Table:
    """Each team's mean wait, mean JCT and GPU-hours under ``after`` and ``before``; a team
    with at least :data:`MIN_JOBS` jobs that waits longer than 1.1 × its ``before`` wait
    + 60 s is marked as losing."""
    table = Table(
        title=f"per team: {after} against {before} (waits and JCT in seconds)",
        title_justify="left",
        header_style="bold",
    )
    for column in ("TEAM", "JOBS"):
        table.add_column(column, justify="left" if column == "TEAM" else "right")
    for what in ("WAIT", "JCT", "GPU-H"):
        table.add_column(f"{what} {after}", justify="right")
        table.add_column(f"{what} {before}", justify="right")
    table.add_column("PREEMPTED", justify="right")
    table.add_column("VERDICT")
    for r in rows:
        if not r.judged:
            verdict = f"[dim]< {MIN_JOBS} jobs[/]"
        elif r.loses:
            verdict = "[red]loses[/]"
        else:
            verdict = "[green]keeps or gains[/]"
        table.add_row(
            r.team,
            str(r.jobs),
            f"{r.wait_s:,.0f}",
            f"{r.wait_base_s:,.0f}",
            f"{r.jct_s:,.0f}",
            f"{r.jct_base_s:,.0f}",
            f"{r.gpu_h:,.1f}",
            f"{r.gpu_h_base:,.1f}",
            str(r.preemptions),
            verdict,
        )
    return table
