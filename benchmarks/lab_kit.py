"""The measuring kit of ``bench_transfer.py`` (root): a lab that waits its turn on the host,
the circuits' own counters, datasets of random bytes, pushes through the API, and the
baselines — one TCP stream with a chosen congestion control, and rsync between the sites'
namespaces.

Times on a circuit come from its link emulator's counters (IP bytes forwarded each way),
polled every 50 ms.  A sample *carries data* from :data:`ACTIVE_BYTES` on — far above what
the agents' probes send — so a run's span on the circuit is from the start of its first such
sample to the end of its last.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import blake3

from onecluster.client import Client
from onecluster.errors import ConflictError
from onecluster.fabric import load_fabric
from onecluster.lab import FlowSample, Lab, LabPlan, TunEmulator, plan_lab
from onecluster.network import in_netns
from onecluster.schema import DatasetAdd, PushIn, TransferOut

PY = sys.executable
LAB = "ocbench"
MB = 1_000_000
#: A 50 ms sample carries data from this many bytes on (the probes send ~1 kB/s).
ACTIVE_BYTES = 30_000

Series = list[tuple[float, int]]

SENDER = """
import socket, sys, time
src, dst, port, seconds, cc = sys.argv[1:6]
s = socket.socket()
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
s.bind((src, 0))
s.settimeout(30)
s.connect((dst, int(port)))
payload = b"\\0" * 65536
end = time.monotonic() + float(seconds)
while time.monotonic() < end:
    s.sendall(payload)
s.close()
"""


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def wait(check: Callable[[], bool], timeout: float, what: str, period: float = 0.1) -> None:
    """Poll ``check`` until true; :class:`TimeoutError` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout:.0f} s")
        time.sleep(period)


# -- the lab ----------------------------------------------------------------------------------


@dataclass
class Bench:
    """A running lab, its admin client, its layout, its circuits' emulators and a work
    directory on the same disk as its sites' data."""

    lab: Lab
    admin: Client
    plan: LabPlan
    emulators: dict[str, TunEmulator]
    work: Path

    def ns(self, site: str) -> str:
        return self.plan.site(site).netns

    def ip(self, site: str) -> str:
        return self.plan.site(site).service_ip

    def into(self, site: str) -> list[tuple[str, int]]:
        """(circuit, direction) of every circuit's direction that arrives at ``site``."""
        return [(c.circuit, 0 if c.b == site else 1) for c in self.plan.of_site(site)]

    def set_loss(self, loss: float) -> None:
        """Every circuit loses ``loss`` of its packets each way from now on."""
        for emulator in self.emulators.values():
            emulator.request({"op": "set", "loss": [loss, loss]})

    def agent_pids(self) -> dict[str, int | None]:
        return {s.site: s.agent_pid for s in self.lab.status().sites}


@contextlib.contextmanager
def running_lab(
    fabric: Path,
    *,
    scale: float,
    mtu: int,
    base: Path,
    server_flags: Sequence[str] = (),
    wait_s: float = 1800,
) -> Iterator[Bench]:
    """A lab ``ocbench`` of ``fabric`` in a new directory under ``base`` (its sites' data and
    the benchmark's work go there too); waits while another lab holds the host; always torn
    down, and its directory removed unless something failed (then its logs stay)."""
    root = Path(tempfile.mkdtemp(prefix="ocbench-", dir=base))
    lab = Lab(LAB, root=root, environ=dict(os.environ))
    deadline = time.monotonic() + wait_s
    while True:
        try:
            status = lab.up(fabric, scale=scale, mtu=mtu, server_flags=server_flags)
            break
        except ConflictError as exc:
            if time.monotonic() > deadline:
                shutil.rmtree(root)
                raise
            log(f"{exc.message}: waiting for it to go")
            time.sleep(15)
        except BaseException:
            log(f"the lab did not come up; its logs are kept in {lab.dir / 'logs'}")
            raise
    ok = False
    try:
        plan = plan_lab(load_fabric(fabric), name=LAB, scale=scale, mtu=mtu)
        sockets = {c.circuit: lab.dir / "emulators" / f"c{c.index}.sock" for c in plan.circuits}
        emulators = {
            c.circuit: TunEmulator(c.circuit, c.emulator.pid, sockets[c.circuit])
            for c in status.circuits
            if c.emulator is not None
        }
        token = status.admin_token_file.read_text().strip()
        with Client(status.server_url or "", token, timeout=30.0) as admin:
            work = root / "work"
            (work / "data").mkdir(parents=True)
            yield Bench(lab, admin, plan, emulators, work)
        ok = True
    finally:
        lab.down_all()
        if ok:
            shutil.rmtree(root, ignore_errors=True)
        else:
            log(f"the lab's logs are kept in {lab.dir / 'logs'}")


