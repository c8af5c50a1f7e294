"""``onecluster dataset add|show|list``: register a directory at a site as a dataset (its
agent scans it in place), and see each dataset's versions and where they live."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape
from rich.table import Table

from onecluster.cli._config import open_client
from onecluster.cli._errors import ScanFailedError
from onecluster.cli._progress import Snapshot, follow, progress_for
from onecluster.cli._render import format_bytes, format_time, out_console
from onecluster.schema import DatasetAdd

if TYPE_CHECKING:
    from onecluster.schema import DatasetOut, ScanOut

__all__ = ["register"]

_ENDED = frozenset({"done", "failed"})


def register(app: typer.Typer) -> None:
    """Add the ``dataset`` command group to ``app``."""
    group = typer.Typer(help="Datasets: versions of directories at sites.", no_args_is_help=True)
    group.command("add")(add)
    group.command("show")(show)
    group.command("list")(list_datasets)
    app.add_typer(group, name="dataset")


def add(
    ctx: typer.Context,
    *,
    name: str = typer.Argument(..., help="The dataset (a new name, or a new version of one)."),
    site: str = typer.Option(..., "--site", help="The site where the directory is."),
    path: str = typer.Option(
        ...,
        "--path",
        help="The directory at that site (a relative one is taken from the current "
        "directory, for sites that share this filesystem).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the scan as JSON."),
    no_wait: bool = typer.Option(False, "--no-wait", help="Return once the scan is queued."),
    interval: float = typer.Option(0.5, "--interval", min=0.05, help="Seconds between polls."),
) -> None:
    """Register DIR at SITE as dataset NAME: the site's agent scans it in place, and the
    version it finds (its Merkle root) is printed with whether it is new.  Waits for the scan
    (a progress bar of the bytes read); a failed scan exits 10 with its error."""
    if not path.strip():
        raise typer.BadParameter("give the directory at the site", param_hint="--path")
    body = DatasetAdd(name=name, site=site, path=str(Path(path).absolute()))  # bad input: 2
    console = out_console()
    with open_client(ctx) as client:
        scan = client.add_dataset(body)
        if not no_wait:
            with progress_for(f"scan {body.path} at {site}", console, quiet=as_json) as bar:
                scan = follow(
                    lambda: client.scan(scan.id),
                    first=scan,
                    ended=lambda s: s.state in _ENDED,
                    show=lambda s: bar.show(_snapshot(s)),
                    interval=interval,
                )
    if as_json:
        typer.echo(json.dumps(scan.model_dump(mode="json"), indent=2))
    elif scan.state not in _ENDED:
        console.print(f"scan {scan.id} of {escape(scan.path)} at {site} is {scan.state}")
    elif scan.state == "done":
        what = "a new version" if scan.new_version else "a version it already had"
        console.print(
            f"dataset {name}: {what}, {scan.root} ({format_bytes(scan.bytes_total)}, "
            f"{scan.files_total if scan.files_total is not None else '?'} files)"
        )
    if scan.state == "failed":
        msg = f"the scan of {scan.path} at {site} failed: {scan.error or 'no reason given'}"
        raise ScanFailedError(msg, hint=f"fix the directory at {site} and run this again")


def _snapshot(scan: ScanOut) -> Snapshot:
    files = f"{scan.files_done} of {scan.files_total if scan.files_total is not None else '?'}"
    return Snapshot(
        state=scan.state,
        done=scan.bytes_done,
        total=scan.bytes_total,
        note=f"{files} files",
    )


def show(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="The dataset."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Every version of a dataset, newest first, and its replica at each site: complete or
    partial, bytes there, path."""
    with open_client(ctx) as client:
        dataset = client.dataset(name)
    if as_json:
        typer.echo(json.dumps(dataset.model_dump(mode="json"), indent=2))
        return
    console = out_console()
    if dataset.declared_bytes is not None:
        console.print(f"declared in the fabric: {format_bytes(dataset.declared_bytes)}")
    if not dataset.versions:
        console.print(f"dataset {name} has no scanned version yet")
        return
    console.print(_versions_table(dataset))


def _versions_table(dataset: DatasetOut) -> Table:
    table = Table(header_style="bold")
    for column in ("VERSION", "SCANNED", "SIZE", "FILES", "SITE", "REPLICA", "BYTES", "PATH"):
        table.add_column(column, no_wrap=column in {"VERSION", "SITE"})
    for version in dataset.versions:
        latest = " (latest)" if version.root == dataset.latest else ""
        first = (
            f"{version.root[:12]}{latest}",
            format_time(version.created_at),
            format_bytes(version.bytes),
            str(version.files),
        )
        if not version.replicas:
            table.add_row(*first, "-", "[red]nowhere[/]", "-", "-")
        for i, r in enumerate(version.replicas):
            colour = "green" if r.state == "complete" else "yellow"
            table.add_row(
                *(first if i == 0 else ("", "", "", "")),
                r.site,
                f"[{colour}]{r.state}[/]",
                format_bytes(r.bytes_present),
                escape(r.path or "-"),
            )
    return table


def list_datasets(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Every dataset, registered or declared in the fabric: its latest version, its size
    and the sites holding all of it."""
    with open_client(ctx) as client:
        found = client.datasets()
    if as_json:
        typer.echo(json.dumps([d.model_dump(mode="json") for d in found], indent=2))
        return
    table = Table(header_style="bold")
    for column in ("DATASET", "LATEST", "SIZE", "VERSIONS", "COMPLETE AT"):
        table.add_column(column)
    for d in found:
        latest = d.versions[0] if d.versions else None
        size = latest.bytes if latest is not None else d.declared_bytes
        complete = [r.site for r in latest.replicas if r.state == "complete"] if latest else []
        table.add_row(
            d.name,
            latest.root[:12] if latest is not None else "[dim]declared[/]",
            format_bytes(size),
            str(len(d.versions)),
            ", ".join(complete) or "-",
        )
    out_console().print(table)
