"""``run_agent``: build the backend and the agent from an :class:`AgentConfig` and run it."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from onecluster.agent._agent import Agent
from onecluster.agent._config import AgentConfig
from onecluster.agent._data import SiteData
from onecluster.agent._links import SiteLinks
from onecluster.agent._reroute import fast_probe_interval
from onecluster.agent._workdir import WorkDirLock
from onecluster.backends import ClusterBackend, LocalBackend, SlurmBackend
from onecluster.errors import PlatformError, ValidationError
from onecluster.fabric import load_fabric
from onecluster.network import KernelRoutes
from onecluster.process import Child
from onecluster.telemetry import MetricsServer, ProbeCollector, Prober

__all__ = ["run_agent"]

_log = logging.getLogger("onecluster.agent")

#: The agent's own state in its work directory (attempts it stopped on its own account).
_STATE_FILE = "agent-state.json"


def run_agent(config: AgentConfig, *, stop: threading.Event | None = None) -> None:
    """Run the agent for ``config.site`` until SIGTERM/SIGINT (or ``stop`` is set); blocking.

    Raises the :class:`PlatformError` that prevented starting (bad fabric file, unknown site,
    work directory not writable or used by another agent) or that the agent gave up on (the
    server refused it for good: :attr:`Agent.gave_up`); the CLI maps it to the exit code.
    Running jobs are stopped on the way out (see :mod:`onecluster.agent`).  Signal handlers
    are installed only when called from the main thread, and restored afterwards.  A local
    site's jobs are also guarded by a watchdog (:mod:`onecluster.agent._watchdog`).
    """
    stop = stop or threading.Event()
    pools = config.resolved_pools()
    work_dir = config.resolved_work_dir()
    try:
        lock = WorkDirLock(work_dir).acquire()
    except OSError as exc:
        msg = f"cannot use {work_dir} as the agent's work directory: {exc.strerror or exc}"
        raise ValidationError(msg, hint="pass a writable --work-dir") from exc
    try:
        _run_locked(config, pools, work_dir, lock, stop)
    finally:
        lock.release()


def _run_locked(
    config: AgentConfig,
    pools: dict[str, int],
    work_dir: Path,
    lock: WorkDirLock,
    stop: threading.Event,
) -> None:
    try:
        backend = _backend(config, pools, work_dir)
    except OSError as exc:
        msg = f"cannot use {work_dir} as the agent's work directory: {exc.strerror or exc}"
        raise ValidationError(msg, hint="pass a writable --work-dir") from exc
    try:
        config.check_links_against_fabric()
        links = _site_links(config)
    except PlatformError:
        backend.close(grace_s=0.5)
        raise
    try:
        data = SiteData(
            config.site,
            config.resolved_data_dir(),
            port=config.data_port,
            address=config.resolved_data_address(),
            deid_key=config.deid_key,
        )
    except PlatformError:
        backend.close(grace_s=0.5)
        if links is not None:
            links.close()
        raise
    try:
        metrics = _metrics_server(config, links, data)
    except PlatformError:
        data.close()
        backend.close(grace_s=0.5)
        if links is not None:
            links.close()
        raise
    watchdog = (
        _start_watchdog(config, work_dir, lock) if isinstance(backend, LocalBackend) else None
    )
    agent = Agent(
        config.site,
        backend,
        config.server_url,
        config.token,
        heartbeat_interval_s=config.heartbeat_interval_s,
        max_backoff_s=config.max_backoff_s,
        stop_grace_s=config.stop_grace_s,
        log_chunk_bytes=config.log_chunk_bytes,
        request_timeout_s=config.request_timeout_s,
        links=links,
        data=data,
        state_path=work_dir / _STATE_FILE,
        watched_dir=work_dir if watchdog is not None else None,
    )
    if links is not None:
        links.start()
    try:
        with _stopped_by_signals(stop):
            agent.run(stop)
    finally:
        if watchdog is not None:
            watchdog.stop(grace_s=5.0)  # the agent stopped its jobs: nothing left to guard
        if metrics is not None:
            metrics.close()
    if agent.gave_up is not None:
        raise agent.gave_up


def _start_watchdog(config: AgentConfig, work_dir: Path, lock: WorkDirLock) -> Child:
    """The watchdog of this agent's lease, holding the work-directory lock with it."""
    argv = [
        sys.executable,
        "-m",
        "onecluster.agent._watchdog_main",
        str(work_dir),
        str(os.getpid()),
        config.log_format.value,
        config.site,
    ]
    dog = Child.spawn(argv, log_path=work_dir / "watchdog.log", pass_fds=[lock.fd])
    lock.note(watchdog_pid=dog.pid)
    return dog


def _backend(config: AgentConfig, pools: dict[str, int], work_dir: Path) -> ClusterBackend:
    """The site's cluster: local processes, its Slurm or its Kubernetes (both of which know
    their own capacity)."""
    kind = config.resolved_backend()
    if kind == "kubernetes":
        # the kubernetes client is an optional extra: imported only where it is used
        try:
            from onecluster.backends.kubernetes import KubernetesBackend  # noqa: PLC0415
        except ImportError as exc:
            msg = "the kubernetes backend needs the kubernetes client"
            raise ValidationError(msg, hint="pip install 'onecluster[kubernetes]'") from exc
        return KubernetesBackend.connect(
            config.site,
            gpu_types=list(pools),
            work_dir=work_dir,
            kubeconfig=config.kubeconfig,
            context=config.kube_context,
            namespace=config.kube_namespace,
            image=config.kube_image,
            queue=config.kueue_queue,
        )
    if kind == "slurm":
        assert config.slurm_conf is not None  # checked by resolved_backend
        if not config.slurm_conf.is_file():
            msg = f"the Slurm configuration {config.slurm_conf} does not exist"
            raise ValidationError(msg, hint="pass the slurm.conf of the site's cluster")
        return SlurmBackend(
            config.site, slurm_conf=config.slurm_conf, work_dir=work_dir, gpu_types=list(pools)
        )
    return LocalBackend(config.site, pools, work_dir)


def _metrics_server(
    config: AgentConfig, links: SiteLinks | None, data: SiteData
) -> MetricsServer | None:
    """The agent's ``/metrics`` (``--metrics``): its probes' and its data plane's, in one
    registry; ``None`` without ``--metrics``."""
    if config.metrics_address is None:
        return None
    host, _, port = config.metrics_address.rpartition(":")
    collectors = [data.metrics] + ([ProbeCollector(links.prober)] if links is not None else [])
    metrics = MetricsServer(collectors, host, int(port))
    _log.info("metrics at %s", metrics.url)
    return metrics


def _site_links(config: AgentConfig) -> SiteLinks | None:
    """The probes and routes the config asks for (``None``: no circuits to probe).

    An agent that programs routes probes 50 times a second for its fast reroute and reports
    one probe per ``probe_interval_s`` to the server, as any other agent does."""
    if not config.links:
        return None
    fabric = load_fabric(config.fabric_path) if config.fabric_path is not None else None
    interval = config.probe_interval_s
    prober = Prober(
        config.links,
        port=config.probe_port,
        interval_s=fast_probe_interval(interval) if config.apply_routes else interval,
        report_interval_s=interval,
    )
    return SiteLinks(
        prober,
        service_address=config.service_address,
        routes=KernelRoutes() if config.apply_routes else None,
        fabric=fabric,
    )


@contextmanager
def _stopped_by_signals(stop: threading.Event) -> Iterator[None]:
    """Set ``stop`` on SIGTERM or SIGINT while inside (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum: int, _frame: FrameType | None) -> None:
        _log.info("received %s; stopping the agent", signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
