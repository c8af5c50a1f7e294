"""``onecluster export start|list|show|register``: exports and the monthly register.

``start`` follows an export to its end: de-identified at its source, written to the
register, sent; it exits 10 when the export fails or is refused on the way (a refusal at
the door exits 5, as any forbidden request).  ``register`` writes a month's bundle for the
regulators into a directory that ``export verify`` checks offline.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from onecluster.cli._config import open_client
from onecluster.cli._errors import TransferFailedError
from onecluster.cli._push import resolve_version
from onecluster.cli._render import err_console, format_bytes, out_console
from onecluster.errors import ConflictError, ValidationError
from onecluster.schema import ExportIn, ExportOut

__all__ = ["add_commands"]

_ENDED = frozenset({"done", "failed", "refused"})


def add_commands(group: typer.Typer) -> None:
    """Add the export commands to the ``export`` group."""
    group.command("start")(start)
    group.command("list")(list_exports)
    group.command("show")(show)
    group.command("register")(register_month)


def start(
    ctx: typer.Context,
    *,
    dataset: str = typer.Argument(..., help="The dataset."),
    to: str = typer.Option(..., "--to", help="The destination site."),
    approval: str = typer.Option(..., "--approval", help="The approval it is made under."),
    version: str | None = typer.Option(
        None, "--version", help="The version (root or prefix) \\[default: the latest]."
    ),
    no_wait: bool = typer.Option(False, "--no-wait", help="Return once it is accepted."),
    as_json: bool = typer.Option(False, "--json", help="Print the export as JSON."),
    interval: float = typer.Option(0.5, "--interval", min=0.05, help="Seconds between polls."),
) -> None:
    """Export DATASET to --to under --approval: de-identified at its source, written to the
    register before its first byte leaves, then sent.  Waits for the end unless --no-wait."""
    with open_client(ctx) as client:
        root = None if version is None else resolve_version(client, dataset, version)
        body = ExportIn.model_validate(
            {"dataset": dataset, "to": to, "approval": approval, "version": root}
        )
        export = client.start_export(body)
        said = ""
        while not no_wait and export.state not in _ENDED:
            line = _progress(export, client)
            if line != said and not as_json:
                err_console().print(line, markup=False)
                said = line
            time.sleep(interval)
            export = client.export(export.id)
    _show(export, as_json=as_json)
    if export.state in ("failed", "refused"):
        msg = f"export {export.id} {export.state}: {export.error or '?'}"
        raise TransferFailedError(msg, hint=f"see `onecluster export show {export.id}`")


def _progress(export: ExportOut, client: object) -> str:
    if export.state == "preparing":
        return f"export {export.id}: de-identifying at {export.src}"
    from onecluster.client import Client

    assert isinstance(client, Client)
    if export.transfer is None:
        return f"export {export.id}: {export.state}"
    t = client.transfer(export.transfer)
    return (
        f"export {export.id}: register entry {export.intent_seq} written; "
        f"{format_bytes(t.bytes_done)} of {format_bytes(t.bytes_total)} at {export.dst}"
    )


def list_exports(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Exports, newest first."""
    with open_client(ctx) as client:
        found = client.exports()
    if as_json:
        typer.echo(json.dumps([x.model_dump(mode="json") for x in found], indent=2))
        return
    table = Table("id", "state", "dataset", "from", "to", "bytes", "entry", "approval")
    for x in found:
        entry = "" if x.intent_seq is None else str(x.intent_seq)
        table.add_row(
            x.id, x.state, escape(x.dataset), x.src, x.dst, format_bytes(x.bytes), entry, x.approval
        )
    out_console().print(table)


def show(
    ctx: typer.Context,
    export_id: str = typer.Argument(..., help="The export."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """One export."""
    with open_client(ctx) as client:
        _show(client.export(export_id), as_json=as_json)


def register_month(
    ctx: typer.Context,
    *,
    month: str = typer.Option(..., "--month", help="The month, YYYY-MM (UTC)."),
    out: Path = typer.Option(..., "--out", help="A new or empty directory for the bundle."),
) -> None:
    """Write a month's export register for the regulators into --out: every export with its
    fields, the entries with their inclusion proofs, the signed tree head, the public key;
    as CSV, JSON and printable HTML.  Check it with `onecluster export verify DIR`."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        msg = f"{out} exists and is not an empty directory"
        raise ConflictError(msg, hint="name a new directory")
    with open_client(ctx) as client:
        bundle = client.register_bundle(month)
    out.mkdir(parents=True, exist_ok=True)
    root = out.resolve()
    for name, text in bundle.files.items():
        target = (out / name).resolve()
        if root not in target.parents:
            msg = f"the server sent a file outside the bundle: {name!r}"
            raise ValidationError(msg)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(text.encode("utf-8"))  # byte for byte: the CSV ends lines in CRLF
        with target.open("rb") as handle:
            os.fsync(handle.fileno())
    out_console().print(
        f"register of {month}: {bundle.count} entries, {len(bundle.files)} files in {out}; "
        f"check it with `onecluster export verify {out}`",
        markup=False,
    )


def _show(x: ExportOut, *, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(x.model_dump(mode="json"), indent=2))
        return
    what = f"export {x.id}: {x.dataset}@{x.version[:12]} {x.src} → {x.dst} {x.state}"
    if x.content_hash:
        what += (
            f"; arrives as {x.export_dataset}@{x.content_hash[:12]} ({format_bytes(x.bytes)}, "
            f"{x.files} files, {x.individuals} individuals)"
        )
    if x.intent_seq is not None:
        what += f"; register entries {x.intent_seq}" + (
            f" and {x.end_seq}" if x.end_seq is not None else ""
        )
    if x.error:
        what += f": {x.error}"
    out_console().print(what, markup=False)