def cpu_s(pid: int | None) -> float:
    """User + system CPU seconds of ``pid`` (all its threads) so far."""
    if pid is None:
        return math.nan
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def max_flow(plan: LabPlan, src: str, dst: str) -> float:
    """The most bit/s the lab's circuits carry from ``src`` to ``dst`` (Edmonds–Karp; each
    circuit carries its tbf rate each way)."""
    cap: dict[tuple[str, str], float] = {}
    for c in plan.circuits:
        for u, v in ((c.a, c.b), (c.b, c.a)):
            cap[(u, v)] = cap.get((u, v), 0.0) + c.rate_bps
    total = 0.0
    while True:
        parent = {src: src}
        queue = deque([src])
        while queue and dst not in parent:
            x = queue.popleft()
            for (u, v), left in cap.items():
                if u == x and left > 0 and v not in parent:
                    parent[v] = u
                    queue.append(v)
        if dst not in parent:
            return total
        path = []
        v = dst
        while v != src:
            path.append((parent[v], v))
            v = parent[v]
        flow = min(cap[e] for e in path)
        for u, v in path:
            cap[(u, v)] -= flow
            cap[(v, u)] = cap.get((v, u), 0.0) + flow
        total += flow


# -- the circuits' counters -------------------------------------------------------------------


class Wire:
    """The emulators' forwarded-byte counters (per circuit: a→b, b→a), polled every
    ``period_s`` by a thread while the ``with`` block runs."""

    def __init__(self, bench: Bench, period_s: float = 0.05) -> None:
        self._emulators = bench.emulators
        self._period = period_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.samples: list[tuple[float, dict[str, tuple[int, int]]]] = []

    def snapshot(self) -> dict[str, tuple[int, int]]:
        out = {}
        for name, emulator in self._emulators.items():
            a, b = emulator.status().directions
            out[name] = (a["forwarded_bytes"], b["forwarded_bytes"])
        return out

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.monotonic(), self.snapshot()))
            self._stop.wait(self._period)

    def __enter__(self) -> Wire:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append((time.monotonic(), self.snapshot()))

    def series(self, into: list[tuple[str, int]], t0: float = 0.0, t1: float = math.inf) -> Series:
        """(time, bytes so far) over the circuit directions ``into``, from ``t0`` to ``t1``."""
        return [(t, sum(n[c][d] for c, d in into)) for t, n in self.samples if t0 <= t <= t1]


def _carried(series: Series, i: int) -> bool:
    return series[i][1] - series[i - 1][1] >= ACTIVE_BYTES


def active_span(series: Series) -> tuple[float, float]:
    """From the start of the first sample that carried data to the end of the last one."""
    steps = [(series[i - 1][0], series[i][0]) for i in range(1, len(series)) if _carried(series, i)]
    return (steps[0][0], steps[-1][1]) if steps else (math.nan, math.nan)


def longest_gap(series: Series) -> float:
    """The longest stretch of samples without data."""
    longest, since = 0.0, None
    for i in range(1, len(series)):
        if _carried(series, i):
            since = None
            continue
        since = series[i - 1][0] if since is None else since
        longest = max(longest, series[i][0] - since)
    return longest


def data_again(series: Series) -> float:
    """When data flowed again after the first sample without any (``nan``: never)."""
    quiet = False
    for i in range(1, len(series)):
        if quiet and _carried(series, i):
            return series[i - 1][0]
        quiet = quiet or not _carried(series, i)
    return math.nan


