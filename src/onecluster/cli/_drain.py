"""``onecluster drain SITE [--pool GPU_TYPE]`` and ``--undo``: a site or pool takes no new
work while what runs there finishes (before it is removed or shrunk with ``fabric apply``,
or for maintenance)."""

from __future__ import annotations

import typer
from rich.markup import escape

from onecluster.cli._config import open_client
from onecluster.cli._render import out_console
from onecluster.schema import DrainIn, UndrainIn

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add the ``drain`` command to ``app``."""
    app.command("drain")(drain)


def drain(
    ctx: typer.Context,
    *,
    site: str = typer.Argument(..., help="The site to drain (every pool of it)."),
    pool: str | None = typer.Option(
        None, "--pool", metavar="GPU_TYPE", help="Drain only the site's pool of this GPU type."
    ),
    reason: str | None = typer.Option(None, "--reason", help="Why (it goes in the event)."),
    undo: bool = typer.Option(
        False, "--undo", help="Take new work again (without --pool: every drain at the site)."
    ),
) -> None:
    """Drain a site or one of its pools: nothing new is placed there, running work finishes.
    `sites` shows it draining and how many GPUs are still in use; `fabric apply` may remove
    or shrink it once they are not."""
    console = out_console()
    with open_client(ctx) as client:
        if undo:
            lifted = client.undrain(site, UndrainIn(gpu_type=pool))
            if not lifted:
                what = f"pool {site}/{pool}" if pool else f"site {site}"
                console.print(f"{escape(what)} was not drained; nothing changed")
                return
            for d in lifted:
                what = f"pool {d.site}/{d.gpu_type}" if d.gpu_type else f"site {d.site}"
                console.print(f"{escape(what)} takes new work again")
            still = [d for d in client.fabric().drains if d.site == site and not d.gpu_type]
            if still and pool is not None:
                console.print(
                    f"[yellow]site {escape(site)} itself is still drained[/]: "
                    f"`onecluster drain --undo {escape(site)}` lifts it"
                )
            return
        drained = client.drain(site, DrainIn(gpu_type=pool, reason=reason))
        found = [s for s in client.sites() if s.name == site]
    what = f"pool {site}/{drained.gpu_type}" if drained.gpu_type else f"site {site}"
    used = sum(p.used for s in found for p in s.pools if drained.gpu_type in (None, p.gpu_type))
    rest = f"{used} GPU(s) still in use by running work" if used else "nothing runs there now"
    console.print(f"{escape(what)} is draining: it takes no new work; {rest}")
