"""The site launcher: starts one worker process per GPU of the site's part, gives each its
``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT``, and restarts the
site's workers when one dies (they heal from a live site), so that a crash costs the site
at most one sync interval and never the gang.

A worker that exits 0 is done; when all are, the launcher exits 0.  A worker that exits
:data:`EXIT_PERMANENT` (bad input, a refused peer: a restart would fail the same way) ends
the launcher with that status.  Otherwise the site's workers are stopped and started again,
up to ``max_restarts`` times in ``window_s`` seconds, after a pause that doubles from
``backoff_s``.  SIGTERM and SIGINT are passed on to the workers (the agent's grace period).
With ``--prometheus HOST:PORT`` worker *i* serves its ``/metrics`` on ``HOST:PORT+i`` (see
:mod:`._prometheus`).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import FrameType

from onecluster.errors import ValidationError
from onecluster.logs import LogFormat, setup_logging
from onecluster.training._prometheus import PROMETHEUS_ENV, prometheus_address
from onecluster.training._topology import Topology

__all__ = ["EXIT_PERMANENT", "LaunchConfig", "launch"]

_log = logging.getLogger("onecluster.training")
EXIT_PERMANENT = 3


@dataclass(frozen=True)
class LaunchConfig:
    """``workers`` per site (``None``: ``$ONECLUSTER_GPUS``, at least 1); restart policy;
    ``prometheus``: the first worker's ``/metrics`` address (the others' ports follow)."""

    workers: int | None = None
    max_restarts: int = 10
    window_s: float = 3600.0
    backoff_s: float = 1.0
    stop_grace_s: float = 10.0
    prometheus: tuple[str, int] | None = None


def launch(command: Sequence[str], config: LaunchConfig, env: Mapping[str, str]) -> int:
    """Run ``command`` as the site's workers until they finish; the exit status."""
    if not command:
        sys.stderr.write("error: no worker command given after --\n")
        return 2
    try:
        workers = config.workers or max(1, int(env.get("ONECLUSTER_GPUS", "1") or 1))
        topo = Topology.from_env({**env, "LOCAL_WORLD_SIZE": str(workers)})
    except ValueError:
        sys.stderr.write(f"error: ONECLUSTER_GPUS is {env.get('ONECLUSTER_GPUS')!r}, not a count\n")
        return EXIT_PERMANENT
    except ValidationError as exc:
        sys.stderr.write(f"error: {exc.message}\n")
        return EXIT_PERMANENT
    stopping: list[int] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        stopping.append(signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    restarts: list[float] = []
    pause = config.backoff_s
    while True:
        procs = [
            _start(command, env, topo, rank, workers, prometheus=config.prometheus)
            for rank in range(workers)
        ]
        _log.info(
            "site %s: started %d workers (%s)",
            topo.site,
            workers,
            ", ".join(str(p.pid) for p in procs),
        )
        status = _watch(procs, stopping, config.stop_grace_s)
        if stopping or status in (0, EXIT_PERMANENT):
            return status
        now = time.monotonic()
        restarts = [t for t in restarts if now - t < config.window_s] + [now]
        if len(restarts) > config.max_restarts:
            _log.error(
                "site %s: workers failed %d times in %g s; giving up",
                topo.site,
                len(restarts),
                config.window_s,
            )
            return status
        _log.warning(
            "site %s: a worker exited with %d; restarting the site's workers in "
            "%g s (they heal from a live site)",
            topo.site,
            status,
            pause,
        )
        time.sleep(pause)
        pause = min(pause * 2, 60.0)


def _start(
    command: Sequence[str],
    env: Mapping[str, str],
    topo: Topology,
    rank: int,
    workers: int,
    *,
    prometheus: tuple[str, int] | None,
) -> subprocess.Popen[bytes]:
    child = {
        **env,
        "LOCAL_RANK": str(rank),
        "LOCAL_WORLD_SIZE": str(workers),
        "RANK": str(rank),
        "WORLD_SIZE": str(workers),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(topo.site_port()),
    }
    if prometheus is not None:
        host, port = prometheus
        child[PROMETHEUS_ENV] = f"{host}:{port + rank if port else 0}"
    return subprocess.Popen(list(command), env=child)


def _watch(procs: list[subprocess.Popen[bytes]], stopping: list[int], grace_s: float) -> int:
    """Wait until every worker ended (0), one failed (its status; the rest are stopped), or
    a signal came (passed on; the first non-zero status, or 0)."""
    while True:
        if stopping:
            return _stop(procs, stopping[0], grace_s)
        codes = [p.poll() for p in procs]
        failed = [c for c in codes if c not in (None, 0)]
        if failed:
            _stop(procs, signal.SIGTERM, grace_s)
            return int(failed[0]) if failed[0] > 0 else 128 - int(failed[0])
        if all(c == 0 for c in codes):
            return 0
        time.sleep(0.2)


def _stop(procs: list[subprocess.Popen[bytes]], signum: int, grace_s: float) -> int:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signum)
    deadline = time.monotonic() + grace_s
    for p in procs:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    codes = [p.returncode for p in procs]
    return next((c for c in codes if c), 0)


def setup_job_logging(role: str, environ: Mapping[str, str]) -> None:
    """The log of a process inside a job: stderr (the job's log), in
    ``$ONECLUSTER_LOG_FORMAT`` (which the agent's environment passes on), with the job's
    site.  A value that is no format is said once, and text written: a job must not fail
    for how it logs."""
    raw = environ.get("ONECLUSTER_LOG_FORMAT", "").strip()
    log_format, problem = LogFormat.TEXT, None
    if raw:
        try:
            log_format = LogFormat.parse(raw, source="$ONECLUSTER_LOG_FORMAT")
        except ValueError as exc:
            problem = str(exc)
    setup_logging(role=role, log_format=log_format, site=environ.get("ONECLUSTER_SITE"))
    if problem is not None:
        _log.warning("%s; writing text", problem)


def main(argv: Sequence[str]) -> int:
    """``python -m onecluster.training launch [--workers N] [--max-restarts N]
    [--prometheus HOST:PORT] -- CMD …``"""
    parser = argparse.ArgumentParser(prog="python -m onecluster.training launch")
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--max-restarts", type=int, default=10)
    parser.add_argument("--backoff", type=float, default=1.0)
    parser.add_argument(
        "--prometheus",
        default=None,
        metavar="HOST:PORT",
        help="worker i serves its Prometheus /metrics on HOST:PORT+i (port 0: any free one)",
    )
    args, rest = parser.parse_known_args(list(argv))
    if rest and rest[0] == "--":
        rest = rest[1:]
    setup_job_logging("training-launcher", os.environ)
    try:
        prometheus = None if args.prometheus is None else prometheus_address(args.prometheus)
    except ValidationError as exc:
        sys.stderr.write(f"error: {exc.message}\nhint: {exc.hint}\n")
        return EXIT_PERMANENT
    config = LaunchConfig(
        workers=args.workers,
        max_restarts=args.max_restarts,
        backoff_s=args.backoff,
        prometheus=prometheus,
    )
    return launch(rest, config, os.environ)