def ip_rate(series: Series, t0: float, t1: float) -> float:
    """IP bit/s over the samples from ``t0`` to ``t1``."""
    inside = [(t, n) for t, n in series if t0 <= t <= t1]
    if len(inside) < 2:
        return math.nan
    return (inside[-1][1] - inside[0][1]) * 8 / (inside[-1][0] - inside[0][0])


def on_circuit(prefix: str, series: Series, rate: float) -> dict[str, Any]:
    """What one run did to the circuits of ``series`` (whose tbf rates add up to ``rate``):
    its span, its IP rate ÷ ``rate`` in steady state (its first and last 2 s left out), and
    the same second by second."""
    first, last = active_span(series)
    seconds = [first + k for k in range(int(last - first))] if last > first else []
    return {
        f"{prefix}_span_s": last - first,
        f"{prefix}_ip_steady": ip_rate(series, first + 2, last - 2) / rate,
        f"{prefix}_ip_profile": [round(ip_rate(series, t, t + 1) / rate, 3) for t in seconds],
    }


def wire_total(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> int:
    """IP bytes the circuits forwarded between two snapshots, both directions."""
    return sum(after[c][d] - before[c][d] for c in before for d in (0, 1))


# -- datasets ---------------------------------------------------------------------------------


def random_bytes(n: int) -> bytes:
    """``n`` fresh random bytes (BLAKE3's extendable output: ~1.4 GB/s here)."""
    return blake3.blake3(os.urandom(32)).digest(length=n)


def big_files(top: Path, total: int, file_size: int) -> int:
    """Files of ``file_size`` random bytes, ``total`` in all."""
    top.mkdir(parents=True)
    xof = blake3.blake3(os.urandom(32))
    written = 0
    for i in range(math.ceil(total / file_size)):
        size = min(file_size, total - written)
        (top / f"part-{i:04}.bin").write_bytes(xof.digest(length=size, seek=written))
        written += size
    return written


def small_files(top: Path, count: int, lo: int = 2000, hi: int = 4000) -> int:
    """``count`` files of ``lo``–``hi`` random bytes, 1,000 a directory (an image dataset)."""
    rng = random.Random(count)
    sizes = [rng.randint(lo, hi) for _ in range(count)]
    data = random_bytes(sum(sizes))
    offset = 0
    for i, size in enumerate(sizes):
        directory = top / f"{i // 1000:04}"
        if i % 1000 == 0:
            directory.mkdir(parents=True)
        fd = os.open(directory / f"{i:06}.jpg", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, data[offset : offset + size])
        os.close(fd)
        offset += size
    return offset


def mixed_tree(top: Path, total: int, rng: random.Random) -> int:
    """Files of 2–6 MB (95 % of ``total``) in ``shards/``, of 1–20 KB in ``small/``."""
    (top / "shards").mkdir(parents=True)
    (top / "small").mkdir()
    written, i = 0, 0
    while written < 0.95 * total:
        size = rng.randint(2 * MB, 6 * MB)
        (top / "shards" / f"{i:04}.bin").write_bytes(random_bytes(size))
        written, i = written + size, i + 1
    i = 0
    while written < total:
        size = rng.randint(1000, 20_000)
        (top / "small" / f"{i:05}.jpg").write_bytes(random_bytes(size))
        written, i = written + size, i + 1
    return written


def change(top: Path, fraction: float, rng: random.Random) -> dict[str, int]:
    """Change ``fraction`` of a :func:`mixed_tree`'s bytes: 40 % as insertions in the middle
    of 8 files, 30 % as overwrites in the middle of 6 others, 20 % as 2 new files, 10 % as
    rewritten small files.  The bytes of each kind, and ``changed``, their sum."""
    shards = sorted((top / "shards").iterdir())
    small = sorted((top / "small").iterdir())
    target = fraction * sum(p.stat().st_size for p in [*shards, *small])
    picked = rng.sample(shards, 14)
    done = {"inserted": 0, "overwritten": 0, "new_files": 0, "small_rewritten": 0}
    for path in picked[:8]:
        raw = path.read_bytes()
        at = rng.randint(len(raw) // 4, 3 * len(raw) // 4)
        extra = random_bytes(int(0.4 * target / 8))
        path.write_bytes(raw[:at] + extra + raw[at:])
        done["inserted"] += len(extra)
    for path in picked[8:]:
        size = int(0.3 * target / 6)
        length = path.stat().st_size
        with path.open("r+b") as f:
            f.seek(rng.randint(length // 4, 3 * length // 4 - size))
            f.write(random_bytes(size))
        done["overwritten"] += size
    for k in range(2):
        size = int(0.2 * target / 2)
        (top / "shards" / f"new-{k}.bin").write_bytes(random_bytes(size))
        done["new_files"] += size
    for path in rng.sample(small, len(small)):
        if done["small_rewritten"] >= 0.1 * target:
            break
        size = path.stat().st_size
        path.write_bytes(random_bytes(size))
        done["small_rewritten"] += size
    return {**done, "changed": sum(done.values())}


def tree_bytes(top: Path) -> int:
    """Bytes of every file under ``top`` (rsync's temporary files too)."""
    total = 0
    for directory, _, files in os.walk(top):
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                total += (Path(directory) / name).stat().st_size
    return total


# -- onecluster -------------------------------------------------------------------------------


def register(admin: Client, name: str, site: str, tree: Path, timeout: float = 1800) -> float:
    """``dataset add``: the seconds until the API says the scan is done."""
    began = time.monotonic()
    scan = admin.add_dataset(DatasetAdd(name=name, site=site, path=str(tree)))
    wait(lambda: admin.scan(scan.id).state in ("done", "failed"), timeout, f"scan of {name}", 0.05)
    done = admin.scan(scan.id)
    if done.state != "done":
        raise RuntimeError(f"the scan of {name} failed: {done.error}")
    return time.monotonic() - began


@dataclass
class Pushed:
    """A push that ended, and the API's view of it every 0.2 s."""

    transfer: TransferOut
    began: float
    ended: float
    samples: list[tuple[float, TransferOut]] = field(default_factory=list)

    @property
    def wall_s(self) -> float:
        return self.ended - self.began


def push(
    admin: Client,
    name: str,
    dst: str,
    *,
    timeout: float = 1800,
    during: Callable[[TransferOut], None] | None = None,
    check: bool = True,
) -> Pushed:
    """``push NAME --to DST``, then follow it until it ends, calling ``during`` with each
    sample; with ``check``, :class:`RuntimeError` unless it is done."""
    began = time.monotonic()
    out = admin.push(PushIn.model_validate({"dataset": name, "to": dst}))
    samples = []
    while True:
        current = admin.transfer(out.id)
        samples.append((time.monotonic(), current))
        if current.state in ("done", "failed", "cancelled"):
            break
        if during is not None:
            during(current)
        if time.monotonic() - began > timeout:
            raise TimeoutError(f"transfer {out.id} not done within {timeout:.0f} s: {current}")
        time.sleep(0.2)
    if check and current.state != "done":
        raise RuntimeError(f"transfer {out.id} of {name} {current.state}: {current.error}")
    return Pushed(current, began, time.monotonic(), samples)


def recorded(bench: Bench, site: str, dataset: str, root: str) -> tuple[int, int]:
    """(chunks, bytes) that ``site``'s index records as verified for the version (read with
    the site's agent down)."""
    index = bench.lab.dir / "sites" / site / "data" / "index.sqlite"
    with contextlib.closing(sqlite3.connect(index)) as db:
        n, size = db.execute(
            "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM chunks WHERE dataset = ? AND root = ?",
            (dataset, bytes.fromhex(root)),
        ).fetchone()
    return int(n), int(size)


# -- baselines --------------------------------------------------------------------------------


def tcp_stream(
    bench: Bench, src: str, dst: str, seconds: float, *, cc: str, port: int = 5401
) -> float:
    """One TCP stream with congestion control ``cc`` from ``src``'s service address to
    ``dst``'s (so over their route) for ``seconds``: its bit/s, as received from its first
    byte to its last."""
    sink_argv = [PY, "-m", "onecluster.lab._traffic", "sink", "tcp", bench.ip(dst), str(port), "1"]
    sink = subprocess.Popen(in_netns(bench.ns(dst), sink_argv), stdout=subprocess.PIPE, text=True)
    assert sink.stdout is not None
    try:
        assert '"listening"' in sink.stdout.readline()
        sender = [PY, "-c", SENDER, bench.ip(src), bench.ip(dst), str(port), str(seconds), cc]
        subprocess.run(in_netns(bench.ns(src), sender), check=True, timeout=seconds + 60)
        final = [json.loads(line) for line in sink.stdout][-1]
    finally:
        sink.kill()
        sink.wait()
        sink.stdout.close()
    assert final.get("done"), final
    return float(final["bytes"] * 8 / final["t"])


def longest_stall(samples: list[FlowSample]) -> float:
    """The longest run of a flow's samples without new bytes, in seconds."""
    longest, since, last_bytes, prev_t = 0.0, None, -1, 0.0
    for s in samples:
        if s.bytes == last_bytes:
            since = since if since is not None else prev_t
            longest = max(longest, s.t - since)
        else:
            since = None
        last_bytes, prev_t = s.bytes, s.t
    return longest


class Rsyncd:
    """``rsync --daemon`` in ``site``'s namespace on its service address, serving ``top``
    read-only as module ``bench``; answering before the constructor returns."""

    PORT = 8730

    def __init__(self, bench: Bench, site: str, top: Path, *, client_site: str) -> None:
        self.address = bench.ip(site)
        conf = bench.work / "rsyncd.conf"
        conf.write_text(
            f"use chroot = no\nnumeric ids = yes\n[bench]\n    path = {top}\n"
            "    read only = yes\n    uid = root\n    gid = root\n"
        )
        argv = [
            "rsync", "--daemon", "--no-detach", f"--config={conf}",
            f"--address={self.address}", f"--port={self.PORT}",
            f"--log-file={bench.work / 'rsyncd.log'}",
        ]  # fmt: skip
        self.process = subprocess.Popen(in_netns(bench.ns(site), argv), start_new_session=True)
        probe = in_netns(bench.ns(client_site), ["rsync", f"rsync://{self.address}:{self.PORT}/"])

        def answers() -> bool:
            return subprocess.run(probe, capture_output=True, check=False).returncode == 0

        try:
            wait(answers, 30, "rsync --daemon")
        except BaseException:
            self.close()
            raise

    def url(self, path: str) -> str:
        return f"rsync://{self.address}:{self.PORT}/bench/{path}/"

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        self.process.wait(timeout=10)


_STATS = re.compile(
    r"^(Literal data|Total bytes sent|Total bytes received"
    r"|Number of regular files transferred): ([\d,]+)",
    re.MULTILINE,
)


@dataclass
class RsyncRun:
    """One ``rsync`` run: its times, whether it was killed, its ``--stats``."""

    began: float
    ended: float
    killed: bool
    stats: dict[str, int]

    @property
    def wall_s(self) -> float:
        return self.ended - self.began

    @property
    def wire(self) -> int:
        """What rsync counts on its connection, both ways."""
        return self.stats.get("Total bytes sent", 0) + self.stats.get("Total bytes received", 0)


def rsync_pull(
    bench: Bench,
    site: str,
    url: str,
    dest: Path,
    *,
    timeout: float = 1800,
    kill_when: Callable[[], bool] | None = None,
) -> RsyncRun:
    """``rsync -a --stats URL DEST/`` in ``site``'s namespace; SIGKILLed (its whole process
    group, as a power failure would) once ``kill_when()`` is true."""
    dest.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    process = subprocess.Popen(
        in_netns(bench.ns(site), ["rsync", "-a", "--stats", url, f"{dest}/"]),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    killed = False
    while process.poll() is None:
        if kill_when is not None and kill_when():
            os.killpg(process.pid, signal.SIGKILL)
            killed = True
            break
        if time.monotonic() - began > timeout:
            os.killpg(process.pid, signal.SIGKILL)
            raise TimeoutError(f"rsync {url} not done within {timeout:.0f} s")
        time.sleep(0.05)
    out, err = process.communicate()
    ended = time.monotonic()
    if not killed and process.returncode != 0:
        raise RuntimeError(f"rsync {url} ended {process.returncode}: {err.strip()}")
    stats = {k: int(v.replace(",", "")) for k, v in _STATS.findall(out)}
    return RsyncRun(began, ended, killed, stats)
