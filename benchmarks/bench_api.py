"""API submissions per second over a real socket, with concurrent clients.

Starts ``onecluster server`` (uvicorn, one process, reconcile loop on) in a subprocess on a
free loopback port, then ``--procs`` client processes with ``--threads`` threads each submit
jobs for ``--seconds``.  Prints one JSON line per database::

    .venv/bin/python benchmarks/bench_api.py                     # SQLite
    .venv/bin/python benchmarks/bench_api.py --pg-url postgresql+psycopg://...   # + PostgreSQL

``ONECLUSTER_TEST_PG_URL`` is used when ``--pg-url`` is not given.  The PostgreSQL database
is emptied first.  Targets: ≥ 500/s on SQLite, ≥ 2000/s on PostgreSQL.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

FABRIC = Path(__file__).resolve().parents[1] / "examples" / "fabrics" / "three-site.yaml"
JOB = {"team": "llm", "gpus": 8, "duration_s": 600.0, "gpu_types": ["H800"], "command": ["true"]}


def _serve(fabric: str, state_dir: str, db_url: str | None, port: int, interval: float) -> None:
    from onecluster.fabric import load_fabric
    from onecluster.server import ServerConfig, serve

    config = ServerConfig(
        fabric=load_fabric(fabric),
        state_dir=Path(state_dir),
        db_url=db_url,
        port=port,
        reconcile_interval_s=interval,
        log_level="warning",
    )
    serve(config)


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


def _client_proc(url: str, token: str, threads: int, seconds: float, out: mp.Queue) -> None:  # type: ignore[type-arg]
    counts = [0] * threads
    errors = [0] * threads
    latencies: list[list[float]] = [[] for _ in range(threads)]
    stop_at = time.monotonic() + seconds

    def worker(i: int) -> None:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as c:
            while time.monotonic() < stop_at:
                began = time.perf_counter()
                r = c.post("/api/v1/jobs", json=JOB)
                latencies[i].append(time.perf_counter() - began)
                if r.status_code == 201:
                    counts[i] += 1
                else:
                    errors[i] += 1

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    out.put((sum(counts), sum(errors), [x for lat in latencies for x in lat]))


def _reset_postgres(url: str) -> None:
    from sqlalchemy import text

    from onecluster.store import make_engine
    from onecluster.store._tables import Base

    engine = make_engine(url)
    with engine.begin() as conn:
        Base.metadata.drop_all(conn)
        conn.execute(text("DROP TABLE IF EXISTS alembic_version"))
    engine.dispose()


def bench(
    db: str, db_url: str | None, *, procs: int, threads: int, seconds: float, interval: float
) -> dict[str, object]:
    """Run one measurement and return its JSON record."""
    if db_url is not None and db_url.startswith("postgresql"):
        _reset_postgres(db_url)
    with tempfile.TemporaryDirectory(prefix="oc-bench-") as state:
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        code = (
            "import sys; sys.path.insert(0, sys.argv[1]); import bench_api; "
            "bench_api._serve(sys.argv[2], sys.argv[3], sys.argv[4] or None, int(sys.argv[5]), "
            "float(sys.argv[6]))"
        )
        server = subprocess.Popen(
            [
                sys.executable,
                "-c",
                code,
                str(Path(__file__).parent),
                str(FABRIC),
                state,
                db_url or "",
                str(port),
                str(interval),
            ],
        )
        try:
            _wait_up(url, server)
            token = (Path(state) / "admin.token").read_text().strip()
            queue: mp.Queue = mp.Queue()  # type: ignore[type-arg]
            workers = [
                mp.Process(target=_client_proc, args=(url, token, threads, seconds, queue))
                for _ in range(procs)
            ]
            began = time.perf_counter()
            for w in workers:
                w.start()
            results = [queue.get() for _ in workers]
            elapsed = time.perf_counter() - began
            for w in workers:
                w.join()
        finally:
            server.terminate()
            server.wait(timeout=30)
    ok = sum(r[0] for r in results)
    errors = sum(r[1] for r in results)
    lat = sorted(x for r in results for x in r[2])
    target = 500 if db == "sqlite" else 2000
    return {
        "benchmark": "api_submit",
        "db": db,
        "clients": procs * threads,
        "seconds": round(elapsed, 2),
        "submitted": ok,
        "errors": errors,
        "per_s": round(ok / elapsed, 1),
        "p50_ms": round(lat[len(lat) // 2] * 1000, 2) if lat else None,
        "p99_ms": round(lat[int(len(lat) * 0.99)] * 1000, 2) if lat else None,
        "target_per_s": target,
        "reconcile_interval_s": interval,
        "cpus": os.cpu_count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg-url", default=os.environ.get("ONECLUSTER_TEST_PG_URL"))
    parser.add_argument("--procs", type=int, default=2, help="client processes")
    parser.add_argument("--threads", type=int, default=8, help="threads per client process")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument(
        "--reconcile-interval", type=float, default=0.5, help="the server's reconcile_interval_s"
    )
    parser.add_argument("--only", choices=["sqlite", "postgres"])
    args = parser.parse_args()
    kw = {
        "procs": args.procs,
        "threads": args.threads,
        "seconds": args.seconds,
        "interval": args.reconcile_interval,
    }
    if args.only in (None, "sqlite"):
        print(json.dumps(bench("sqlite", None, **kw)), flush=True)
    if args.only in (None, "postgres") and args.pg_url:
        print(json.dumps(bench("postgres", args.pg_url, **kw)), flush=True)


if __name__ == "__main__":
    main()
