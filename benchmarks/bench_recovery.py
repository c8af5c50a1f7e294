"""Recovery of the three-site lab from cut and flapping circuits, with the server up and with
it stopped (root).

For each of ``--cuts`` rounds, with a UDP stream (``--pps`` numbered datagrams a second) and
one TCP stream running from Shanghai to Singapore, both Shanghai–Singapore circuits are cut
at once; the round measures, from the moment of the cut (one host, one clock):

- *local switch*: until Shanghai's kernel route to Singapore leads through Tokyo — the agent's
  fast reroute, on its own probes' silence (issue 17);
- *detect*: until the server's first ``link_down`` event for them (server up only);
- *reroute*: until its ``route_changed`` event (the new table is in the agents' sync replies);
- *restored*: the UDP stream's longest silence — the outage an application sees before its
  packets flow on the backup path through Tokyo;
- *TCP stall*: the TCP stream's longest stretch without a byte (TCP's retransmission
  back-off comes on top of the network's restoration);
- *back*: from the heal until the route returns to the primary circuit (5 s of steady
  probes, longer while flap damping holds a circuit that fell often) — the server's table
  with the server up, Shanghai's kernel route with it stopped.

The rounds run first with the server up, then ``--down-cuts`` more with the server stopped
(SIGSTOP: it neither answers nor refuses, so every agent's sync hangs until its timeout, the
harder case for an agent) — the agents then route on their own probes and their last table.

Then one circuit flaps — down ``--flap-down`` s every ``--flap-period`` s for
``--flap-seconds`` — and the run counts route changes against the outages the emulator
produced (the baseline: a router without damping would change routes twice per outage):
Shanghai–Tokyo with the server up (route-table versions, and the kernel routes of both ends),
then Singapore–Tokyo with the server stopped (the kernel routes of both ends).  The third
number of the issue, time until *work* progresses again, needs the training runtime and is
not measured yet.

    sudo .venv/bin/python benchmarks/bench_recovery.py [--cuts 10] [--down-cuts 10] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

from onecluster.client import Client
from onecluster.errors import BackendError
from onecluster.fabric import load_fabric
from onecluster.lab import FlowSample, Lab, LabPlan, LabState, plan_lab
from onecluster.network import show_routes

ROOT = Path(__file__).resolve().parents[1]
FABRIC = ROOT / "examples" / "fabrics" / "three-site.yaml"


def next_circuit(admin: Client, src: str, dst: str) -> str | None:
    return next(r.next_circuit for r in admin.routes(src).routes if r.dst == dst)


def wait(check: Callable[[], bool], timeout: float, period: float = 0.05) -> float:
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > timeout:
            raise TimeoutError
        time.sleep(period)
    return time.monotonic() - start


class Kernel:
    """The kernel routes of the lab's sites: where each sends traffic for another."""

    def __init__(self, plan: LabPlan) -> None:
        self.plan = plan

    def via(self, src: str, dst: str) -> str | None:
        """The next hop's address of ``src``'s route to ``dst`` (``None``: none, or
        unreachable)."""
        address = self.plan.site(dst).service_ip
        try:
            routes = show_routes(self.plan.site(src).netns)
        except BackendError:
            return None
        return next((r.get("gateway") for r in routes if r.get("dst") == address), None)

    def hop(self, src: str, circuit: str) -> str:
        """The address ``src``'s route takes over ``circuit``: its far end's."""
        c = self.plan.circuit(circuit)
        return c.address_of(c.b if src == c.a else c.a)


class Switch(threading.Thread):
    """Polls ``src``'s kernel route to ``dst`` until it leads to ``want``; the wall-clock
    time it first did (``None`` if not within ``timeout``)."""

    def __init__(self, kernel: Kernel, src: str, dst: str, want: str, timeout: float) -> None:
        super().__init__(daemon=True)
        self.args_ = (kernel, src, dst, want, timeout)
        self.at: float | None = None

    def run(self) -> None:
        kernel, src, dst, want, timeout = self.args_
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if kernel.via(src, dst) == want:
                self.at = time.time()
                return
            time.sleep(0.01)


