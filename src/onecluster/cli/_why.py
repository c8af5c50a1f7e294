"""``onecluster jobs ID --why``: a pending job's explanation, rendered."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from onecluster.cli._render import format_bytes, format_duration, format_time

if TYPE_CHECKING:
    from onecluster.schema import PoolWhyOut, WhyOut

__all__ = ["why_view"]

_VERDICT = {
    "starts": "starts in this pass",
    "reclaims": "reclaims GPUs by preemption; starts once they are free",
    "claims": "has claimed GPUs that are being freed; starts once they are",
    "reserved": "blocked; the next GPUs to free in one pool are reserved for it",
    "held_back": "fits, but only by delaying a reserved job: held back",
    "deferred": "could only borrow idle GPUs, and in-quota work took them",
    "blocked": "blocked: too few free GPUs where it may run",
    "not_reached": "not reached: the pass ran out of GPUs before it",
}
_TERMS = {
    "quota": "in quota",
    "home": "home, beyond quota",
    "borrowed": "borrowed",
    "open": "-",
}


def why_view(why: WhyOut) -> RenderableType:
    """The summary, the job's standing, and one row per pool it may use."""
    types = "/".join(why.gpu_types) or "any GPU"
    head = Text.assemble(
        (f"job {why.job_id}", "bold"),
        f" (team {why.team}, {why.gpus} × {types}, {why.priority_class}): ",
        why.summary,
    )
    facts = Table(show_header=False, box=None)
    facts.add_column(style="bold")
    facts.add_column()
    facts.add_row("decision", escape(_decision(why)))
    facts.add_row(
        "place in line",
        f"{why.ahead} of {why.pending} pending jobs go first ({why.ahead_higher_class} of a "
        f"higher class, {why.ahead_same_class} of its class)"
        if why.policy != "fifo"
        else f"{why.ahead} of {why.pending} pending jobs were submitted before it (fifo)",
    )
    facts.add_row(
        "priority",
        f"{why.priority:.0f} (fair share {why.fair_factor:.2f}: usage {why.usage_gpus:.1f} "
        f"GPUs at weight {why.weight:g}; age {why.age_factor:.2f}: waited "
        f"{format_duration(why.waited_s)})",
    )
    facts.add_row(
        "teams ahead",
        escape(
            ", ".join(
                f"{t.team} {t.priority:.0f} ({t.jobs} job{'s' if t.jobs != 1 else ''}, "
                f"{t.gpus} GPUs)"
                for t in why.teams_ahead
            )
            or "-"
        ),
    )
    facts.add_row(
        "guarantee",
        escape(
            "; ".join(
                f"{g.gpus} {g.gpu_type} {'at ' + g.site if g.site else 'at any site'}: "
                f"{g.used} in use, {g.borrowed} borrowed beyond it"
                for g in why.guarantee
            )
            or "-"
        ),
    )
    facts.add_row("home site", why.home_site or "-")
    return Group(head, Text(""), facts, Text(""), _pools(why.pools, why.job_id))


def _decision(why: WhyOut) -> str:
    said = _VERDICT.get(why.verdict, why.verdict)
    if why.verdict == "starts":
        where = ", ".join(f"{p.site}:{p.gpu_type}x{p.gpus}" for p in why.starts)
        return f"{said} on {where}{' (borrowed)' if why.borrowed else ''}"
    if why.reclaims:
        victims = ", ".join(f"{r.job_id} ({r.team}, {r.gpus} at {r.site})" for r in why.reclaims)
        return f"{said}: {victims}; {why.grace_s:g} s grace"
    if why.reserved:
        where = ", ".join(f"{r.site}:{r.gpu_type}x{r.gpus}" for r in why.reserved)
        return f"{said}: {where}, expected {format_time(why.expected_start_at)}"
    if why.held_for:
        return f"{said} ({', '.join(why.held_for)})"
    if why.behind is not None:
        return f"not tried: its team's older job {why.behind} of the same shape did not fit"
    return said


def _pools(pools: list[PoolWhyOut], job_id: str) -> Table:
    table = Table(header_style="bold")
    for column in (
        "SITE",
        "TYPE",
        "STATUS",
        "GPUS",
        "FREE",
        "LEFT",
        "DRAINING",
        "BORROWED",
        "RESERVED FOR",
        "TERMS",
        "DATA",
    ):
        table.add_column(column, no_wrap=True)
    for p in pools:
        reserved = "-"
        if p.reserved is not None:
            holder = "this job" if p.reserved.job_id == job_id else p.reserved.job_id
            reserved = f"{holder} ({p.reserved.gpus}, {format_time(p.reserved.start_at)})"
        if p.staging_s is None:
            data = "cannot get there"
        elif p.staging_bytes == 0:
            data = "-"  # nothing to stage
        else:
            data = f"{format_bytes(p.staging_bytes)} to stage, {format_duration(p.staging_s)}"
        table.add_row(
            p.site,
            p.gpu_type,
            p.status,
            str(p.gpus),
            str(p.free),
            str(p.left),
            str(p.draining),
            str(p.borrowed),
            escape(reserved),
            _TERMS.get(p.terms, p.terms),
            data,
        )
    return table
