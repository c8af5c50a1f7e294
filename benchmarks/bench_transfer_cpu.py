"""What moving datasets costs in CPU, and the most one agent process can feed (no root).

Measured in one run, on data in the page cache (so the disk is not what is measured):

- *chunk*, *hash*, *zstd*: FastCDC cutting, BLAKE3 digests and zstd level 1, each alone, in
  GB/s of one core, on random data and (zstd) on text;
- *scan*: ``storage.scan_tree`` over a tree of ``--gb`` GB (a few large files), CPU seconds
  per GB — what ``dataset add`` costs a site;
- *push*: a whole version from one agent's data plane to another's on loopback, no rate cap,
  ``--streams`` paths: GB/s and CPU seconds per GB (both ends in this one process);
- *baseline*: one plain TCP stream on loopback moving the same bytes with no chunking,
  hashing or checking — the ceiling of a Python socket here.

    .venv/bin/python benchmarks/bench_transfer_cpu.py [--gb 1] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import blake3
import zstandard
from pyfastcdc import FastCDC

from onecluster.agent._data import SiteData
from onecluster.schema import DataOrders, HopOut, PathOut, ReceiveOrder, ScanOrder, ServeOrder
from onecluster.transfer import CHUNK_AVG, CHUNK_MAX, CHUNK_MIN

_MB = 1 << 20


def timed(fn: Any) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) of ``fn()``."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def primitives(data: bytes, text: bytes) -> dict[str, float]:
    cdc = FastCDC(CHUNK_AVG, min_size=CHUNK_MIN, max_size=CHUNK_MAX)
    gb = len(data) / 1e9
    out: dict[str, float] = {}
    _, cpu = timed(lambda: sum(1 for _ in cdc.cut_buf(data)))
    out["chunk_gb_per_cpu_s"] = gb / cpu
    _, cpu = timed(lambda: blake3.blake3(data).digest())
    out["blake3_gb_per_cpu_s"] = gb / cpu
    z = zstandard.ZstdCompressor(level=1)
    sample = data[: 256 * _MB]
    _, cpu = timed(lambda: z.compress(sample))
    out["zstd_random_gb_per_cpu_s"] = len(sample) / 1e9 / cpu
    _, cpu = timed(lambda: z.compress(text))
    out["zstd_text_gb_per_cpu_s"] = len(text) / 1e9 / cpu
    out["zstd_text_ratio"] = len(text) / len(z.compress(text))
    return out


def baseline(nbytes: int) -> float:
    """GB/s of one plain TCP stream on loopback (1 MiB sends)."""
    server = socket.create_server(("127.0.0.1", 0))
    got = [0]

    def sink() -> None:
        conn, _ = server.accept()
        buf = bytearray(_MB)
        while n := conn.recv_into(buf):
            got[0] += n
        conn.close()

    thread = threading.Thread(target=sink)
    thread.start()
    block = os.urandom(_MB)
    start = time.perf_counter()
    with socket.create_connection(server.getsockname()) as sock:
        for _ in range(nbytes // _MB):
            sock.sendall(block)
    thread.join()
    server.close()
    return got[0] / 1e9 / (time.perf_counter() - start)


def push(tree: Path, work: Path, streams_paths: int) -> dict[str, float]:
    src = SiteData("a", work / "a", address="127.0.0.1")
    dst = SiteData("b", work / "b", address="127.0.0.1")
    try:
        wall, cpu = timed(lambda: _scan(src, tree))
        root = src.report().scans[0].root
        assert root is not None
        size = src.report().scans[0].bytes_done
        paths = [
            PathOut(name=f"p{i}", circuits=[], rtt_s=0.0001, rate_bps=None,
                    hops=[HopOut(address="127.0.0.1", port=src.server.port)])
            for i in range(streams_paths)
        ]  # fmt: skip
        src.apply(DataOrders(serve=[ServeOrder(id="t", dataset="ds", root=root, ticket="k")]))
        order = ReceiveOrder(id="t", dataset="ds", root=root, src="a", ticket="k", paths=paths)
        pwall, pcpu = timed(lambda: _receive(dst, order))
        return {
            "scan_cpu_s_per_gb": cpu / (size / 1e9),
            "scan_gb_per_s": size / 1e9 / wall,
            "push_gb_per_s": size / 1e9 / pwall,
            "push_cpu_s_per_gb": pcpu / (size / 1e9),
        }
    finally:
        src.close()
        dst.close()


def _scan(site: SiteData, tree: Path) -> None:
    site.apply(DataOrders(scans=[ScanOrder(id="s", dataset="ds", path=str(tree))]))
    while site.report().scans[0].state == "scanning":
        time.sleep(0.01)


def _receive(site: SiteData, order: ReceiveOrder) -> None:
    site.apply(DataOrders(receive=[order]))
    while (state := site.report().transfers[0].state) not in ("done", "failed"):
        time.sleep(0.01)
    assert state == "done", site.report().transfers[0].error


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gb", type=float, default=1.0, help="size of the test tree")
    parser.add_argument("--paths", type=int, default=2, help="loopback paths of the push")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    nbytes = int(args.gb * 1e9)
    data = os.urandom(min(nbytes, 1 << 30))
    text = (Path(__file__).read_bytes() * 2000)[: 64 * _MB]
    result: dict[str, Any] = {"gb": args.gb}
    result.update(primitives(data, text))
    result["baseline_tcp_gb_per_s"] = baseline(nbytes)
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        tree.mkdir()
        per = 256 * _MB
        for i in range((nbytes + per - 1) // per):
            (tree / f"part-{i:03}.bin").write_bytes(os.urandom(min(per, nbytes - i * per)))
        result.update(push(tree, Path(tmp), args.paths))
    result["push_vs_baseline"] = result["push_gb_per_s"] / result["baseline_tcp_gb_per_s"]
    if args.json:
        print(json.dumps(result, indent=2))
        return
    for key, value in result.items():
        print(f"{key:28} {value:10.3f}")


if __name__ == "__main__":
    main()
