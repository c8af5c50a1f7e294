"""Emulator fidelity: configured vs measured RTT, loss and rate on every circuit of the
three-site lab, and the link emulator's own ceiling on this machine (root).

1. **Ceiling.**  Two namespaces joined (a) by a veth pair — the kernel alone, the baseline
   of the same run — and (b) by the TUN emulator with no delay and no rate limit.  For each:
   one TCP stream's Mbit/s (5 s) and how many small UDP datagrams a second get through when a
   sender blasts them (3 s).  The emulator's figures are reported as a ratio of the kernel's.
2. **Fidelity.**  ``lab up`` of ``examples/fabrics/three-site.yaml`` at ``--scale``; per
   circuit, over the circuit itself (its point-to-point addresses, no routing):
   - RTT: the probes' minimum and median from the server, against the fabric's RTT;
   - loss: ``--datagrams`` UDP datagrams each way; lost ÷ sent against the fabric's loss
     (with a 95 % Wilson interval), and again with the emulator set to 1 % to check the
     mechanism at a rate one run can measure;
   - rate: one TCP stream for ``--seconds``, Mbit/s against the configured (scaled) rate;
   and how long ``lab up`` (until every agent syncs and every circuit is measured up) and
   ``lab down-all`` take.

    sudo .venv/bin/python benchmarks/bench_lab_fidelity.py [--scale 0.05] [--json]

Prints Markdown tables (and one JSON object with ``--json``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from onecluster.client import Client
from onecluster.lab import Lab, plan_lab
from onecluster.lab._circuits import TunEmulator, start_tun_emulator
from onecluster.lab._plan import CircuitPlan, LabPlan, SitePlan
from onecluster.launch import Launcher
from onecluster.network import add_address, add_veth, delete_netns, in_netns, new_netns, set_link

ROOT = Path(__file__).resolve().parents[1]
FABRIC = ROOT / "examples" / "fabrics" / "three-site.yaml"
PY = sys.executable

BLAST = """
import socket, sys, time
src, dst, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((src, 0))
payload = b"x" * 64
end = time.monotonic() + seconds
sent = 0
while time.monotonic() < end:
    for _ in range(256):
        try:
            s.sendto(payload, (dst, 9100))
            sent += 1
        except OSError:
            pass
print(sent)
"""

PACED = """
import socket, sys, time
src, dst, count, pps = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((src, 0))
start = time.monotonic()
for i in range(count):
    due = start + i / pps
    now = time.monotonic()
    if now < due:
        time.sleep(due - now)
    s.sendto(i.to_bytes(8, "big") + b"\\0" * 56, (dst, 9100))
print(count)
"""

COUNT = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
s.bind((sys.argv[1], 9100))
s.settimeout(float(sys.argv[2]))
print("ready", flush=True)
n = 0
try:
    s.settimeout(30)
    s.recv(2048)
    n = 1
    s.settimeout(float(sys.argv[2]))
    while True:
        s.recv(2048)
        n += 1
except TimeoutError:
    pass
print(n, flush=True)
"""


def udp(src_ns: str, src: str, dst_ns: str, dst: str, sender: list[str]) -> tuple[int, int]:
    """(sent, received) of one UDP run from ``src`` to ``dst``."""
    counter = subprocess.Popen(
        in_netns(dst_ns, [PY, "-c", COUNT, dst, "1.5"]), stdout=subprocess.PIPE, text=True
    )
    assert counter.stdout is not None
    assert counter.stdout.readline().strip() == "ready"
    out = subprocess.run(
        in_netns(src_ns, [PY, "-c", *sender]), capture_output=True, text=True, check=True
    )
    received = int(counter.stdout.readline())
    counter.wait()
    counter.stdout.close()
    return int(out.stdout), received


def tcp(src_ns: str, src: str, dst_ns: str, dst: str, seconds: float) -> float:
    """Mbit/s of one TCP stream (the receiver's count, the first second left out)."""
    module = "onecluster.lab._traffic"
    sink = subprocess.Popen(
        in_netns(dst_ns, [PY, "-m", module, "sink", "tcp", dst, "5301", "0.5"]),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert sink.stdout is not None
    sink.stdout.readline()
    subprocess.run(
        in_netns(src_ns, [PY, "-m", module, "source", "tcp", src, dst, "5301", str(seconds)]),
        check=True,
    )
    samples = [json.loads(line) for line in sink.stdout]
    sink.wait()
    sink.stdout.close()
    timed = [s for s in samples if not s.get("done")]
    first = next((s for s in timed if s["t"] >= 1.0), timed[0])
    last = timed[-1]
    return (last["bytes"] - first["bytes"]) * 8 / max(last["t"] - first["t"], 1e-9) / 1e6


def wilson(lost: int, n: int) -> tuple[float, float]:
    """95 % interval of a proportion."""
    if n == 0:
        return (0.0, 1.0)
    z, p = 1.96, lost / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(centre - half, 0.0), centre + half)


