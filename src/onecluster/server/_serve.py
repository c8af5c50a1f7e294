"""Run the API under uvicorn (used by ``onecluster server``)."""

from __future__ import annotations

import errno
import socket

import uvicorn

from onecluster.clock import Clock, SystemClock
from onecluster.errors import UnavailableError, ValidationError
from onecluster.server._app import create_app
from onecluster.server._config import ServerConfig
from onecluster.server._control import ControlPlane

__all__ = ["serve"]

_LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")


def serve(config: ServerConfig, *, clock: Clock | None = None) -> None:
    """Serve until interrupted (SIGINT/SIGTERM stop it cleanly).

    Everything that can be wrong with the configuration is checked before uvicorn starts —
    the log level, the port, the state folder and the database (opened and migrated once) —
    so a mistake is one clear :mod:`onecluster.errors` error, not a lifespan traceback.
    """
    if config.log_level not in _LOG_LEVELS:
        msg = f"unknown log level {config.log_level!r}; use one of {', '.join(_LOG_LEVELS)}"
        raise ValidationError(msg)
    _check_port(config.host, config.port)
    the_clock: Clock = clock if clock is not None else SystemClock()
    try:
        ControlPlane.open(config, the_clock).close()
    except OSError as exc:
        msg = f"the state folder {config.state_dir} cannot be used: {exc.strerror or exc}"
        raise ValidationError(msg, hint="pass --state-dir with a folder you can write") from exc
    uvicorn.run(
        create_app(config, clock=the_clock),
        host=config.host,
        port=config.port,
        log_level=config.log_level,
        access_log=False,
    )


def _check_port(host: str, port: int) -> None:
    """:class:`UnavailableError` if ``host:port`` cannot be listened on (e.g. in use)."""
    if port == 0:
        return
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                msg = f"port {port} on {host} is already in use"
                raise UnavailableError(msg, hint="stop what uses it, or pass --port") from exc
            msg = f"cannot listen on {host}:{port}: {exc.strerror or exc}"
            raise ValidationError(msg, hint="check --host and --port") from exc
