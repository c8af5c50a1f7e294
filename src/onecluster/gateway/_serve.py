"""Run a gateway (or the fake upstream) in this process, on uvloop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import uvloop
from aiohttp import web

from onecluster.clock import Clock
from onecluster.gateway._app import build_app
from onecluster.gateway._config import GatewayConfig
from onecluster.gateway._gateway import Gateway, GatewaySettings
from onecluster.gateway.fake_upstream import build_fake_upstream

__all__ = ["serve_fake_upstream", "serve_gateway"]

_log = logging.getLogger(__name__)


def serve_gateway(
    config: GatewayConfig,
    settings: GatewaySettings,
    *,
    host: str,
    port: int,
    clock: Clock | None = None,
    on_ready: Callable[[int], None] | None = None,
) -> None:
    """Serve until interrupted (SIGINT/SIGTERM); ``on_ready`` gets the bound port."""
    gateway = Gateway.open(config, settings, clock=clock)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(_run(build_app(gateway), host, port, on_ready))


def serve_fake_upstream(
    *, host: str, port: int, on_ready: Callable[[int], None] | None = None
) -> None:
    """Serve the **fake** upstream until interrupted."""
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(_run(build_fake_upstream(), host, port, on_ready))


async def _run(
    app: web.Application, host: str, port: int, on_ready: Callable[[int], None] | None
) -> None:
    runner = web.AppRunner(app, access_log=None, handle_signals=True)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=1024, reuse_address=True)
    await site.start()
    bound = int(runner.addresses[0][1])
    if on_ready is not None:
        on_ready(bound)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
