"""``onecluster report gpu``: the monthly GPU-hours, cost, utilisation and wait report."""

from __future__ import annotations

import enum
import json

import typer
from rich.table import Table

from onecluster.cli._config import open_client
from onecluster.cli._render import format_duration, out_console
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
    app.add_typer(report_app, name="report")


def gpu(
    ctx: typer.Context,
    month: str = typer.Option(..., "--month", help="The month, as YYYY-MM (UTC)."),
    output: ReportFormat = typer.Option(ReportFormat.TABLE, "--format", help="table, csv or json."),
) -> None:
    """GPU-hours (borrowed shown apart), cost, utilisation and queue wait per team and site."""
    Month.parse(month)  # a malformed month fails here, before any request
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
        f"cost {total.cost:.2f}, utilisation {_percent(total.utilization)}, {total.jobs} jobs"
    )


def _table(title: str, rows: tuple[ReportRow, ...], label: str) -> Table:
    table = Table(title=title, header_style="bold", title_justify="left")
    table.add_column(label)
    for column in ("GPU-H", "BORROWED GPU-H", "COST", "UTIL", "MEAN WAIT", "P95 WAIT", "JOBS"):
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
        )
    return table


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.2f}%"
