"""Recovery of the three-site lab from cut and flapping circuits (root).

For each of ``--cuts`` rounds, with a UDP stream (``--pps`` numbered datagrams a second) and
one TCP stream running from Shanghai to Singapore, both Shanghai–Singapore circuits are cut
at once; the round measures, from the moment of the cut (one host, one clock):

- *detect*: until the server's first ``link_down`` event for them;
- *reroute*: until its ``route_changed`` event (the new table is in the agents' sync replies);
- *restored*: the UDP stream's longest silence — the outage an application sees before its
  packets flow on the backup path through Tokyo;
- *TCP stall*: the TCP stream's longest stretch without a byte (TCP's retransmission
  back-off comes on top of the network's restoration);
- *back*: from the heal until the route returns to the primary circuit (5 s of steady
  probes, longer while flap damping holds a circuit that fell often).

Then one circuit (Shanghai–Tokyo) flaps — down ``--flap-down`` s every ``--flap-period`` s
for ``--flap-seconds`` — and the run counts route-table changes against the outages the
emulator produced (the baseline: a router without damping would change routes twice per
outage).  The third number of the issue, time until *work* progresses again, needs the
training runtime and is not measured yet.

    sudo .venv/bin/python benchmarks/bench_recovery.py [--cuts 8] [--json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from onecluster.client import Client
from onecluster.lab import FlowSample, Lab

ROOT = Path(__file__).resolve().parents[1]
FABRIC = ROOT / "examples" / "fabrics" / "three-site.yaml"


def next_circuit(admin: Client, src: str, dst: str) -> str | None:
    return next(r.next_circuit for r in admin.routes(src).routes if r.dst == dst)


def wait(check: Any, timeout: float) -> float:
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > timeout:
            raise TimeoutError
        time.sleep(0.05)
    return time.monotonic() - start


def collect(lab: Lab, proto: str, seconds: float, pps: float, out: list[FlowSample]) -> None:
    for sample in lab.traffic(
        "shanghai",
        "singapore",
        seconds=seconds,
        proto=proto,
        pps=pps,
        interval_s=0.05,  # type: ignore[arg-type]
    ):
        out.append(sample)


def longest_stall(samples: list[FlowSample]) -> float:
    """The longest run of samples without new bytes, in seconds."""
    longest, since, last_bytes, prev_t = 0.0, None, -1, 0.0
    for s in samples:
        if s.bytes == last_bytes:
            since = since if since is not None else prev_t
            longest = max(longest, s.t - since)
        else:
            since = None
        last_bytes, prev_t = s.bytes, s.t
    return longest


def one_cut(lab: Lab, admin: Client, pps: float) -> dict[str, float]:
    udp: list[FlowSample] = []
    tcp: list[FlowSample] = []
    flows = [
        threading.Thread(target=collect, args=(lab, "udp", 9.0, pps, udp)),
        threading.Thread(target=collect, args=(lab, "tcp", 9.0, pps, tcp)),
    ]
    for f in flows:
        f.start()
    wait(lambda: len(udp) > 20 and len(tcp) > 20, 20)
    time.sleep(1.5)
    last_event = admin.events(limit=1)[-1].id
    cut_at = time.time()
    lab.cut("shanghai", "singapore")
    wait(lambda: next_circuit(admin, "shanghai", "singapore") == "sha-tyo", 20)
    for f in flows:
        f.join(timeout=60)
    events = admin.events(after=last_event, limit=100)
    down = min(e.time for e in events if e.kind == "link_down")
    rerouted = min(e.time for e in events if e.kind == "route_changed")
    lab.heal("shanghai", "singapore")
    back = wait(lambda: next_circuit(admin, "shanghai", "singapore") == "sha-sin-hk", 300)
    final = udp[-1]
    return {
        "detect_s": down - cut_at,
        "reroute_s": rerouted - cut_at,
        "restored_s": float(final.gap_s or 0.0),
        "tcp_stall_s": longest_stall(tcp),
        "back_s": back,
    }


def flapping(lab: Lab, admin: Client, period: float, down: float, seconds: float) -> dict[str, Any]:
    versions = [admin.routes().version]
    lab.flap("shanghai", "tokyo", period_s=period, down_s=down)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        versions.append(admin.routes().version)
        time.sleep(0.25)
    lab.heal("shanghai", "tokyo")
    changes = sum(1 for a, b in itertools.pairwise(versions) if a != b)
    outages = int(seconds // period)
    return {"outages": outages, "route_changes": changes, "undamped_changes": 2 * outages}


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "worst": max(values), "best": min(values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cuts", type=int, default=8)
    parser.add_argument("--pps", type=float, default=500.0)
    parser.add_argument("--flap-period", type=float, default=5.0)
    parser.add_argument("--flap-down", type=float, default=1.0)
    parser.add_argument("--flap-seconds", type=float, default=60.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("this benchmark needs root (network namespaces)")
    # SIGTERM unwinds like Ctrl-C, so the lab is always torn down
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    lab = Lab("ocbench", root=Path(tempfile.mkdtemp()), environ=dict(os.environ))
    status = lab.up(FABRIC)
    rounds = []
    try:
        with Client(status.server_url or "", status.admin_token_file.read_text().strip()) as admin:
            time.sleep(3)
            for i in range(args.cuts):
                rounds.append(one_cut(lab, admin, args.pps))
                print(
                    f"round {i + 1}: " + ", ".join(f"{k} {v:.2f}" for k, v in rounds[-1].items()),
                    file=sys.stderr,
                )
            flap = flapping(lab, admin, args.flap_period, args.flap_down, args.flap_seconds)
    finally:
        lab.down_all()
    result = {
        "rounds": rounds,
        **{key: summary([r[key] for r in rounds]) for key in rounds[0]},
        "flap": flap,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"| {len(rounds)} cuts of Shanghai–Singapore | median | worst | best |")
    print("|---|---|---|---|")
    names = {
        "detect_s": "detect (cut → link_down)",
        "reroute_s": "reroute (cut → new route table)",
        "restored_s": "traffic on the backup (longest UDP gap)",
        "tcp_stall_s": "TCP stall (longest stretch without a byte)",
        "back_s": "heal → route back on the primary",
    }
    for key, label in names.items():
        s = result[key]
        print(f"| {label} | {s['median']:.2f} s | {s['worst']:.2f} s | {s['best']:.2f} s |")
    print()
    print(
        f"flap ({args.flap_down:g} s down every {args.flap_period:g} s "
        f"for {args.flap_seconds:g} s): "
        f"{flap['outages']} outages, {flap['route_changes']} route-table changes "
        f"(without damping: {flap['undamped_changes']})"
    )


if __name__ == "__main__":
    main()
