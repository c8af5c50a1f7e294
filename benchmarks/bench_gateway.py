"""The LLM gateway's added latency, time to first token, throughput and CPU per request.

In one run, against one **fake** OpenAI-compatible upstream (``onecluster gateway
fake-upstream``, canned answers), three targets:

* ``direct``  — the fake upstream itself (the floor);
* ``bare``    — a bare aiohttp pass-through (key swap only, no quota, no ledger): the
  baseline of what any Python proxy on this machine costs (``--bare-proxy`` mode of this file);
* ``bare-httpx`` — the same with httpx's async client upstream (why the gateway uses aiohttp);
* ``gateway`` — ``onecluster gateway serve`` with team keys, the four tiers, the shared
  SQLite counters, the ledger and the audit all on.

Latency: sequential keep-alive calls, rounds interleaved across the targets, median of the
round medians (robust to a noisy shared box); added = target − direct.  Streams: time to the
first content chunk and to the end.  Throughput: ``hey`` (Go; ``apt-get install hey``) for
``--seconds`` at 16 and 64 concurrent clients.  CPU per request: the server process's
utime + stime (``/proc/<pid>/stat``) over the calls it served.  Every gateway call of the run
must be in its ledger, exactly once.  Last, the store alone: one reserve and one settle per
transaction, as a call at a time costs them::

    .venv/bin/python benchmarks/bench_gateway.py            # ~2 minutes
    .venv/bin/python benchmarks/bench_gateway.py --quick    # ~30 s, fewer rounds
    .venv/bin/python benchmarks/bench_gateway.py --db "$(scripts/postgres.sh start)"
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
TOKENIZERS = ROOT.parent / "shared" / "data" / "tokenizers"
CLI = [sys.executable, "-m", "onecluster.cli"]
BODY = b'{"model":"gpt-fake","messages":[{"role":"user","content":"say hello to the whole team"}]}'
STREAM_BODY = BODY[:-1] + b',"stream":true}'
PROVIDER_KEY = "sk-bench-provider-key"

CONFIG = """
version: 1
egress: [{name: local, site: bench}]
upstreams: [{name: fake, base_url: "UPSTREAM/v1", egress: local}]
models:
  - {name: gpt-fake, region: us, max_output_tokens: 64, input_price: 1.0, output_price: 2.0,
     deployments: [{upstream: fake, model: fake-gpt}]}
tiers:
  - {name: t1, rpm: 100000000, tpm: 100000000000, daily_spend: 1000000, monthly_spend: 1000000,
     models: ["*"]}
  - {name: t2, rpm: 10, tpm: 1000, daily_spend: 1, monthly_spend: 10, models: ["*"]}
  - {name: t3, rpm: 10, tpm: 1000, daily_spend: 1, monthly_spend: 10, models: ["*"]}
  - {name: t4, rpm: 10, tpm: 1000, daily_spend: 1, monthly_spend: 10, models: ["*"]}
