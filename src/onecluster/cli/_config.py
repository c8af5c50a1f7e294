"""Where the CLI finds its server and token: flags, then the environment, then the local ``up``.

Resolution, first match wins (documented in ``docs/cli.md``):

* server URL: ``--server`` → ``ONECLUSTER_SERVER`` → ``<state-dir>/server.url`` (written by
  the server running on that state folder, ``onecluster server`` or ``up``) →
  ``http://127.0.0.1:8080``.  The flag and the variable may name several replicas of one
  control plane, separated by commas (``http://a:8080,http://b:8080``): the client tries them
  in turn and stays with the one that answers (:class:`onecluster.client.ServerList`);
* token: ``--token`` → ``ONECLUSTER_TOKEN`` → ``<state-dir>/admin.token`` (written by
  the server at its first start) → none.  Whitespace around a token (a file's newline, a
  pasted CRLF) is dropped; one with whitespace or control characters inside is refused,
  naming where it came from (:func:`onecluster.client.usable_token`);
* de-identification key (``export deid``): ``--key-file`` → ``ONECLUSTER_DEID_KEY`` → none
  (refused: ``cli/_export.py``).

The environment is read once, in :func:`onecluster.cli.main`, into an :class:`Environment`
that is passed down; nothing here reads ``os.environ``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from onecluster.errors import ValidationError
from onecluster.state_dir import ADMIN_TOKEN_FILE, SERVER_URL_FILE

if TYPE_CHECKING:
    from onecluster.client import Client

__all__ = [
    "DEFAULT_SERVER",
    "DEFAULT_STATE_DIR",
    "CliConfig",
    "Environment",
    "open_client",
    "resolve_config",
    "token_of",
]

DEFAULT_SERVER = "http://127.0.0.1:8080"
DEFAULT_STATE_DIR = Path(".state")


@dataclass(frozen=True, slots=True)
class Environment:
    """The variables of the process environment the CLI honours, read once in ``main``."""

    server: str | None = None
    token: str | None = None
    #: The de-identification key (``export deid``), a secret: never printed.
    deid_key: str | None = field(default=None, repr=False)
    #: How long-running commands write their log, unchecked (``cli/_log_options.py``).
    log_format: str | None = None

    @classmethod
    def from_mapping(cls, environ: Mapping[str, str]) -> Environment:
        """Pick ``ONECLUSTER_SERVER``, ``ONECLUSTER_TOKEN``, ``ONECLUSTER_DEID_KEY`` and
        ``ONECLUSTER_LOG_FORMAT`` (empty or blank: unset)."""
        return cls(
            server=environ.get("ONECLUSTER_SERVER", "").strip() or None,
            token=environ.get("ONECLUSTER_TOKEN", "").strip() or None,
            deid_key=environ.get("ONECLUSTER_DEID_KEY", "").strip() or None,
            log_format=environ.get("ONECLUSTER_LOG_FORMAT", "").strip() or None,
        )


@dataclass(frozen=True, slots=True)
class CliConfig:
    """The resolved global options every command receives.

    ``server``: the server's base URL, or several replicas' joined with commas (normalised:
    no spaces, no trailing ``/``); :attr:`servers` lists them.
    """

    server: str
    token: str | None
    state_dir: Path
    debug: bool = False
    #: Where ``token`` came from (``--token``, ``$ONECLUSTER_TOKEN`` or the file), for errors.
    token_source: str | None = None
    #: ``$ONECLUSTER_DEID_KEY``, the key ``export deid`` uses without ``--key-file``.
    deid_key: str | None = field(default=None, repr=False)
    #: ``$ONECLUSTER_LOG_FORMAT``, the format without ``--log-format``.
    log_format: str | None = None

    @property
    def servers(self) -> tuple[str, ...]:
        """The server URLs in the order the client tries them."""
        return tuple(self.server.split(","))


def resolve_config(
    *,
    server: str | None,
    token: str | None,
    state_dir: Path,
    debug: bool,
    environment: Environment,
) -> CliConfig:
    """Apply the resolution order above.  A state file that cannot be read is ignored.

    Raises :class:`ValidationError`, naming where the value came from, for a server URL that
    is not ``http(s)://…``, or a list with an empty entry or a server named twice.  A
    malformed token is refused only where it is used (:func:`token_of`), so ``simulate``
    does not care about a broken ``$ONECLUSTER_TOKEN``.
    """
    url_file = state_dir / SERVER_URL_FILE
    resolved_server, server_source = next(
        (value, where)
        for value, where in (
            (server, "--server"),
            (environment.server, "$ONECLUSTER_SERVER"),
            (_read_state(url_file), str(url_file)),
            (DEFAULT_SERVER, "the default server URL"),
        )
        if value
    )
    token_file = state_dir / ADMIN_TOKEN_FILE
    candidates = (
        (token, "--token"),
        (environment.token, "$ONECLUSTER_TOKEN"),
        (_read_state(token_file), str(token_file)),
    )
    resolved_token, token_source = next(
        ((value.strip(), where) for value, where in candidates if value), (None, None)
    )
    from onecluster.client import parse_servers

    servers = parse_servers(resolved_server, source=server_source)
    return CliConfig(
        server=",".join(servers),
        token=resolved_token,
        state_dir=state_dir,
        debug=debug,
        token_source=token_source,
        deid_key=environment.deid_key,
        log_format=environment.log_format,
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
    return Client(config.server, token_of(config))


def token_of(config: CliConfig) -> str | None:
    """The resolved token, checked: :class:`AuthError` naming its source if it is malformed
    (whitespace or control characters inside)."""
    from onecluster.client import usable_token

    if config.token is None:
        return None
    return usable_token(config.token, source=f"the token from {config.token_source or 'the CLI'}")


def _read_state(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return text or None