class Changes(threading.Thread):
    """Counts the changes of ``src``'s kernel route to ``dst`` until stopped."""

    def __init__(self, kernel: Kernel, src: str, dst: str) -> None:
        super().__init__(daemon=True)
        self.kernel, self.src, self.dst = kernel, src, dst
        self.changes = 0
        self.stop = threading.Event()

    def run(self) -> None:
        last = self.kernel.via(self.src, self.dst)
        while not self.stop.wait(0.1):
            now = self.kernel.via(self.src, self.dst)
            if now != last:
                self.changes += 1
                last = now


def collect(
    lab: Lab, proto: Literal["tcp", "udp"], seconds: float, pps: float, out: list[FlowSample]
) -> None:
    for sample in lab.traffic(
        "shanghai", "singapore", seconds=seconds, proto=proto, pps=pps, interval_s=0.05
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


def one_cut(lab: Lab, admin: Client | None, kernel: Kernel, pps: float) -> dict[str, float]:
    """One round; ``admin`` is ``None`` while the server is stopped."""
    primary = kernel.hop("shanghai", "sha-sin-hk")
    wait(lambda: kernel.via("shanghai", "singapore") == primary, 30, period=0.1)
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
    last_event = admin.events(limit=1)[-1].id if admin else None
    tokyo = kernel.hop("shanghai", "sha-tyo")
    switch = Switch(kernel, "shanghai", "singapore", tokyo, timeout=20)
    switch.start()
    cut_at = time.time()
    lab.cut("shanghai", "singapore")
    switch.join()
    if admin is not None:
        wait(lambda: next_circuit(admin, "shanghai", "singapore") == "sha-tyo", 20)
    for f in flows:
        f.join(timeout=60)
    found: dict[str, float] = {}
    if switch.at is not None:
        found["local_switch_s"] = switch.at - cut_at
    if admin is not None:
        events = admin.events(after=last_event, limit=100)
        found["detect_s"] = min(e.time for e in events if e.kind == "link_down") - cut_at
        found["reroute_s"] = min(e.time for e in events if e.kind == "route_changed") - cut_at
    lab.heal("shanghai", "singapore")
    if admin is not None:
        back = wait(lambda: next_circuit(admin, "shanghai", "singapore") == "sha-sin-hk", 300)
    else:
        back = wait(lambda: kernel.via("shanghai", "singapore") == primary, 300, period=0.1)
    return {
        **found,
        "restored_s": float(udp[-1].gap_s or 0.0),
        "tcp_stall_s": longest_stall(tcp),
        "back_s": back,
    }


def flapping(
    lab: Lab, admin: Client | None, kernel: Kernel, ends: tuple[str, str], args: Any
) -> dict[str, Any]:
    """Flap the circuit between ``ends``; count route changes (the table's while the server
    is up, the kernel routes of both ends either way)."""
    a, b = ends
    watches = [Changes(kernel, a, b), Changes(kernel, b, a)]
    for w in watches:
        w.start()
    versions = [admin.routes().version] if admin else []
    lab.flap(a, b, period_s=args.flap_period, down_s=args.flap_down)
    end = time.monotonic() + args.flap_seconds
    while time.monotonic() < end:
        if admin is not None:
            versions.append(admin.routes().version)
        time.sleep(0.25)
    lab.heal(a, b)
    for w in watches:
        w.stop.set()
        w.join()
    outages = int(args.flap_seconds // args.flap_period)
    result: dict[str, Any] = {
        "circuit": f"{a}–{b}",
        "outages": outages,
        "undamped_changes": 2 * outages,
        "kernel_changes": {f"{w.src}→{w.dst}": w.changes for w in watches},
    }
    if admin is not None:
        result["table_changes"] = sum(1 for x, y in itertools.pairwise(versions) if x != y)
    return result


def settle(admin: Client, kernel: Kernel, timeout: float = 600.0) -> None:
    """Until the server routes around nothing and every kernel route is the table's."""

    def settled() -> bool:
        table = admin.routes()
        if table.down:
            return False
        for r in table.routes:
            if r.next_circuit is None or kernel.via(r.src, r.dst) != kernel.hop(
                r.src, r.next_circuit
            ):
                return False
        return True

    wait(settled, timeout, period=0.5)


@contextlib.contextmanager
def server_stopped(lab: Lab) -> Iterator[None]:
    """The lab's server frozen (SIGSTOP to its process group) inside, thawed after."""
    state = LabState.load(lab.dir)
    assert state is not None and state.server is not None
    group = os.getpgid(state.server.pid)
    os.killpg(group, signal.SIGSTOP)
    try:
        yield
    finally:
        os.killpg(group, signal.SIGCONT)


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "worst": max(values), "best": min(values)}


def summarise(rounds: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    keys = {k for r in rounds for k in r}
    return {k: summary([r[k] for r in rounds if k in r]) for k in sorted(keys)}


NAMES = {
    "local_switch_s": "local switch (cut → Shanghai's kernel route via Tokyo)",
    "detect_s": "detect (cut → link_down)",
    "reroute_s": "reroute (cut → new route table)",
    "restored_s": "traffic on the backup (longest UDP gap)",
    "tcp_stall_s": "TCP stall (longest stretch without a byte)",
    "back_s": "heal → route back on the primary",
}


def table(title: str, result: dict[str, dict[str, float]]) -> None:
    print(f"| {title} | median | worst | best |")
    print("|---|---|---|---|")
    for key, label in NAMES.items():
        if key in result:
            s = result[key]
            print(f"| {label} | {s['median']:.2f} s | {s['worst']:.2f} s | {s['best']:.2f} s |")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cuts", type=int, default=10, help="rounds with the server up")
    parser.add_argument("--down-cuts", type=int, default=10, help="rounds with it stopped")
    parser.add_argument("--pps", type=float, default=500.0)
    parser.add_argument("--flap-period", type=float, default=5.0)
    parser.add_argument("--flap-down", type=float, default=1.0)
    parser.add_argument("--flap-seconds", type=float, default=60.0)
    parser.add_argument("--no-flap", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("this benchmark needs root (network namespaces)")
    # SIGTERM unwinds like Ctrl-C, so the lab is always torn down
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    lab = Lab("ocbench", root=Path(tempfile.mkdtemp()), environ=dict(os.environ))
    status = lab.up(FABRIC)
    kernel = Kernel(plan_lab(load_fabric(FABRIC), name=lab.name))
    up_rounds: list[dict[str, float]] = []
    down_rounds: list[dict[str, float]] = []
    flaps: list[dict[str, Any]] = []

    def said(kind: str, r: dict[str, float]) -> None:
        line = ", ".join(f"{k} {v:.2f}" for k, v in r.items())
        print(f"{kind} round: {line}", file=sys.stderr)

    try:
        with Client(status.server_url or "", status.admin_token_file.read_text().strip()) as admin:
            time.sleep(3)
            for _ in range(args.cuts):
                up_rounds.append(one_cut(lab, admin, kernel, args.pps))
                said("server up", up_rounds[-1])
            if args.down_cuts:
                settle(admin, kernel)
                with server_stopped(lab):
                    for _ in range(args.down_cuts):
                        down_rounds.append(one_cut(lab, None, kernel, args.pps))
                        said("server stopped", down_rounds[-1])
            if not args.no_flap:
                settle(admin, kernel)
                flaps.append(flapping(lab, admin, kernel, ("shanghai", "tokyo"), args))
                settle(admin, kernel)  # the flapping circuit back, past its damping
                with server_stopped(lab):
                    flaps.append(flapping(lab, None, kernel, ("singapore", "tokyo"), args))
    finally:
        lab.down_all()
    result = {
        "server_up": {"rounds": up_rounds, **summarise(up_rounds)},
        "server_stopped": {"rounds": down_rounds, **summarise(down_rounds)},
        "flaps": flaps,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    if up_rounds:
        table(f"{len(up_rounds)} cuts of Shanghai–Singapore, server up", summarise(up_rounds))
    if down_rounds:
        table(
            f"{len(down_rounds)} cuts of Shanghai–Singapore, server stopped",
            summarise(down_rounds),
        )
    for f in flaps:
        kernel_changes = ", ".join(f"{k}: {v}" for k, v in f["kernel_changes"].items())
        table_changes = (
            f"{f['table_changes']} route-table changes, " if "table_changes" in f else ""
        )
        print(
            f"flap of {f['circuit']} ({args.flap_down:g} s down every {args.flap_period:g} s "
            f"for {args.flap_seconds:g} s, server {'up' if table_changes else 'stopped'}): "
            f"{f['outages']} outages, {table_changes}kernel route changes {kernel_changes} "
            f"(without damping: {f['undamped_changes']} each)"
        )


if __name__ == "__main__":
    main()
