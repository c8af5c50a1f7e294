"""``onecluster server``'s options."""

from __future__ import annotations

import typer.main

from onecluster.cli._app import build_app
from onecluster.store import DEFAULT_LEASE_S


def test_the_lease_option_defaults_to_the_stores_lease() -> None:
    command = typer.main.get_command(build_app())
    server = command.commands["server"]  # type: ignore[attr-defined]
    lease = next(p for p in server.params if p.name == "lease")
    assert lease.default == DEFAULT_LEASE_S == 900.0