teams: [{name: bench, tier: t1}]
"""


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Servers:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.urls: dict[str, str] = {}

    def start(self, name: str, argv: list[str]) -> None:
        ready = self.base / f"{name}.port"
        log = (self.base / f"{name}.log").open("wb")
        proc = subprocess.Popen(
            [*argv, "--port", "0", "--ready-file", str(ready)], stdout=log, stderr=subprocess.STDOUT
        )
        self.procs[name] = proc
        deadline = time.monotonic() + 60
        while not (ready.exists() and ready.read_text().strip()):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not start; see {self.base / name}.log")
            time.sleep(0.05)
        self.urls[name] = f"http://127.0.0.1:{ready.read_text().strip()}"

    def stop(self) -> None:
        for proc in self.procs.values():
            proc.terminate()
        for proc in self.procs.values():
            proc.wait(10)


def _setup(base: Path, db: str | None) -> tuple[Servers, str]:
    servers = Servers(base)
    servers.start("direct", [*CLI, "gateway", "fake-upstream"])
    config = base / "gateway.yaml"
    config.write_text(CONFIG.replace("UPSTREAM", servers.urls["direct"]))
    state = ["--state-dir", str(base)]
    where = ["--db", db] if db else []
    subprocess.run(
        [*CLI, *state, "gateway", "provider-key", "set", "fake", "--config", str(config), *where],
        input=PROVIDER_KEY + "\n",
        text=True,
        check=True,
        capture_output=True,
    )
    key = subprocess.run(
        [
            *CLI,
            *state,
            "gateway",
            "keys",
            "issue",
            "--config",
            str(config),
            "--team",
            "bench",
            *where,
        ],
        text=True,
        check=True,
        capture_output=True,
    ).stdout.strip()
    tokenizers = ["--tokenizers", str(TOKENIZERS)] if TOKENIZERS.is_dir() else []
    servers.start(
        "gateway",
        [*CLI, *state, "gateway", "serve", "--config", str(config), *tokenizers, *where],
    )
    for name, client in (("bare", "aiohttp"), ("bare-httpx", "httpx")):
        servers.start(
            name,
            [
                sys.executable,
                __file__,
                "--bare-proxy",
                "--upstream",
                servers.urls["direct"],
                "--client",
                client,
            ],
        )
    return servers, key


def _latency(
    servers: Servers, key: str, rounds: int, n: int, *, stream: bool
) -> dict[str, dict[str, float]]:
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    body = STREAM_BODY if stream else BODY
    per: dict[str, dict[str, list[float]]] = {
        t: {"total": [], "ttft": [], "medians": []} for t in servers.urls
    }
    cpu: dict[str, float] = dict.fromkeys(servers.urls, 0.0)
    clients = {t: httpx.Client(base_url=u) for t, u in servers.urls.items()}
    for client in clients.values():  # warm up every path
        for _ in range(30):
            _one(client, body, headers, stream=stream)
    for _ in range(rounds):
        for t, client in clients.items():
            before = _cpu(servers.procs[t].pid)
            lat = []
            for _ in range(n):
                total, ttft = _one(client, body, headers, stream=stream)
                lat.append(total)
                per[t]["total"].append(total)
                per[t]["ttft"].append(ttft)
            cpu[t] += _cpu(servers.procs[t].pid) - before
            per[t]["medians"].append(statistics.median(lat))
    out = {}
    for t, d in per.items():
        totals = sorted(d["total"])
        ttfts = sorted(d["ttft"])
        out[t] = {
            "p50": statistics.median(d["medians"]) * 1e3,
            "p99": totals[int(len(totals) * 0.99) - 1] * 1e3,
            "ttft_p50": statistics.median(ttfts) * 1e3,
            "ttft_p99": ttfts[int(len(ttfts) * 0.99) - 1] * 1e3,
            "cpu_ms": cpu[t] / (rounds * n) * 1e3,
        }
    for client in clients.values():
        client.close()
    return out


def _one(
    client: httpx.Client, body: bytes, headers: dict[str, str], *, stream: bool
) -> tuple[float, float]:
    start = time.perf_counter()
    if not stream:
        reply = client.post("/v1/chat/completions", content=body, headers=headers)
        reply.raise_for_status()
        done = time.perf_counter() - start
        return done, done
    first = 0.0
    with client.stream("POST", "/v1/chat/completions", content=body, headers=headers) as reply:
        reply.raise_for_status()
        for line in reply.iter_lines():
            if not first and '"content":"hello' in line:
                first = time.perf_counter() - start
    return time.perf_counter() - start, first


_HEY_RPS = re.compile(r"Requests/sec:\s+([\d.]+)")
_HEY_PCT = re.compile(r"(\d+)%% in ([\d.]+) secs".replace("%%", "%"))
_HEY_CODES = re.compile(r"\[(\d{3})\]\s+(\d+) responses")


def _throughput(
    servers: Servers, key: str, concurrency: int, seconds: float
) -> dict[str, dict[str, float]]:
    out = {}
    for t, url in servers.urls.items():
        before = _cpu(servers.procs[t].pid)
        done = subprocess.run(
            [
                "hey",
                "-z",
                f"{seconds}s",
                "-c",
                str(concurrency),
                "-m",
                "POST",
                "-T",
                "application/json",
                "-H",
                f"Authorization: Bearer {key}",
                "-d",
                BODY.decode(),
                f"{url}/v1/chat/completions",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        cpu = _cpu(servers.procs[t].pid) - before
        codes = {int(c): int(n) for c, n in _HEY_CODES.findall(done.stdout)}
        pct = {int(p): float(s) for p, s in _HEY_PCT.findall(done.stdout)}
        ok = codes.get(200, 0)
        out[t] = {
            "rps": float(_HEY_RPS.search(done.stdout).group(1)),  # type: ignore[union-attr]
            "p50": pct.get(50, 0) * 1e3,
            "p99": pct.get(99, 0) * 1e3,
            "non_200": sum(n for c, n in codes.items() if c != 200),
            "ok": ok,
            "cpu_ms": cpu / max(ok, 1) * 1e3,
        }
    return out


def _ledger_rows(base: Path, db: str | None) -> int:
    from onecluster.gateway import GatewayStore

    store = GatewayStore(db or base / "gateway.db")
    try:
        return len(store.ledger_rows())
    finally:
        store.close()


def _empty_postgres(url: str) -> str:
    """A fresh schema ``gateway_bench`` in ``url``'s database, and the URL that uses it."""
    import psycopg

    plain = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS gateway_bench CASCADE")
        conn.execute("CREATE SCHEMA gateway_bench")
    return plain + ("&" if "?" in plain else "?") + "options=-csearch_path%3Dgateway_bench"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds, shorter loads")
    parser.add_argument(
        "--db", help="a postgresql:// URL for the gateway (in a fresh schema) instead of SQLite"
    )
    parser.add_argument("--bare-proxy", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--upstream", help=argparse.SUPPRESS)
    parser.add_argument("--client", default="aiohttp", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--ready-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare_proxy:
        _bare_proxy(args.upstream, args.port, args.ready_file, args.client)
        return
    if shutil.which("hey") is None and os.geteuid() == 0:
        subprocess.run(
            ["apt-get", "install", "-y", "-q", "hey"],
            check=False,
            capture_output=True,
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        )
    if shutil.which("hey") is None:
        sys.exit("hey is not installed: apt-get install hey")
    rounds, n, seconds = (3, 100, 4.0) if args.quick else (7, 200, 10.0)
    base = Path(tempfile.mkdtemp(prefix="bench-gateway-"))
    db = _empty_postgres(args.db) if args.db else None
    servers, key = _setup(base, db)
    try:
        plain = _latency(servers, key, rounds, n, stream=False)
        stream = _latency(servers, key, rounds, n // 2, stream=True)
        loads = {c: _throughput(servers, key, c, seconds) for c in (16, 64)}
    finally:
        servers.stop()
    served = sum(int(loads[c]["gateway"]["ok"]) for c in loads)
    calls = 30 * 2 + rounds * n + rounds * (n // 2) + served
    ledger = _ledger_rows(base, db)
    _report(plain, stream, loads, ledger=ledger, calls=calls, quick=args.quick)
    reserve, settle = _store_costs(db or base / "store-costs.db", 300 if args.quick else 3000)
    print(f"store, one operation a transaction: reserve {reserve:.0f} µs, settle {settle:.0f} µs")


def _row(*cells: object) -> None:
    print("| " + " | ".join(str(c) for c in cells) + " |")


def _report(
    plain: dict, stream: dict, loads: dict, *, ledger: int, calls: int, quick: bool
) -> None:
    d = plain["direct"]
    print(f"# bench_gateway {'--quick ' if quick else ''}({time.strftime('%Y-%m-%d')})\n")
    _row("non-stream, sequential", "p50 ms", "p99 ms", "added p50 ms", "CPU ms/req")
    _row(*["---"] * 5)
    for t, r in plain.items():
        added = r["p50"] - d["p50"]
        _row(t, f"{r['p50']:.3f}", f"{r['p99']:.3f}", f"{added:+.3f}", f"{r['cpu_ms']:.3f}")
    s = stream["direct"]
    print()
    _row(
        "stream (8 chunks), sequential",
        "TTFT p50 ms",
        "TTFT p99 ms",
        "added TTFT p50",
        "total p50 ms",
        "CPU ms/req",
    )
    _row(*["---"] * 6)
    for t, r in stream.items():
        added = r["ttft_p50"] - s["ttft_p50"]
        _row(
            t,
            f"{r['ttft_p50']:.3f}",
            f"{r['ttft_p99']:.3f}",
            f"{added:+.3f}",
            f"{r['p50']:.3f}",
            f"{r['cpu_ms']:.3f}",
        )
    for c, load in loads.items():
        print()
        _row(f"hey, {c} clients", "req/s", "p50 ms", "p99 ms", "non-200", "CPU ms/req")
        _row(*["---"] * 6)
        for t, r in load.items():
            _row(
                t,
                f"{r['rps']:.0f}",
                f"{r['p50']:.1f}",
                f"{r['p99']:.1f}",
                r["non_200"],
                f"{r['cpu_ms']:.3f}",
            )
    ratio16 = loads[16]["gateway"]["rps"] / loads[16]["bare"]["rps"]
    ratio64 = loads[64]["gateway"]["rps"] / loads[64]["bare"]["rps"]
    print(f"\ngateway/bare throughput: c=16 {ratio16:.2f}, c=64 {ratio64:.2f}")
    verdict = "exact" if ledger == calls else "MISMATCH"
    print(f"ledger rows {ledger} for {calls} gateway calls answered 200: {verdict}")


def _bare_proxy(upstream: str, port: int, ready_file: Path | None, client: str) -> None:
    """The baseline: a bare aiohttp server passing calls through a pooled client, nothing
    else.  ``client`` is ``aiohttp`` (what the gateway uses) or ``httpx`` (decision 33)."""
    import asyncio

    import aiohttp
    import uvloop
    from aiohttp import web

    headers = {"Authorization": f"Bearer {PROVIDER_KEY}", "Content-Type": "application/json"}
    target = f"{upstream}/v1/chat/completions"

    async def run() -> None:
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        pool = httpx.AsyncClient(limits=httpx.Limits(max_connections=None), timeout=30)

        async def stream_out(request: web.Request, chunks: object) -> web.StreamResponse:
            out = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await out.prepare(request)
            async for chunk in chunks:  # type: ignore[attr-defined]
                await out.write(chunk)
            await out.write_eof()
            return out

        async def via_aiohttp(request: web.Request) -> web.StreamResponse:
            body = await request.read()
            async with session.post(target, data=body, headers=headers) as reply:
                if b'"stream":true' not in body:
                    return web.Response(body=await reply.read(), content_type="application/json")
                return await stream_out(request, reply.content.iter_any())

        async def via_httpx(request: web.Request) -> web.StreamResponse:
            body = await request.read()
            if b'"stream":true' not in body:
                reply = await pool.post(target, content=body, headers=headers)
                return web.Response(body=reply.content, content_type="application/json")
            async with pool.stream("POST", target, content=body, headers=headers) as reply:
                return await stream_out(request, reply.aiter_raw())

        app = web.Application()
        app.router.add_post("/v1/chat/completions", via_httpx if client == "httpx" else via_aiohttp)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", port, backlog=1024)
        await site.start()
        if ready_file is not None:
            ready_file.write_text(f"{runner.addresses[0][1]}\n")  # noqa: ASYNC240  (once)
        await asyncio.Event().wait()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(run())


def _store_costs(db: str | Path, n: int) -> tuple[float, float]:
    """µs per reserve and per settle, one operation per transaction (a call at a time)."""
    from onecluster.gateway import CallRecord, GatewayStore
    from onecluster.gateway._quota import Ask, Limits
    from onecluster.gateway._store import ReserveOp, SettleOp

    store = GatewayStore(db)
    limits = Limits(rpm=10**9, tpm=10**12, daily=10**18, monthly=10**18)
    now = time.time()
    try:
        started = time.perf_counter()
        held = [
            store.apply([ReserveOp(f"bench-{i}", (("team:store", limits),), Ask(100, 1_000), now)])[
                0
            ]
            for i in range(n)
        ]
        reserved = time.perf_counter()
        for i, reservation in enumerate(held):
            record = CallRecord(
                request_id=f"bench-{i}",
                at=now,
                team="store",
                key_id="k",
                model="m",
                endpoint="chat/completions",
                stream=False,
                http_status=200,
                outcome="ok",
                attempts=1,
                prompt_tokens=9,
                completion_tokens=8,
                cost=25_000,
            )
            store.apply([SettleOp(record, reservation)])  # type: ignore[arg-type]
        settled = time.perf_counter()
    finally:
        store.close()
    return (reserved - started) / n * 1e6, (settled - reserved) / n * 1e6


if __name__ == "__main__":
    main()
