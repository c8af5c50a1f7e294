"""``onecluster export request|approve|revoke|approvals``: export approvals.

A member asks (``request``); a compliance officer — another person — approves or revokes.
Times are ISO dates or date-times (UTC unless they say otherwise); sizes take decimal
units (``500GB``).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from onecluster.cli._config import open_client
from onecluster.cli._render import format_bytes, out_console
from onecluster.errors import ValidationError
from onecluster.schema import ApprovalIn, ApprovalOut, RevokeIn

__all__ = ["add_commands", "parse_size", "parse_time"]

_ROUTES = ("security_assessment", "standard_contract", "certification", "exempt")
_UNITS = {"": 1, "B": 1} | {
    f"{prefix}{b}": 10 ** (3 * (i + 1)) for i, prefix in enumerate("KMGTP") for b in ("", "B")
}


def add_commands(group: typer.Typer) -> None:
    """Add the approval commands to the ``export`` group."""
    group.command("request")(request)
    group.command("approve")(approve)
    group.command("revoke")(revoke)
    group.command("approvals")(approvals)


def request(
    ctx: typer.Context,
    *,
    dataset: str = typer.Argument(..., help="The dataset, or a family of them: a prefix and *."),
    to: list[str] = typer.Option(..., "--to", help="A destination site (repeat for more)."),
    purpose: str = typer.Option(..., "--purpose", help="What the data is for abroad."),
    route: str = typer.Option(..., "--route", help=f"The legal route: {', '.join(_ROUTES)}."),
    route_ref: str = typer.Option(
        ...,
        "--route-ref",
        help="Its reference: assessment, filing or certificate number, or the exemption's article.",
    ),
    personal: bool = typer.Option(
        ..., "--personal/--no-personal", help="Whether it holds personal information."
    ),
    sensitive: bool = typer.Option(
        False, "--sensitive", help="Whether it holds sensitive personal information."
    ),
    categories: str = typer.Option(
        "", "--categories", help="Data categories, comma-separated (general-pi, health, …)."
    ),
    profile: Path | None = typer.Option(
        None,
        "--profile",
        help="De-identification profile (YAML, docs/export.md) \\[default: every detector on "
        "every field, pseudonymised].",
    ),
    valid_from: str | None = typer.Option(
        None, "--valid-from", help="Start of validity (ISO date/time) \\[default: approval]."
    ),
    valid_until: str = typer.Option(..., "--valid-until", help="End of validity (ISO)."),
    max_bytes: str = typer.Option(
        ..., "--max-bytes", help="Most de-identified bytes all its exports may send (500GB)."
    ),
    max_exports: int | None = typer.Option(
        None, "--max-exports", min=1, help="Most exports it allows \\[default: no limit]."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the approval as JSON."),
) -> None:
    """Ask for an approval to export DATASET to --to sites; prints its id for compliance."""
    text = None
    if profile is not None:
        try:
            text = profile.read_text()
        except OSError as exc:
            msg = f"cannot read the profile {profile}: {exc.strerror or exc}"
            raise ValidationError(msg) from exc
    body = ApprovalIn.model_validate(
        {
            "dataset": dataset,
            "destinations": to,
            "purpose": purpose,
            "categories": [c.strip() for c in categories.split(",") if c.strip()],
            "personal": personal,
            "sensitive": sensitive,
            "route": route,
            "route_ref": route_ref,
            "profile": text,
            "valid_from": None if valid_from is None else parse_time(valid_from, "--valid-from"),
            "valid_until": parse_time(valid_until, "--valid-until"),
            "max_bytes": parse_size(max_bytes),
            "max_exports": max_exports,
        }
    )
    with open_client(ctx) as client:
        approval = client.request_approval(body)
    _show(approval, as_json=as_json)


def approve(
    ctx: typer.Context,
    approval_id: str = typer.Argument(..., help="The approval."),
    as_json: bool = typer.Option(False, "--json", help="Print the approval as JSON."),
) -> None:
    """Approve a requested approval (a compliance token; never your own request)."""
    with open_client(ctx) as client:
        _show(client.approve(approval_id), as_json=as_json)


def revoke(
    ctx: typer.Context,
    approval_id: str = typer.Argument(..., help="The approval."),
    reason: str = typer.Option(..., "--reason", help="Why (kept with it)."),
    as_json: bool = typer.Option(False, "--json", help="Print the approval as JSON."),
) -> None:
    """Revoke an approval (a compliance token); exports under it still sending stop."""
    with open_client(ctx) as client:
        _show(client.revoke(approval_id, RevokeIn(reason=reason)), as_json=as_json)


def approvals(
    ctx: typer.Context,
    approval_id: str | None = typer.Argument(None, help="Show this one only."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """List export approvals, newest first (or show one)."""
    with open_client(ctx) as client:
        if approval_id is not None:
            _show(client.approval(approval_id), as_json=as_json)
            return
        found = client.approvals()
    if as_json:
        typer.echo(json.dumps([a.model_dump(mode="json") for a in found], indent=2))
        return
    table = Table("id", "state", "dataset", "to", "route", "used", "until", "requester")
    for a in found:
        table.add_row(
            a.id,
            a.state,
            escape(a.dataset),
            ", ".join(a.destinations),
            a.route,
            f"{format_bytes(a.bytes_used)} of {format_bytes(a.max_bytes)}",
            _iso(a.valid_until),
            escape(a.requester),
        )
    out_console().print(table)


def _show(a: ApprovalOut, *, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(a.model_dump(mode="json"), indent=2))
        return
    by = f", approved by {a.approver}" if a.approver else ""
    why = f" ({a.reason})" if a.reason else ""
    out_console().print(
        f"approval {a.id}: {a.state}{why} — {a.dataset} to {', '.join(a.destinations)} for "
        f"{a.purpose!r} under {a.route} {a.route_ref}, {_iso(a.valid_from)} to "
        f"{_iso(a.valid_until)}, {format_bytes(a.bytes_used)} of {format_bytes(a.max_bytes)} "
        f"used; requested by {a.requester}{by}",
        markup=False,
    )


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M UTC")


def parse_time(text: str, option: str) -> float:
    """An ISO date or date-time (UTC unless it carries an offset) as Unix seconds."""
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError as exc:
        msg = f"{option}: {text!r} is not an ISO date or date-time (2027-03-31, 2027-03-31T18:00)"
        raise ValidationError(msg) from exc
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def parse_size(text: str) -> int:
    """``500GB``, ``1.5TB``, ``1000`` (bytes) as bytes (decimal units)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgGtTpP]?[bB]?)\s*", text)
    if match is None or match.group(2).upper() not in _UNITS:
        msg = f"--max-bytes: {text!r} is not a size (500GB, 1.5TB, 1000000)"
        raise ValidationError(msg)
    return int(float(match.group(1)) * _UNITS[match.group(2).upper()])
