"""``onecluster export``: audited exports.  ``deid`` runs a de-identification profile on one
file locally, so that compliance can check a profile before any export; ``verify`` checks an
export register directory or a monthly bundle offline, from the public key alone.

The key comes from ``--key-file`` or else ``$ONECLUSTER_DEID_KEY`` (read once, in ``main``);
never from the command line, where ``ps`` and the shell's history would keep it.  Without
one the command refuses: a pseudonym computed without a secret key is a plain hash, and a
plain hash of a phone number or an ID number is reversed by trying every one.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from onecluster.cli._approvals import add_commands as add_approval_commands
from onecluster.cli._config import config_of
from onecluster.cli._exporting import add_commands as add_export_commands
from onecluster.cli._render import err_console, out_console
from onecluster.errors import ValidationError
from onecluster.export import DeidReport, deidentify, load_profile
from onecluster.register import read_public_key
from onecluster.register import verify as verify_register

__all__ = ["read_key", "register"]


def register(app: typer.Typer) -> None:
    """Add the ``export`` group (``deid``) to ``app``."""
    group = typer.Typer(
        help="Audited exports: approvals, exports, the register, de-identification.",
        no_args_is_help=True,
    )
    group.command("deid")(deid)
    group.command("verify")(verify)
    group.command("copy-register")(copy_register)
    add_approval_commands(group)
    add_export_commands(group)
    app.add_typer(group, name="export")


def deid(
    ctx: typer.Context,
    *,
    source: Path = typer.Option(
        ..., "--input", help="The file to de-identify: .csv, .tsv, .jsonl, .ndjson, .parquet."
    ),
    output: Path = typer.Option(
        ..., "--output", help="Where to write the de-identified copy (same format)."
    ),
    profile: Path | None = typer.Option(
        None,
        "--profile",
        help="De-identification profile (YAML or JSON, docs/export.md); without one every "
        "detector runs on every field and what it finds is pseudonymised.",
    ),
    key_file: Path | None = typer.Option(
        None,
        "--key-file",
        help="File holding the HMAC key (≥ 16 bytes) \\[default: $ONECLUSTER_DEID_KEY].",
        show_default=False,
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report as one JSON object."),
) -> None:
    """De-identify one file with a profile, and report what was found and changed.

    The output is written beside its final name and renamed into place only when the whole
    input was read; a refused run (a malformed row, a profile naming a missing column)
    leaves no output at all.
    """
    key = read_key(key_file, config_of(ctx).deid_key)
    parsed = load_profile(profile) if profile is not None else None
    report = deidentify(source, output, key=key, profile=parsed)
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
        return
    _render(report)


def verify(
    directory: Path = typer.Argument(
        ..., help="An export register directory, or a monthly bundle written from one."
    ),
    *,
    public_key: Path | None = typer.Option(
        None,
        "--public-key",
        help="The register's public key as you pinned it (PEM, raw, hex or base64) "
        "\\[default: the directory's own public.key; compare its fingerprint].",
        show_default=False,
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report as one JSON object."),
) -> None:
    """Check an export register or a monthly bundle offline: every signature, every entry
    against the signed tree heads, the consistency between heads.

    Exit 0 and "verified: …" when it all holds; exit 10 naming the first entry that does
    not (an edited, missing, inserted or reordered entry, a checkpoint signed by another
    key, a bundle cut short).
    """
    pinned = read_public_key(public_key) if public_key is not None else None
    report = verify_register(directory, public_key=pinned)
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=2))
        return
    out_console().print(escape(report.summary()), soft_wrap=True)
    if pinned is None:
        out_console().print(
            f"key fingerprint: {report.key_fingerprint} (the directory's public.key: compare it "
            "with the one the register's operator published, or pass --public-key)",
            soft_wrap=True,
        )


def copy_register(
    ctx: typer.Context,
    out: Path = typer.Argument(..., help="A new (or empty) folder to write the copy into."),
    *,
    db: str | None = typer.Option(
        None,
        "--db",
        help=r"The servers' database URL \[default: SQLite at <state-dir>/onecluster.db].",
        show_default=False,
    ),
) -> None:
    """Copy the export register out of the servers' database into a register folder, byte
    for byte, for `onecluster export verify` to check offline (run it where the database
    can be reached; nothing in the database is changed)."""
    from onecluster.server import copy_register as copy_out
    from onecluster.state_dir import DATABASE_FILE
    from onecluster.store import Store, make_engine

    url = db or f"sqlite:///{config_of(ctx).state_dir / DATABASE_FILE}"
    store = Store(make_engine(url))
    try:
        count = copy_out(store, out)
    finally:
        store.close()
    where = escape(str(out))
    out_console().print(
        f"copied {count} entries to {where}: onecluster export verify {where}", soft_wrap=True
    )


def read_key(key_file: Path | None, from_environment: str | None) -> bytes:
    """The key: the contents of ``key_file`` if given (whitespace around it dropped), else
    ``$ONECLUSTER_DEID_KEY``; :class:`ValidationError` when there is neither.  A key file
    that others may read earns a warning on stderr."""
    if key_file is not None:
        try:
            raw = key_file.read_bytes()
            mode = key_file.stat().st_mode
        except OSError as exc:
            msg = f"cannot read the key file {key_file}: {exc.strerror or exc}"
            raise ValidationError(msg) from exc
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            err_console().print(
                f"[yellow]warning:[/] the key file {escape(str(key_file))} can be read by "
                "others: chmod 600 it"
            )
        key = raw.strip()
        if not key:
            msg = f"the key file {key_file} is empty"
            raise ValidationError(msg, hint="make a key with: openssl rand -hex 32 > KEYFILE")
        return key
    if from_environment:
        return from_environment.encode()
    msg = (
        "no de-identification key: give --key-file or set ONECLUSTER_DEID_KEY.  The key is "
        "what makes a pseudonym irreversible: without a secret key a pseudonym is a plain "
        "hash, and a hash of a phone or ID number is reversed by brute force (trying all "
        "10¹⁰ mobile numbers takes minutes)"
    )
    hint = "make one with: openssl rand -hex 32 > deid.key; chmod 600 deid.key"
    raise ValidationError(msg, hint=hint)


def _render(report: DeidReport) -> None:
    console = out_console()
    table = Table(title="found and replaced, per detector")
    table.add_column("detector")
    table.add_column("found", justify="right")
    table.add_column("distinct", justify="right")
    for kind, count in sorted(report.detectors.items()):
        table.add_row(kind, f"{count.found:,}", f"{count.distinct:,}")
    if not report.detectors:
        table.add_row("(nothing found)", "0", "0")
    console.print(table)
    fields = Table(title="per field")
    for column in ("field", "action", "changed", "found", "unparseable"):
        fields.add_column(column, justify="left" if column in ("field", "action") else "right")
    for name, tally in report.fields.items():
        fields.add_row(
            escape(name),
            tally.action,
            f"{tally.changed:,}",
            f"{tally.found:,}",
            f"{tally.unparseable:,}",
        )
    console.print(fields)
    console.print(f"records:      {report.records:,}")
    console.print(
        f"individuals:  {report.individuals:,} "
        f"({report.individuals_sensitive:,} with sensitive information)"
    )
    console.print(f"key id:       {report.key_id}")
    console.print(f"output:       {escape(report.output)} ({report.bytes_out:,} bytes)")
    console.print(f"sha256:       {report.sha256}")