def ceiling(seconds: float) -> dict[str, Any]:
    """Kernel veth vs the emulator between two namespaces."""
    tag = uuid.uuid4().hex[:5]
    results: dict[str, Any] = {}
    for kind in ("veth", "emulator"):
        a, b = f"ocb{tag}{kind[0]}a", f"ocb{tag}{kind[0]}b"
        new_netns(a)
        new_netns(b)
        launcher = Launcher(Path(tempfile.mkdtemp()), grace_s=1.0)
        try:
            if kind == "veth":
                add_veth("ocbv0", "ocbv1", peer_netns=b)
                subprocess.run(["ip", "link", "set", "ocbv0", "netns", a], check=True)
                add_address("ocbv0", "10.219.0.1/24", a)
                add_address("ocbv1", "10.219.0.2/24", b)
                set_link("ocbv0", a, up=True)
                set_link("ocbv1", b, up=True)
                src, dst = "10.219.0.1", "10.219.0.2"
            else:
                circuit = CircuitPlan(
                    circuit="bench", index=0, a="a", b="b", device="bench",
                    a_ip="10.219.1.1", b_ip="10.219.1.2", one_way_ms=0.0, loss=0.0,
                    rate_bps=100e9, burst_bytes=1 << 20, limit_bytes=8 << 20, mtu=1500,
                )  # fmt: skip
                sites = (
                    SitePlan(
                        site="a", index=0, netns=a, service_ip="", mgmt_ip="", mgmt_host_dev=""
                    ),
                    SitePlan(
                        site="b", index=1, netns=b, service_ip="", mgmt_ip="", mgmt_host_dev=""
                    ),
                )
                plan = LabPlan(
                    name="bench", scale=1, mtu=1500, bridge="", sites=sites, circuits=(circuit,)
                )
                start_tun_emulator(plan, circuit, Path(tempfile.mkdtemp()), launcher)
                subprocess.run(["tc", "-n", a, "qdisc", "del", "dev", "bench", "root"], check=True)
                subprocess.run(["tc", "-n", b, "qdisc", "del", "dev", "bench", "root"], check=True)
                src, dst = "10.219.1.1", "10.219.1.2"
            mbps = tcp(a, src, b, dst, seconds)
            sent, received = udp(a, src, b, dst, [BLAST, src, dst, "3"])
            results[kind] = {
                "tcp_mbit_s": round(mbps, 1),
                "udp_pps": round(received / 3),
                "udp_sent_pps": round(sent / 3),
            }
        finally:
            launcher.stop_all()
            delete_netns(a)
            delete_netns(b)
    for key in ("tcp_mbit_s", "udp_pps"):
        results[f"ratio_{key}"] = round(results["emulator"][key] / max(results["veth"][key], 1), 3)
    return results


