"""``onecluster report gpu``: the monthly GPU-hours, cost, utilisation, wait and GPU-hours
lost to preemption; ``onecluster report llm``: the LLM gateway's monthly bill per team, from
its ledger."""

from __future__ import annotations

import csv
import enum
import io
import json
from decimal import Decimal
from pathlib import Path

import typer
from rich.table import Table

from onecluster.cli._config import config_of, open_client
from onecluster.cli._options import Policy
from onecluster.cli._render import format_duration, out_console
from onecluster.errors import ValidationError
from onecluster.reports import GpuReport, Month, ReportRow

__all__ = ["register"]


class ReportFormat(enum.StrEnum):
    """How the report is printed."""

    TABLE = "table"
    CSV = "csv"
    JSON = "json"


def register(app: typer.Typer) -> None:
    """Add the ``report`` group (``report gpu``) to ``app``."""
    report_app = typer.Typer(help="Monthly reports (admin token).", no_args_is_help=True)
    report_app.command("gpu")(gpu)
    report_app.command("llm")(llm)
    app.add_typer(report_app, name="report")


def gpu(
    ctx: typer.Context,
    month: str = typer.Option(..., "--month", help="The month, as YYYY-MM (UTC)."),
    output: ReportFormat = typer.Option(ReportFormat.TABLE, "--format", help="table, csv or json."),
    compare: Policy | None = typer.Option(
        None,
        "--compare",
        help="Instead: replay the month's jobs under the one queue and under this policy "
        "(separate: today's per-site queues) and show each team's wait, JCT and GPU-hours "
        "under both.",
    ),
) -> None:
    """GPU-hours (borrowed shown apart), cost, utilisation, queue wait and GPU-hours lost to
    preemption per team and site."""
    Month.parse(month)  # a malformed month fails here, before any request
    if compare is not None:
        _before_after(ctx, month, compare, output)
        return
    with open_client(ctx) as client:
        body = client.gpu_report(month)
    report = GpuReport.from_json(body)
    if output is ReportFormat.JSON:
        typer.echo(json.dumps(report.to_json(), indent=2))
        return
    if output is ReportFormat.CSV:
        typer.echo(report.to_csv(), nl=False)
        return
    console = out_console()
    console.print(_table(f"GPU report {report.month}, by team", report.rows_by_team, "TEAM"))
    console.print(_table(f"GPU report {report.month}, by site", report.rows_by_site, "SITE"))
    total = report.total
    console.print(
        f"total: {total.gpu_hours:.1f} GPU-h ({total.borrowed_gpu_hours:.1f} borrowed), "
        f"cost {total.cost:.2f}, utilisation {_percent(total.utilization)}, {total.jobs} jobs, "
        f"{total.lost_gpu_hours:.1f} GPU-h lost to preemption"
    )


def _before_after(ctx: typer.Context, month: str, policy: Policy, output: ReportFormat) -> None:
    from onecluster.cli._compare import comparison_table
    from onecluster.simulate import MIN_JOBS, TeamComparison

    if policy is Policy.UNIFIED:
        msg = "--compare needs the policy to compare the one queue with: separate or fifo"
        raise ValidationError(msg)
    if output is ReportFormat.CSV:
        msg = "--compare prints a table or JSON, not CSV"
        raise ValidationError(msg)
    with open_client(ctx) as client:
        body = client.gpu_before_after(month, policy.value)
    if output is ReportFormat.JSON:
        typer.echo(json.dumps(body, indent=2))
        return
    rows = tuple(TeamComparison.from_json(r) for r in body.get("teams", []))
    console = out_console()
    console.print(f"{body.get('jobs', 0)} jobs submitted in {month}, replayed under both")
    console.print(comparison_table(rows, after="unified", before=policy.value))
    losing = body.get("losing_teams") or []
    console.print(
        f"teams that would lose under the one queue: {', '.join(map(str, losing))}"
        if losing
        else f"no team with {MIN_JOBS}+ jobs waits longer under the one queue"
    )


def _table(title: str, rows: tuple[ReportRow, ...], label: str) -> Table:
    table = Table(title=title, header_style="bold", title_justify="left")
    table.add_column(label)
    columns = ("GPU-H", "BORROWED GPU-H", "COST", "UTIL", "MEAN WAIT", "P95 WAIT", "JOBS")
    for column in (*columns, "LOST GPU-H"):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(
            row.name,
            f"{row.gpu_hours:.1f}",
            f"{row.borrowed_gpu_hours:.1f}",
            f"{row.cost:.2f}",
            _percent(row.utilization),
            format_duration(row.mean_wait_s),
            format_duration(row.p95_wait_s),
            str(row.jobs),
            f"{row.lost_gpu_hours:.1f}",
        )
    return table


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.2f}%"


def llm(
    ctx: typer.Context,
    month: str = typer.Option(..., "--month", help="The month, as YYYY-MM (UTC)."),
    db: str | None = typer.Option(
        None,
        "--db",
        help="Gateway database (a SQLite file or a postgresql:// URL) "
        "\\[default: <state-dir>/gateway.db].",
        show_default=False,
    ),
    currency: str = typer.Option("USD", "--currency", help="The bill's currency (a label)."),
    output: ReportFormat = typer.Option(ReportFormat.TABLE, "--format", help="table, csv or json."),
) -> None:
    """The LLM bill of a month per team and model: calls, tokens, cost (the ledger's sums)."""
    from onecluster.gateway import NANO, GatewayStore

    when = Month.parse(month)
    path = db or config_of(ctx).state_dir / "gateway.db"
    if "://" not in str(path) and not Path(path).exists():
        msg = f"there is no gateway database at {path}"
        raise ValidationError(msg, hint="pass --db, or run `onecluster gateway serve` first")
    store = GatewayStore(path)
    try:
        lines = store.bill(when.year * 12 + when.month - 1)
    finally:
        store.close()
    rows = [
        {
            "team": line.team,
            "model": line.model,
            "calls": line.calls,
            "prompt_tokens": line.prompt_tokens,
            "completion_tokens": line.completion_tokens,
            "cost": f"{Decimal(line.cost) / NANO:.6f}",
            "estimated_calls": line.estimated_calls,
        }
        for line in lines
    ]
    if output is ReportFormat.JSON:
        typer.echo(json.dumps({"month": month, "currency": currency, "lines": rows}, indent=2))
        return
    if output is ReportFormat.CSV:
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]) if rows else ["team"])
        writer.writeheader()
        writer.writerows(rows)
        typer.echo(buffer.getvalue(), nl=False)
        return
    table = Table(title=f"LLM bill {month} ({currency})", header_style="bold", title_justify="left")
    for column in ("TEAM", "MODEL", "CALLS", "PROMPT TOK", "COMPLETION TOK", "COST", "ESTIMATED"):
        left = column in ("TEAM", "MODEL")
        table.add_column(column, justify="left" if left else "right", no_wrap=left)
    for row in rows:
        table.add_row(*(str(v) for v in row.values()))
    console = out_console()
    console.print(table)
    teams: dict[str, int] = {}
    for line in lines:
        teams[line.team] = teams.get(line.team, 0) + line.cost
    for team, cost in teams.items():
        console.print(f"{team}: {Decimal(cost) / NANO:.6f} {currency}")
    console.print(f"total: {Decimal(sum(teams.values())) / NANO:.6f} {currency}")
