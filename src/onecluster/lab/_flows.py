"""Test flows across the lab: a sink in one site's namespace, a source in another's, both
sending to and from the sites' service addresses (so the flow follows the route table), and
the sink's samples as they arrive.  Used by ``lab traffic``, the lab tests and benchmarks."""

from __future__ import annotations

import contextlib
import json
import select
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from onecluster.errors import BackendError
from onecluster.lab._plan import SitePlan
from onecluster.network import in_netns

__all__ = ["FlowSample", "run_flow"]

_MODULE = "onecluster.lab._traffic"
_START_TIMEOUT_S = 15.0


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowSample:
    """Received so far, ``t`` seconds after the first byte; ``gap_s`` (UDP) is the longest
    silence between two datagrams so far; ``done`` on the last sample."""

    t: float
    bytes: int
    packets: int | None = None
    gap_s: float | None = None
    done: bool = False


def run_flow(
    src: SitePlan,
    dst: SitePlan,
    *,
    seconds: float,
    proto: Literal["tcp", "udp"] = "tcp",
    pps: float = 500.0,
    interval_s: float = 0.25,
    port: int = 5201,
) -> Iterator[FlowSample]:
    """Send from ``src`` to ``dst`` for ``seconds``; yields the sink's samples, then stops
    both ends (also when the caller stops iterating).  :class:`BackendError` if the sink
    cannot listen or ends without a final sample."""
    sink_argv = [
        sys.executable,
        "-m",
        _MODULE,
        "sink",
        proto,
        dst.service_ip,
        str(port),
        str(interval_s),
    ]
    sink = subprocess.Popen(in_netns(dst.netns, sink_argv), stdout=subprocess.PIPE, text=True)
    source: subprocess.Popen[bytes] | None = None
    try:
        assert sink.stdout is not None
        ready, _, _ = select.select([sink.stdout], [], [], _START_TIMEOUT_S)
        first = sink.stdout.readline() if ready else ""
        if '"listening"' not in first:
            msg = f"the test flow's sink in {dst.site} did not start (it printed {first!r})"
            raise BackendError(msg)
        source_argv = [
            sys.executable,
            "-m",
            _MODULE,
            "source",
            proto,
            src.service_ip,
            dst.service_ip,
            str(port),
            str(seconds),
        ]
        if proto == "udp":
            source_argv.append(str(pps))
        source = subprocess.Popen(in_netns(src.netns, source_argv))
        for line in sink.stdout:
            body = json.loads(line)
            sample = FlowSample(
                t=float(body["t"]),
                bytes=int(body["bytes"]),
                packets=body.get("packets"),
                gap_s=body.get("gap_s"),
                done=bool(body.get("done")),
            )
            yield sample
            if sample.done:
                return
        msg = f"the test flow's sink in {dst.site} ended without a final sample"
        raise BackendError(msg)
    finally:
        for process in (source, sink):
            if process is not None and process.poll() is None:
                process.kill()
            if process is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=5)
        if sink.stdout is not None:
            sink.stdout.close()