def fidelity(
    scale: float, datagrams: int, seconds: float
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Per circuit of the three-site lab: RTT, loss and rate, configured vs measured."""
    lab = Lab("ocbench", root=Path(tempfile.mkdtemp()), environ=dict(os.environ))
    began = time.monotonic()
    lab.up(FABRIC, scale=scale)
    times = {"up_s": time.monotonic() - began}
    rows = []
    try:
        status = lab.status()
        plan = plan_lab(
            __import__("onecluster.fabric", fromlist=["load_fabric"]).load_fabric(FABRIC),
            name="ocbench",
            scale=scale,
        )
        time.sleep(12)  # a full probe window
        with Client(status.server_url or "", status.admin_token_file.read_text().strip()) as admin:
            links = {link.circuit: link for link in admin.links()}
        for c in plan.circuits:
            a_ns, b_ns = plan.site(c.a).netns, plan.site(c.b).netns
            link = links[c.circuit]
            mins = [e.rtt_min_ms for e in link.ends if e.rtt_min_ms is not None]
            p50s = [e.rtt_p50_ms for e in link.ends if e.rtt_p50_ms is not None]
            pps = 2000.0
            lost_ab = udp(
                a_ns, c.a_ip, b_ns, c.b_ip, [PACED, c.a_ip, c.b_ip, str(datagrams), str(pps)]
            )
            lost_ba = udp(
                b_ns, c.b_ip, a_ns, c.a_ip, [PACED, c.b_ip, c.a_ip, str(datagrams), str(pps)]
            )
            record = lab.status()
            emulator = next(x.emulator for x in record.circuits if x.circuit == c.circuit)
            assert emulator is not None
            handle = TunEmulator(
                c.circuit, emulator.pid, lab.dir / "emulators" / f"c{c.index}.sock"
            )
            handle.request({"op": "set", "loss": [0.01, 0.01]})
            one_pct = udp(
                a_ns, c.a_ip, b_ns, c.b_ip, [PACED, c.a_ip, c.b_ip, str(datagrams), str(pps)]
            )
            handle.request({"op": "set", "loss": [c.loss, c.loss]})
            mbps = tcp(a_ns, c.a_ip, b_ns, c.b_ip, seconds)
            sent = lost_ab[0] + lost_ba[0]
            lost = sent - lost_ab[1] - lost_ba[1]
            low, high = wilson(lost, sent)
            one_lost = one_pct[0] - one_pct[1]
            rows.append(
                {
                    "circuit": c.circuit,
                    "rtt_ms": c.one_way_ms * 2,
                    "rtt_min_ms": round(min(mins), 2),
                    "rtt_p50_ms": round(max(p50s), 2),
                    "loss": c.loss,
                    "loss_measured": lost / sent,
                    "loss_95": [low, high],
                    "datagrams": sent,
                    "loss_1pct_measured": one_lost / one_pct[0],
                    "rate_mbit_s": c.rate_bps / 1e6,
                    "tcp_mbit_s": round(mbps, 1),
                    "rate_ratio": round(mbps / (c.rate_bps / 1e6), 3),
                }
            )
    finally:
        began = time.monotonic()
        lab.down_all()
        times["down_all_s"] = time.monotonic() - began
    return rows, times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=0.05)
    parser.add_argument("--datagrams", type=int, default=20000, help="per direction and circuit")
    parser.add_argument("--seconds", type=float, default=8.0, help="TCP run per circuit")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("this benchmark needs root (network namespaces)")
    # SIGTERM unwinds like Ctrl-C, so the lab is always torn down
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ceil = ceiling(5.0)
    rows, times = fidelity(args.scale, args.datagrams, args.seconds)
    if args.json:
        print(json.dumps({"ceiling": ceil, "circuits": rows, "lab": times}, indent=2))
        return
    print("| path | TCP, 1 stream | small UDP datagrams through |")
    print("|---|---|---|")
    for kind in ("veth", "emulator"):
        r = ceil[kind]
        through = f"{r['udp_pps']:,} /s (sent {r['udp_sent_pps']:,} /s)"
        print(f"| {kind} | {r['tcp_mbit_s']:,.0f} Mbit/s | {through} |")
    print(f"| emulator ÷ veth | {ceil['ratio_tcp_mbit_s']:.2f} | {ceil['ratio_udp_pps']:.2f} |")
    print()
    print(
        "| circuit | RTT fabric | probes min / p50 | loss fabric | measured (95 % CI), n "
        "| at 1 % set | rate | TCP | ratio |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        lo, hi = r["loss_95"]
        print(
            f"| {r['circuit']} | {r['rtt_ms']:g} ms | {r['rtt_min_ms']} / {r['rtt_p50_ms']} ms "
            f"| {r['loss']:.2%} | {r['loss_measured']:.3%} ({lo:.3%}–{hi:.3%}), {r['datagrams']:,} "
            f"| {r['loss_1pct_measured']:.2%} | {r['rate_mbit_s']:g} Mbit/s "
            f"| {r['tcp_mbit_s']} Mbit/s | {r['rate_ratio']:.2f} |"
        )

    print()
    print(
        f"lab up (until every agent syncs and every circuit is measured up): "
        f"{times['up_s']:.1f} s; down-all: {times['down_all_s']:.1f} s"
    )


if __name__ == "__main__":
    main()
