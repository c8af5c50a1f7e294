"""The FastAPI application: routes, error mapping, and the lifespan that owns the loop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI
from fastapi_offline import FastAPIOffline

from onecluster.clock import Clock, SystemClock
from onecluster.scheduler import PendingJob
from onecluster.server import (
    _routes_agents,
    _routes_cluster,
    _routes_data,
    _routes_exports,
    _routes_fabric,
    _routes_jobs,
    _routes_links,
    _routes_live,
    _routes_metrics,
)
from onecluster.server._config import ServerConfig
from onecluster.server._control import ControlPlane
from onecluster.server._election import Election
from onecluster.server._errors import install_error_handlers
from onecluster.server._forward import FORWARD_TIMEOUT_S, LeaderForwarding
from onecluster.server._limits import BodyLimits
from onecluster.server._metrics import ServerMetrics
from onecluster.server._metrics_cluster import ClusterCollector
from onecluster.server._metrics_http import RequestTimer
from onecluster.server._reconcile import Reconciler
from onecluster.server._register_watch import RegisterWatch
from onecluster.server._request_ids import RequestIds
from onecluster.server._routes_dashboard import install_dashboard
from onecluster.server._submissions import SubmissionWriter
from onecluster.store import new_holder_id

__all__ = ["create_app"]


def create_app(config: ServerConfig, *, clock: Clock | None = None) -> FastAPI:
    """The onecluster API for ``config``.

    Nothing happens until the app starts: its lifespan then creates or migrates the database,
    mints the first admin token if there is none (``<state_dir>/admin.token``), competes for
    the leadership of the replicas on that database (:class:`Election`; alone on it, it
    leads within a lease), and runs the reconcile loop while it leads, until shutdown, when
    it gives the leadership up.  While running, ``app.state.control`` is the
    :class:`ControlPlane`, ``app.state.election`` the :class:`Election`,
    ``app.state.reconciler`` the :class:`Reconciler` and ``app.state.submissions`` the
    :class:`SubmissionWriter` (group commit of submissions).  A follower forwards the
    requests only the leader answers (:class:`LeaderForwarding`).

    ``/`` is the NOC dashboard (``server/dashboard/``) and ``/api/v1/live`` its stream of
    events; a server that shuts down sets ``app.state.closing`` first, which ends the streams.

    ``GET /metrics`` (Prometheus' text format, no token, not in the OpenAPI schema) times
    every request (:class:`RequestTimer`) and reconcile pass, and reads the state of the
    cluster at each scrape (:class:`ClusterCollector`), verifying the export register at
    most once a minute (:class:`RegisterWatch`); ``app.state.metrics`` is the
    :class:`ServerMetrics`.

    ``/docs`` (Swagger UI) and ``/redoc`` load their scripts and styles from the server
    itself (``/static-offline-docs/``, shipped by ``fastapi-offline``), never from a CDN, so
    they work on a host without Internet access.
    """
    the_clock: Clock = clock if clock is not None else SystemClock()
    metrics = ServerMetrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        control = await asyncio.to_thread(ControlPlane.open, config, the_clock)
        election = Election(
            control.store,
            the_clock,
            holder=new_holder_id(),
            url=config.advertise_url,
            lease_s=config.leader_lease_s,
        )
        store = control.store
        control.pending.follow(
            store.queue_news,
            lambda ids: (
                PendingJob(job_id=j.id, spec=j.spec(), submitted_at=j.submitted_at)
                for j in store.pending_of(ids)
            ),
        )
        control.links.stand_by()  # until it takes office: Reconciler.take_office
        reconciler = Reconciler(control, election, metrics)
        collector = ClusterCollector(control, election, RegisterWatch(control.exports, the_clock))
        metrics.add_collector(collector)
        submissions = SubmissionWriter(control.record_submissions)
        app.state.control = control
        app.state.election = election
        app.state.reconciler = reconciler
        app.state.submissions = submissions
        app.state.forwarder = httpx.AsyncClient(timeout=FORWARD_TIMEOUT_S)
        try:
            async with asyncio.TaskGroup() as tasks:
                elect = tasks.create_task(election.run(), name="election")
                loop = tasks.create_task(reconciler.run(), name="reconcile")
                writer = tasks.create_task(submissions.run(), name="submissions")
                await asyncio.sleep(0)  # let the writer start before the first request
                try:
                    yield
                finally:
                    loop.cancel()
                    elect.cancel()
                    writer.cancel()
            await asyncio.to_thread(election.resign)
        finally:
            metrics.registry.unregister(collector)
            app.state.control = None
            app.state.election = None
            await app.state.forwarder.aclose()
            control.close()

    app = FastAPIOffline(
        title="onecluster",
        summary="GPU clusters in several data centres, run as one cluster.",
        version="0.1.0",
        lifespan=lifespan,
    )
    app.state.metrics = metrics
    install_error_handlers(app)
    app.add_middleware(LeaderForwarding)
    app.add_middleware(BodyLimits)  # a follower never buffers a body over the limit
    app.add_middleware(RequestIds)  # around the limits: even a refusal has a request id
    app.add_middleware(RequestTimer, metrics=metrics)  # times what the others do
    app.include_router(_routes_cluster.router)
    app.include_router(_routes_jobs.router)
    app.include_router(_routes_agents.router)
    app.include_router(_routes_links.router)
    app.include_router(_routes_data.router)
    app.include_router(_routes_exports.router)
    app.include_router(_routes_fabric.router)
    app.include_router(_routes_live.router)
    app.include_router(_routes_metrics.router)
    install_dashboard(app)
    app.state.closing = asyncio.Event()  # set as the server starts to shut down: ends streams
    return app
