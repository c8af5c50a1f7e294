"""What faster probing costs: CPU of one agent's probes (and of its fast reroute) per probe
interval, on loopback (no root).

Two processes stand for two sites joined by ``--circuits`` circuits (127.0.1.x ⇄ 127.0.2.x).
Each runs a real :class:`~onecluster.telemetry.Prober` — it probes its end of every circuit
and reflects the other's probes, as every agent does — and, with the fast reroute, the
:class:`~onecluster.agent._reroute.FastReroute` thread watching it (routes into a sink that
keeps nothing).  Per interval, after a second of warm-up, each process measures its own CPU
time (user + system) over ``--seconds``; the figure is the mean of the two processes, as a
percentage of one core, and per packet handled (each probe is four: sent, reflected, reply
sent, reply read).  The wire cost is computed: 64-byte probes plus 28 bytes of UDP/IPv4.

    .venv/bin/python benchmarks/bench_probe_cost.py [--seconds 10] [--circuits 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from onecluster.agent._reroute import FastReroute
from onecluster.agent._routing import SiteRoutes
from onecluster.network import KernelRoute
from onecluster.telemetry import PACKET_SIZE, PeerEndpoint, Prober

INTERVALS = (0.1, 0.05, 0.02, 0.01)
_WIRE_BYTES = PACKET_SIZE + 28  # UDP and IPv4 headers


class NoRoutes:
    """A RouteSink that programs nothing."""

    def apply(self, routes: Sequence[KernelRoute]) -> None:
        pass


def site(argv: list[str]) -> None:
    """One side: probe and reflect (and watch) for ``seconds``; print its CPU figures.
    ``argv``: role, interval, seconds, circuits, reroute (0/1), rendezvous directory."""
    role, rendezvous = argv[0], argv[5]
    interval, seconds, circuits = float(argv[1]), float(argv[2]), int(argv[3])
    reroute = argv[4] == "1"
    base = "127.0.1." if role == "a" else "127.0.2."
    prober = Prober(
        {f"c{i}": f"{base}{i + 1}" for i in range(circuits)}, port=0, interval_s=interval
    )
    mine, theirs = Path(rendezvous) / role, Path(rendezvous) / ("b" if role == "a" else "a")
    mine.write_text(json.dumps(prober.endpoints()))
    while not theirs.exists() or not theirs.read_text():
        time.sleep(0.01)
    peers = json.loads(theirs.read_text())
    prober.set_peers(
        {
            c: PeerEndpoint(site="far", host=e.rsplit(":", 1)[0], port=int(e.rsplit(":", 1)[1]))
            for c, e in peers.items()
        }
    )
    watcher = FastReroute(prober, SiteRoutes(NoRoutes())) if reroute else None
    prober.start()
    if watcher is not None:
        watcher.start()
    time.sleep(1.0)
    before, start = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    time.sleep(seconds)
    after, end = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    snap = prober.snapshot()
    if watcher is not None:
        watcher.close()
    prober.close()
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    print(
        json.dumps(
            {
                "cpu_share": cpu / (end - start),
                "lost": sum(s.lost for s in snap),
                "silent": sorted(watcher.watch.silent) if watcher else [],
            }
        )
    )


def measure(interval: float, seconds: float, circuits: int, reroute: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as rendezvous:
        argv = [sys.executable, __file__, "--site"]
        args = [str(interval), str(seconds), str(circuits), str(int(reroute)), rendezvous]
        sides = [
            subprocess.Popen([*argv, r, *args], stdout=subprocess.PIPE, text=True) for r in "ab"
        ]
        outs = [json.loads(p.communicate()[0]) for p in sides]
    share = sum(o["cpu_share"] for o in outs) / 2
    packets = 4 * circuits / interval  # per site and second
    return {
        "interval_s": interval,
        "fast_reroute": reroute,
        "probes_per_s": 1 / interval,
        "cpu_percent": 100 * share,
        "us_per_packet": 1e6 * share / packets,
        "wire_kbit_s_per_circuit": 2 * 2 * _WIRE_BYTES * 8 / interval / 1000,  # both ends probe
        "lost": sum(o["lost"] for o in outs),
        "false_silences": sum(len(o["silent"]) for o in outs),
    }


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--site":
        site(sys.argv[2:8])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--circuits", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [measure(i, args.seconds, args.circuits, False) for i in INTERVALS]
    rows += [measure(i, args.seconds, args.circuits, True) for i in INTERVALS]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    load = os.getloadavg()[0]
    print(
        f"| {args.circuits} circuits per site, {args.seconds:g} s, load {load:.1f} | probes/s "
        "| CPU, % of a core | µs per packet | wire, kbit/s per circuit |"
    )
    print("|---|---|---|---|---|")
    for r in rows:
        what = "probes + fast reroute" if r["fast_reroute"] else "probes"
        print(
            f"| {what}, every {r['interval_s'] * 1000:g} ms | {r['probes_per_s']:g} | "
            f"{r['cpu_percent']:.2f} | {r['us_per_packet']:.1f} | "
            f"{r['wire_kbit_s_per_circuit']:.0f} |"
        )
    lost = sum(r["lost"] for r in rows)
    silences = sum(r["false_silences"] for r in rows)
    print(f"\nprobes lost on loopback: {lost}; circuits judged silent: {silences}")


if __name__ == "__main__":
    main()
