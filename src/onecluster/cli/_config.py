"""Where the CLI finds its server and token: flags, then the environment, then the local ``up``.

Resolution, first match wins (documented in ``docs/cli.md``):

* server URL: ``--server`` → ``ONECLUSTER_SERVER`` → ``<state-dir>/server.url`` (written by
  ``onecluster up``) → ``http://127.0.0.1:8080``;
* token: ``--token`` → ``ONECLUSTER_TOKEN`` → ``<state-dir>/admin.token`` (written by
  ``onecluster up``) → none.

The environment is read once, in :func:`onecluster.cli.main`, into an :class:`Environment`
that is passed down; nothing here reads ``os.environ``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import typer

from onecluster.errors import ValidationError
from onecluster.up import ADMIN_TOKEN_FILE, SERVER_URL_FILE

if TYPE_CHECKING:
    from onecluster.client import Client

__all__ = [
    "DEFAULT_SERVER",
    "DEFAULT_STATE_DIR",
    "CliConfig",
    "Environment",
    "open_client",
    "resolve_config",
]

DEFAULT_SERVER = "http://127.0.0.1:8080"
DEFAULT_STATE_DIR = Path(".state")


@dataclass(frozen=True, slots=True)
class Environment:
    """The variables of the process environment the CLI honours, read once in ``main``."""

    server: str | None = None
    token: str | None = None

    @classmethod
    def from_mapping(cls, environ: Mapping[str, str]) -> Environment:
        """Pick ``ONECLUSTER_SERVER`` and ``ONECLUSTER_TOKEN`` (empty counts as unset)."""
        return cls(
            server=environ.get("ONECLUSTER_SERVER") or None,
            token=environ.get("ONECLUSTER_TOKEN") or None,
        )


@dataclass(frozen=True, slots=True)
class CliConfig:
    """The resolved global options every command receives."""

    server: str
    token: str | None
    state_dir: Path
    debug: bool = False


def resolve_config(
    *,
    server: str | None,
    token: str | None,
    state_dir: Path,
    debug: bool,
    environment: Environment,
) -> CliConfig:
    """Apply the resolution order above.  A state file that cannot be read is ignored."""
    resolved_server = (
        server or environment.server or _read_state(state_dir / SERVER_URL_FILE) or DEFAULT_SERVER
    )
    resolved_token = token or environment.token or _read_state(state_dir / ADMIN_TOKEN_FILE)
    if not resolved_server.startswith(("http://", "https://")):
        msg = f"server URL {resolved_server!r} must start with http:// or https://"
        raise ValidationError(msg, hint="e.g. --server http://127.0.0.1:8080")
    try:
        httpx.URL(resolved_server)
    except httpx.InvalidURL as exc:
        msg = f"server URL {resolved_server!r} is not a valid URL: {exc}"
        raise ValidationError(msg, hint="e.g. --server http://127.0.0.1:8080") from exc
    return CliConfig(
        server=resolved_server.rstrip("/"),
        token=resolved_token,
        state_dir=state_dir,
        debug=debug,
    )


def config_of(ctx: typer.Context) -> CliConfig:
    """The :class:`CliConfig` the root callback stored on the context."""
    config = ctx.find_object(CliConfig)
    if config is None:  # only when a command is invoked without the root app
        msg = "the CLI was started without its global options"
        raise ValidationError(msg)
    return config


def open_client(ctx: typer.Context) -> Client:
    """An SDK client for the resolved server and token; the caller closes it (``with``)."""
    from onecluster.client import Client

    config = config_of(ctx)
    return Client(config.server, config.token)


def _read_state(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return text or None
