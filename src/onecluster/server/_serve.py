"""Run the API under uvicorn (used by ``onecluster server``)."""

from __future__ import annotations

import uvicorn

from onecluster.clock import Clock
from onecluster.server._app import create_app
from onecluster.server._config import ServerConfig

__all__ = ["serve"]


def serve(config: ServerConfig, *, clock: Clock | None = None) -> None:
    """Serve until interrupted (SIGINT/SIGTERM stop it cleanly)."""
    app = create_app(config, clock=clock)
    uvicorn.run(
        app,
        host=config.host,
        port=config.port,
        log_level=config.log_level,
        access_log=False,
    )
