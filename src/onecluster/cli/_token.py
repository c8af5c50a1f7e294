"""``onecluster token create``: mint a role token (admins only); the secret is shown once."""

from __future__ import annotations

import typer

from onecluster.cli._config import open_client
from onecluster.cli._options import Role
from onecluster.cli._render import err_console, out_console
from onecluster.schema import TokenCreate

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add the ``token`` command group to ``app``."""
    group = typer.Typer(help="Role tokens (admin token needed).", no_args_is_help=True)
    group.command("create")(create)
    app.add_typer(group, name="token")


def create(
    ctx: typer.Context,
    role: Role = typer.Option(
        ...,
        "--role",
        help="member (of a team), agent (of a site), admin, compliance (approves exports) or "
        "auditor (reads the export register).",
    ),
    team: str | None = typer.Option(None, "--team", help="The team of a member token."),
    site: str | None = typer.Option(None, "--site", help="The site of an agent token."),
    holder: str | None = typer.Option(
        None,
        "--holder",
        help="Who holds it (a person or service): the export register names them, and "
        "nobody approves their own export request.",
    ),
) -> None:
    """Mint a token and print it once; the server keeps only its hash."""
    body = TokenCreate(role=role.value, team=team, site=site, holder=holder)  # bad scope: exit 2
    with open_client(ctx) as client:
        minted = client.create_token(body)
    scope = minted.team or minted.site or "everything"
    err_console().print(f"{minted.role} token for {scope} (id {minted.id}); it is shown only once:")
    out_console().print(minted.token, highlight=False, soft_wrap=True)
