"""API submissions per second over a real socket, against SQLite and PostgreSQL.

Starts ``onecluster server`` (one uvicorn process, reconcile loop on) on a free loopback
port and drives ``POST /api/v1/jobs`` with concurrent connections for ``--seconds``.  The
load generator is ``wrk`` (C, one thread, so the 2-core machine's CPU goes to the server)
when installed (`apt-get install wrk`), otherwise Python httpx clients (which eat a core of
their own and understate the server).  In the same run, against the same server, it measures
``GET /healthz`` — the floor of the HTTP stack — so the submission rate can be read as a
ratio of what the stack itself can do on this machine.  Prints one JSON line per database::

    .venv/bin/python benchmarks/bench_api.py                          # SQLite
    .venv/bin/python benchmarks/bench_api.py --pg-url postgresql+psycopg://…   # + PostgreSQL

``ONECLUSTER_TEST_PG_URL`` is used when ``--pg-url`` is not given; that database is emptied
first.  Targets: ≥ 500/s on SQLite, ≥ 2,000/s on PostgreSQL.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
FABRIC = ROOT / "examples" / "fabrics" / "three-site.yaml"
JOB = {"team": "llm", "gpus": 8, "duration_s": 600.0, "gpu_types": ["H800"], "command": ["true"]}
ONECLUSTER = Path(sys.executable).with_name("onecluster")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_up(url: str, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the server exited during start-up")
        try:
            if httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError("the server did not come up")


def _reset_postgres(url: str) -> None:
    from sqlalchemy import text

    from onecluster.store import make_engine
    from onecluster.store._tables import Base

    engine = make_engine(url)
    with engine.begin() as conn:
        Base.metadata.drop_all(conn)
        conn.execute(text("DROP TABLE IF EXISTS alembic_version"))
    engine.dispose()


def _wrk(url: str, token: str | None, seconds: float, connections: int) -> tuple[float, float]:
    """(requests/s, mean latency ms) of POST /api/v1/jobs, or of GET url when no token."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as lua:
        if token is not None:
            body = json.dumps(JOB)
            lua.write(
                'wrk.method = "POST"\n'
                f"wrk.body = '{body}'\n"
                'wrk.headers["Content-Type"] = "application/json"\n'
                f'wrk.headers["Authorization"] = "Bearer {token}"\n'
                "done = function(summary, latency, requests)\n"
                '  io.write(string.format("errors %d\\n", summary.errors.status))\n'
                "end\n"
            )
    try:
        out = subprocess.run(
            ["wrk", "-t1", f"-c{connections}", f"-d{max(round(seconds), 1)}s", "-s", lua.name, url],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    finally:
        Path(lua.name).unlink()
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    lat = re.search(r"Latency\s+([\d.]+)(us|ms|s)", out)
    scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}
    mean_ms = float(lat.group(1)) * scale[lat.group(2)] if lat else float("nan")
    errors = re.search(r"errors (\d+)", out)
    if errors and int(errors.group(1)) > 0:
        raise RuntimeError(f"{errors.group(1)} requests failed:\n{out}")
    return rate, mean_ms


def _python_clients(url: str, token: str, seconds: float, connections: int) -> tuple[float, float]:
    counts = [0] * connections
    latency: list[float] = []
    stop_at = time.monotonic() + seconds

    def worker(i: int) -> None:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as c:
            while time.monotonic() < stop_at:
                began = time.perf_counter()
                r = c.post("/api/v1/jobs", json=JOB)
                latency.append(time.perf_counter() - began)
                if r.status_code != 201:
                    raise RuntimeError(f"submission failed: {r.status_code} {r.text}")
                counts[i] += 1

    began = time.perf_counter()
    pool = [threading.Thread(target=worker, args=(i,)) for i in range(connections)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return sum(counts) / (time.perf_counter() - began), 1000 * sum(latency) / max(len(latency), 1)


def bench(db: str, db_url: str | None, *, seconds: float, connections: int) -> dict[str, object]:
    """Run one measurement and return its JSON record."""
    if db_url is not None:
        _reset_postgres(db_url)
    use_wrk = shutil.which("wrk") is not None
    with tempfile.TemporaryDirectory(prefix="oc-bench-") as state:
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        cmd = [str(ONECLUSTER), "--state-dir", state, "server", "--fabric", str(FABRIC)]
        cmd += ["--port", str(port), "--log-level", "warning"]
        if db_url is not None:
            cmd += ["--db", db_url]
        server = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
        try:
            _wait_up(url, server)
            token = (Path(state) / "admin.token").read_text().strip()
            if use_wrk:
                floor, _ = _wrk(f"{url}/healthz", None, seconds / 2, connections)
                rate, mean_ms = _wrk(f"{url}/api/v1/jobs", token, seconds, connections)
            else:
                floor = float("nan")
                rate, mean_ms = _python_clients(url, token, seconds, connections)
            stored = httpx.get(
                f"{url}/api/v1/stats", headers={"Authorization": f"Bearer {token}"}
            ).json()["pending"]
        finally:
            server.terminate()
            server.wait(timeout=30)
    return {
        "benchmark": "api_submit",
        "db": db,
        "load_generator": "wrk" if use_wrk else "python-httpx",
        "connections": connections,
        "seconds": seconds,
        "per_s": round(rate, 1),
        "mean_latency_ms": round(mean_ms, 2),
        "healthz_per_s": round(floor, 1),
        "ratio_to_healthz": round(rate / floor, 3) if not math.isnan(floor) else None,
        "jobs_stored": stored,
        "target_per_s": 500 if db == "sqlite" else 2000,
        "cpus": os.cpu_count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg-url", default=os.environ.get("ONECLUSTER_TEST_PG_URL"))
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--only", choices=["sqlite", "postgres"])
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        print("wrk not found (apt-get install wrk); using Python clients", file=sys.stderr)
    kw = {"seconds": args.seconds, "connections": args.connections}
    if args.only in (None, "sqlite"):
        print(json.dumps(bench("sqlite", None, **kw)), flush=True)
    if args.only in (None, "postgres") and args.pg_url:
        print(json.dumps(bench("postgres", args.pg_url, **kw)), flush=True)


if __name__ == "__main__":
    main()
