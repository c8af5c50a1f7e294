"""``onecluster fabric apply|show``: change the fabric while it runs, and see the one in force.

``apply`` checks the file here (errors name its lines), asks the server what it would change
and strand (a dry run), shows that as a table, asks to confirm (unless ``--yes``) and applies
it against the version it showed: a change someone made meanwhile is refused, never
overwritten unseen.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape
from rich.table import Table

from onecluster.cli._config import open_client
from onecluster.cli._render import err_console, format_time, out_console
from onecluster.errors import ConflictError
from onecluster.schema import FabricApply

if TYPE_CHECKING:
    from rich.console import Console

    from onecluster.schema import ChangeOut, DrainOut, FabricApplyOut, FabricOut

__all__ = ["changes_table", "register"]

_MARKS = {"added": "[green]+[/]", "removed": "[red]-[/]", "changed": "[yellow]~[/]"}


def register(app: typer.Typer) -> None:
    """Add the ``fabric`` command group to ``app``."""
    group = typer.Typer(
        help="The fabric in force: change it while it runs, or show it.", no_args_is_help=True
    )
    group.command("apply")(apply)
    group.command("show")(show)
    app.add_typer(group, name="fabric")


def apply(
    ctx: typer.Context,
    *,
    path: Path = typer.Argument(..., help="The fabric file (YAML) to put in force."),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Only show what would change (exit 4 if it would strand work)."
    ),
    yes: bool = typer.Option(False, "--yes", "-y", help="Apply without asking."),
    as_json: bool = typer.Option(False, "--json", help="Print the server's answer as JSON."),
) -> None:
    """Put the fabric file in force on every server replica: show the diff against the
    version in force (sites, pools, circuits, teams, quotas, datasets), ask, then apply.

    A change that would strand work (a site or pool removed or shrunk under running
    attempts, a team with jobs removed, a pending job left impossible, a transfer's site or
    circuit removed) is refused and nothing changes: drain first (`onecluster drain`)."""
    from onecluster.fabric import load_fabric

    load_fabric(path)  # the file's own errors, with its name and lines
    text = path.read_text(encoding="utf-8")
    console = out_console()
    with open_client(ctx) as client:
        plan = client.apply_fabric(FabricApply(yaml=text, dry_run=True))
        if not plan.changes or plan.strands or dry_run:
            _print(as_json, plan)
        if not plan.changes:
            err_console().print(f"no change: fabric version {plan.version} is in force already")
            return
        if not as_json:
            console.print(f"changes to fabric version {plan.base_version}:")
            console.print(changes_table(plan.changes))
        if plan.strands:
            raise _stranding(plan)
        if dry_run:
            return
        if not yes and not typer.confirm(
            f"apply this as fabric version {plan.base_version + 1}?", err=True
        ):
            err_console().print("nothing applied")
            raise typer.Exit(1)
        done = client.apply_fabric(FabricApply(yaml=text, base_version=plan.base_version))
    _print(as_json, done)
    if not as_json:
        console.print(
            f"fabric version {done.version} is in force ({len(done.changes)} change(s)); "
            "every server replica takes it at its next pass"
        )


def show(
    ctx: typer.Context,
    *,
    as_yaml: bool = typer.Option(False, "--yaml", help="Print only the fabric file in force."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of text."),
) -> None:
    """The fabric in force: its version, who applied it and when, what it changed, the
    drained sites and pools; ``--yaml`` prints the file itself."""
    with open_client(ctx) as client:
        fabric = client.fabric()
    if as_yaml:
        typer.echo(fabric.yaml, nl=not fabric.yaml.endswith("\n"))
        return
    if as_json:
        typer.echo(json.dumps(fabric.model_dump(mode="json"), indent=2))
        return
    _show(out_console(), fabric)


def changes_table(changes: list[ChangeOut]) -> Table:
    """The diff as a table: a mark (+ added, - removed, ~ changed), what, its name, and the
    values (old → new for a change)."""
    table = Table(header_style="bold")
    for column in ("", "WHAT", "NAME", "VALUES"):
        table.add_column(column)
    for c in changes:
        if c.action == "changed":
            values = "\n".join(f"{f.field}: {f.old or '-'} → {f.new or '-'}" for f in c.fields)
        else:
            values = ", ".join(
                f"{f.field} {f.new if c.action == 'added' else f.old}" for f in c.fields
            )
        table.add_row(_MARKS[c.action], c.kind, escape(c.name), escape(values))
    return table


def _drains_table(drains: list[DrainOut]) -> Table:
    table = Table(header_style="bold")
    for column in ("SITE", "POOL", "SINCE", "BY", "REASON"):
        table.add_column(column)
    for d in drains:
        table.add_row(
            d.site,
            d.gpu_type or "(all)",
            format_time(d.since),
            escape(d.by),
            escape(d.reason or "-"),
        )
    return table


def _show(console: Console, fabric: FabricOut) -> None:
    console.print(
        f"fabric {escape(fabric.name)} version {fabric.version}, applied "
        f"{format_time(fabric.applied_at)} by {escape(fabric.applied_by)}"
    )
    for line in fabric.changes:
        console.print(f"  {escape(line)}")
    if fabric.drains:
        console.print("drained (no new work):")
        console.print(_drains_table(fabric.drains))
    else:
        console.print("nothing is drained")


def _print(as_json: bool, answer: FabricApplyOut) -> None:
    if as_json:
        typer.echo(json.dumps(answer.model_dump(mode="json"), indent=2))


def _stranding(plan: FabricApplyOut) -> ConflictError:
    """The refusal of a change that would strand work (exit 4), naming it."""
    for line in plan.strands:
        err_console().print(f"[red]would strand:[/] {escape(line)}")
    msg = f"the new fabric would strand work ({len(plan.strands)} reason(s) above)"
    return ConflictError(
        msg,
        hint="drain the site or pool first (`onecluster drain SITE [--pool GPU_TYPE]`), let "
        "its work finish or cancel it, then apply again",
    )
