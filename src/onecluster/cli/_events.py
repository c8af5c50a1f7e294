"""``onecluster events``: the event feed, printed once or followed, resumable from a cursor.

The server's feed is gap-free (events are committed in id order, decision 162), so the id of
the last event printed is a complete cursor: asking for the events after it later returns
every event committed since, each once, in id order.  ``--after ID`` starts after an id;
``--cursor-file PATH`` resumes after the id saved there and saves the last id printed after
every page, so that a follower restarted with the same file carries on where it stopped.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import typer
from rich.markup import escape

from onecluster.cli._config import open_client
from onecluster.cli._render import err_console, format_time, out_console
from onecluster.errors import ValidationError
from onecluster.schema import EventOut

__all__ = ["register"]

#: Events asked for at a time while catching up or following (the API's most).
_PAGE = 1000


def register(app: typer.Typer) -> None:
    """Add the ``events`` command to ``app``."""
    app.command("events")(events)


def events(
    ctx: typer.Context,
    *,
    kind: str | None = typer.Option(
        None, "--kind", help="Only kinds starting with this, e.g. link."
    ),
    limit: int = typer.Option(
        50,
        "--limit",
        min=1,
        max=1000,
        help="How many: the newest, or the first after the cursor (ignored by --follow).",
    ),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new events."),
    after: int | None = typer.Option(
        None,
        "--after",
        min=0,
        metavar="ID",
        help="Start after event ID (0: from the first), oldest first.",
    ),
    cursor_file: Path | None = typer.Option(
        None,
        "--cursor-file",
        metavar="PATH",
        help="Resume after the id saved in PATH (if any; else --after) and save there the "
        "last id printed.",
    ),
    as_json: bool = typer.Option(
        False, "--json", help="One JSON object per line: id, time, kind, job_id, message."
    ),
    interval: float = typer.Option(
        1.0, "--interval", min=0.1, help="Seconds between polls while following."
    ),
) -> None:
    """Events and alerts, oldest first: circuits down and up, route changes, sites, jobs …

    Without a cursor, the newest --limit.  With --after ID or a --cursor-file that holds an
    id, the events after it: the first --limit, or with --follow all of them and then every
    new one as it is committed.  The feed never skips an event, so a follower restarted
    with the same --cursor-file misses none (the events of a page printed just before a
    crash may print again; --json shows their ids).  Ctrl-C prints the id to resume after.
    """
    cursor = _read_cursor(cursor_file) if cursor_file is not None else None
    if cursor is None:
        cursor = after
    with open_client(ctx) as client:
        if cursor is None:
            page = client.events(kind=kind, limit=limit)
        else:
            page = client.events(kind=kind, after=cursor, limit=_PAGE if follow else limit)
        try:
            while True:
                for e in page:
                    _print(e, as_json=as_json)
                if page:
                    cursor = page[-1].id
                    sys.stdout.flush()
                    if cursor_file is not None:
                        _save_cursor(cursor_file, cursor)
                if not follow:
                    return
                if len(page) < _PAGE:  # caught up: wait for news
                    time.sleep(interval)
                page = client.events(kind=kind, after=cursor or 0, limit=_PAGE)
        except KeyboardInterrupt:
            if cursor is not None:
                err_console().print(f"stopped after event {cursor}; resume with --after {cursor}")
            raise


def _print(e: EventOut, *, as_json: bool) -> None:
    if as_json:
        typer.echo(e.model_dump_json())
        return
    colour = "red" if e.kind.endswith("down") else "yellow" if "changed" in e.kind else ""
    padded = f"{e.kind:<16}"
    kind_text = f"[{colour}]{padded}[/]" if colour else padded
    out_console().print(f"{format_time(e.time)}  {kind_text} {escape(e.message)}")


def _read_cursor(path: Path) -> int | None:
    """The event id saved in ``path``; ``None`` when there is no such file or it is empty
    (a follower's first run).  :class:`ValidationError` for anything else in it."""
    try:
        text = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        text = ""
    except OSError as exc:
        msg = f"the cursor file {path} cannot be read: {exc.strerror}"
        raise ValidationError(msg, hint="give a file this user can read and write") from exc
    if not text:
        _require_folder(path)
        return None
    if not text.isdigit():
        msg = f"the cursor file {path} holds {text[:40]!r}, not an event id"
        raise ValidationError(
            msg, hint="fix it, or delete it to start from --after (or the newest events)"
        )
    return int(text)


def _save_cursor(path: Path, event_id: int) -> None:
    """Save ``event_id`` in ``path`` atomically (a crash leaves the old id or the new one)."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(f"{event_id}\n", encoding="utf-8")
    partial.replace(path)


def _require_folder(path: Path) -> None:
    # Refuse before printing anything, rather than fail to save after the first page.
    if not path.parent.is_dir():
        msg = f"the cursor file {path} cannot be created: {path.parent} is not a folder"
        raise ValidationError(msg, hint="create the folder first, or give another path")
