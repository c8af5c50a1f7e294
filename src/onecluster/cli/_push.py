"""``onecluster push``: send a version of a dataset to a site and follow it to its end."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import typer

from onecluster.cli._config import open_client
from onecluster.cli._errors import TransferFailedError
from onecluster.cli._progress import Snapshot, follow, progress_for
from onecluster.cli._render import format_bytes, format_duration, format_rate, out_console
from onecluster.errors import NotFoundError, ValidationError
from onecluster.schema import PushIn

if TYPE_CHECKING:
    from onecluster.client import Client
    from onecluster.schema import TransferOut

__all__ = ["ENDED", "paths_note", "register", "resolve_version"]

#: States in which a transfer has ended.
ENDED = frozenset({"done", "failed", "cancelled"})


def register(app: typer.Typer) -> None:
    """Add the ``push`` command to ``app``."""
    app.command("push")(push)


def push(
    ctx: typer.Context,
    *,
    name: str = typer.Argument(..., help="The dataset."),
    to: str = typer.Option(..., "--to", help="The site that needs it."),
    from_site: str | None = typer.Option(
        None,
        "--from",
        help="The site to send it from \\[default: the holder of all of it best connected "
        "to --to].",
        show_default=False,
    ),
    version: str | None = typer.Option(
        None,
        "--version",
        help="The version (its root, or a prefix of it) \\[default: the latest].",
        show_default=False,
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Print the transfer as JSON (once it has ended, unless --no-wait)."
    ),
    no_wait: bool = typer.Option(False, "--no-wait", help="Return once the transfer is queued."),
    interval: float = typer.Option(0.5, "--interval", min=0.05, help="Seconds between polls."),
) -> None:
    """Send a version of dataset NAME to site --to, over every path between the sites at
    once, and wait for it (a progress bar: bytes verified of the total, rate, ETA, the paths
    in use).  Exits 10 if the transfer fails or is cancelled, printing its error.  Pushing a
    version the site already holds, or one already on its way there, sends nothing new."""
    console = out_console()
    with open_client(ctx) as client:
        root = None if version is None else resolve_version(client, name, version)
        body = PushIn.model_validate(
            {"dataset": name, "to": to, "from": from_site, "version": root}
        )
        transfer = client.push(body)
        if not no_wait:
            label = f"{name}@{transfer.root[:12]} {transfer.src} → {transfer.dst}"
            with progress_for(label, console, quiet=as_json) as bar:
                transfer = follow(
                    lambda: client.transfer(transfer.id),
                    first=transfer,
                    ended=lambda t: t.state in ENDED,
                    show=lambda t: bar.show(_snapshot(t)),
                    interval=interval,
                )
    if as_json:
        typer.echo(json.dumps(transfer.model_dump(mode="json"), indent=2))
    else:
        console.print(summary(transfer), markup=False)
    if transfer.state in ("failed", "cancelled"):
        why = transfer.error or ("it was cancelled" if transfer.state == "cancelled" else "?")
        msg = f"transfer {transfer.id} to {transfer.dst} {transfer.state}: {why}"
        raise TransferFailedError(msg, hint=f"see `onecluster transfers {transfer.id}`")


def resolve_version(client: Client, dataset: str, version: str) -> str:
    """The root of ``dataset``'s one version that starts with ``version``."""
    if len(version) == 64:
        return version
    roots = [v.root for v in client.dataset(dataset).versions if v.root.startswith(version)]
    if len(roots) == 1:
        return roots[0]
    if not roots:
        msg = f"dataset {dataset} has no version starting with {version!r}"
        raise NotFoundError(msg, hint=f"its versions: `onecluster dataset show {dataset}`")
    msg = f"{version!r} starts {len(roots)} versions of {dataset}; give more of the root"
    raise ValidationError(msg, hint=f"its versions: `onecluster dataset show {dataset}`")


def paths_note(transfer: TransferOut) -> str:
    """The paths that carry (or carried) bytes, else the paths planned."""
    used = [p.name for p in transfer.paths if p.bytes > 0] or [p.name for p in transfer.paths]
    return ("over " + ", ".join(used)) if used else "no path yet"


def summary(t: TransferOut) -> str:
    """One line on where a transfer stands."""
    head = f"transfer {t.id}: {t.dataset}@{t.root[:12]} {t.src} → {t.dst} {t.state}"
    if t.state == "done" and t.bytes_sent == 0 and t.finished_at == t.created_at:
        return f"{head}: {t.dst} holds all of it already, nothing sent"
    return (
        f"{head}: {format_bytes(t.bytes_done)} of {format_bytes(t.bytes_total)} verified in "
        f"{format_duration(t.seconds)} ({format_rate(t.rate_bps)}), "
        f"{format_bytes(t.bytes_sent)} sent {paths_note(t)}"
    )


def _snapshot(t: TransferOut) -> Snapshot:
    return Snapshot(
        state=t.state,
        done=t.bytes_done,
        total=t.bytes_total,
        rate_bps=t.rate_bps,
        eta_s=t.eta_s,
        note=paths_note(t),
    )
