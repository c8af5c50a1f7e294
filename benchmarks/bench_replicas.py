"""Submissions per second on PostgreSQL with one and two server replicas, in one run.

For each configuration — one ``onecluster server`` alone, then two replicas over one
database (one leads and reconciles, both take submissions) — on a fresh database of this run's
own in the project's PostgreSQL cluster, ``wrk`` (two threads, 16 connections) drives:

- ``GET /healthz`` — the floor of the HTTP stack — against replica A only (*floor*), and,
  with two replicas, spread over both (*floor over 2*);
- ``POST /api/v1/jobs`` (the job of ``bench_api.py``) against A only, or with two replicas
  spread over both: each wrk thread keeps its 8 connections to one replica.

The load generator is the same in both configurations; only where its second thread sends
changes.  Every submission must be answered 201, and every answered one must be in the
database afterwards (the count read back may exceed wrk's by the requests in flight when
wrk stopped, at most one per connection).  CPU seconds of each part (the servers, every
``postgres`` process, wrk) are read from ``/proc`` around each measurement: on the project's
2-core VM all three share the same two cores.  The configurations alternate ``--repeat``
times; prints one JSON line per measurement and a summary (medians; ratios are to the floor
of the same repetition)::

    .venv/bin/python benchmarks/bench_replicas.py --seconds 10 --repeat 3

The PostgreSQL cluster: ``--pg-url``, else ``$ONECLUSTER_TEST_PG_URL``, else
``scripts/postgres.sh url``.  Goal: 2,000 submissions/s, or ≥ 0.3 × the floor.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx

from bench_api import JOB
from bench_failover import Processes, own_database, pg_cluster_url

CONNECTIONS = 16  # as bench_api.py
THREADS = 2
GOAL_PER_S = 2000.0
GOAL_RATIO = 0.3
TICK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, slots=True)
class Load:
    """One wrk run: rate, mean latency, requests answered, and CPU seconds per part."""

    per_s: float
    mean_latency_ms: float
    answered: int
    cpu_servers_s: float
    cpu_postgres_s: float
    cpu_wrk_s: float
    #: Busy CPU of the machine less the three above: other work on the same machine.
    cpu_other_s: float
    #: CPU the hypervisor gave to other guests while this one wanted it.
    cpu_steal_s: float
    seconds: float


def _cpu_of(pids: list[int]) -> dict[int, float]:
    """utime + stime of each of ``pids`` (every thread), in seconds; a pid gone is left out."""
    found = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        found[pid] = (int(fields[11]) + int(fields[12])) / TICK
    return found


def _postgres_pids() -> list[int]:
    """Every process named ``postgres`` now (the cluster's backends and helpers)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == "postgres":
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def _machine() -> tuple[float, float]:
    """(busy, steal) CPU seconds of the whole machine since boot, from ``/proc/stat``."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = (
        int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]
    )
    return (user + nice + system + irq + softirq) / TICK, steal / TICK


def _spent(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds between two readings; a process born in between counts from zero (a
    backend that exits in between is lost: the servers keep their connections pooled)."""
    return round(sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items()), 2)


def _lua(ports: list[int], token: str | None) -> str:
    """A wrk script: thread i sends to ``ports[i mod len]``; a POST of JOB with ``token``."""
    script = [
        f"local ports = {{{', '.join(str(p) for p in ports)}}}",
        "local n = 0",
        "function setup(thread)",
        "  n = n + 1",
        '  thread.addr = wrk.lookup("127.0.0.1", tostring(ports[(n - 1) % #ports + 1]))[1]',
        "end",
        "function done(summary, latency, requests)",
        '  io.write(string.format("status_errors %d\\n", summary.errors.status))',
        '  io.write(string.format("timeouts %d\\n", summary.errors.timeout))',
        "end",
    ]
    if token is not None:
        script += [
            'wrk.method = "POST"',
            f"wrk.body = '{json.dumps(JOB)}'",
            'wrk.headers["Content-Type"] = "application/json"',
            f'wrk.headers["Authorization"] = "Bearer {token}"',
        ]
    return "\n".join(script) + "\n"


def wrk(
    ports: list[int],
    path: str,
    token: str | None,
    seconds: float,
    servers: list[int],
    *,
    connections: int = CONNECTIONS,
) -> Load:
    """Drive ``path`` at ``ports`` for ``seconds`` over ``connections``; refuse any non-2xx
    answer or timeout.  ``servers``: the server pids whose CPU is counted."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as lua:
        lua.write(_lua(ports, token))
    url = f"http://127.0.0.1:{ports[0]}{path}"
    argv = ["wrk", f"-t{THREADS}", f"-c{connections}", f"-d{max(round(seconds), 1)}s"]
    before = (
        _cpu_of(servers),
        _cpu_of(_postgres_pids()),
        resource.getrusage(resource.RUSAGE_CHILDREN),
        _machine(),
    )
    began = time.monotonic()
    try:
        out = subprocess.run(
            [*argv, "-s", lua.name, url], capture_output=True, text=True, check=True
        ).stdout
    finally:
        Path(lua.name).unlink()
    wall = time.monotonic() - began
    machine = _machine()
    servers_cpu = _spent(before[0], _cpu_of(servers))
    postgres_cpu = _spent(before[1], _cpu_of(_postgres_pids()))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    wrk_cpu = (after.ru_utime + after.ru_stime) - (before[2].ru_utime + before[2].ru_stime)
    busy = machine[0] - before[3][0]
    failed = {k: int(v) for k, v in re.findall(r"^(status_errors|timeouts) (\d+)$", out, re.M)}
    if any(failed.values()):
        raise RuntimeError(f"wrk saw failures {failed}:\n{out}")
    lat = re.search(r"Latency\s+([\d.]+)(us|ms|s)\b", out)
    scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}
    return Load(
        per_s=float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),  # type: ignore[union-attr]
        mean_latency_ms=float(lat.group(1)) * scale[lat.group(2)] if lat else float("nan"),
        answered=int(re.search(r"(\d+) requests in", out).group(1)),  # type: ignore[union-attr]
        cpu_servers_s=servers_cpu,
        cpu_postgres_s=postgres_cpu,
        cpu_wrk_s=round(wrk_cpu, 2),
        cpu_other_s=round(max(0.0, busy - servers_cpu - postgres_cpu - wrk_cpu), 2),
        cpu_steal_s=round(machine[1] - before[3][1], 2),
        seconds=round(wall, 2),
    )


def configuration(
    replicas: int, cluster_url: str, seconds: float, rep: int, connections: int
) -> dict[str, object]:
    """Start ``replicas`` servers on a fresh database, measure, stop them."""
    with (
        tempfile.TemporaryDirectory(prefix="oc-replicas-") as tmpdir,
        own_database(cluster_url, prefix="oc_bench_replicas") as db_url,
    ):
        procs = Processes(Path(tmpdir), db_url)
        names = ["a", "b"][:replicas]
        try:
            for name in names:  # A alone first: it creates the schema and the admin token
                procs.start_replica(name, log_level="warning")
            token = (Path(tmpdir) / "state-a" / "admin.token").read_text().strip()
            ports = [int(procs.urls[n].rsplit(":", 1)[1]) for n in names]
            pids = [procs.procs[n].pid for n in names]
            record: dict[str, object] = {
                "replicas": replicas,
                "repetition": rep,
                "connections": connections,
            }
            floor = wrk(ports[:1], "/healthz", None, seconds / 2, pids, connections=connections)
            record["floor"] = asdict(floor)
            if replicas > 1:
                record["floor_spread"] = asdict(
                    wrk(ports, "/healthz", None, seconds / 2, pids, connections=connections)
                )
            submit = wrk(ports, "/api/v1/jobs", token, seconds, pids, connections=connections)
            record["submit"] = asdict(submit)
            time.sleep(1.0)  # let the last group commits land
            stats = httpx.get(
                f"{procs.urls['a']}/api/v1/stats",
                headers={"Authorization": f"Bearer {token}"},
                timeout=30,
            ).json()
            stored = int(stats["pending"]) + int(stats["running"])
            record["jobs_stored"] = stored
            record["answered_but_missing"] = max(0, submit.answered - stored)
            record["ratio_to_floor"] = round(submit.per_s / floor.per_s, 3)
            return record
        finally:
            procs.stop_all()


def _summary(records: list[dict[str, object]]) -> dict[str, object]:
    def med(replicas: int, *path: str) -> float:
        values = []
        for r in records:
            if r["replicas"] != replicas:
                continue
            v: object = r
            for key in path:
                v = v[key]  # type: ignore[index]
            values.append(float(v))  # type: ignore[arg-type]
        return round(statistics.median(values), 3)

    one, two = med(1, "submit", "per_s"), med(2, "submit", "per_s")
    floor = med(1, "floor", "per_s")
    return {
        "benchmark": "replicas_submit",
        "repetitions": sum(r["replicas"] == 1 for r in records),
        "floor_per_s": floor,
        "floor_spread_over_2_per_s": med(2, "floor_spread", "per_s"),
        "submit_1_replica_per_s": one,
        "submit_2_replicas_per_s": two,
        "ratio_1_replica_to_floor": med(1, "ratio_to_floor"),
        "ratio_2_replicas_to_floor": med(2, "ratio_to_floor"),
        "two_over_one": round(two / one, 3),
        "lost": sum(int(str(r["answered_but_missing"])) for r in records),
        "goal": {"per_s": GOAL_PER_S, "ratio_to_floor": GOAL_RATIO},
        "cpus": os.cpu_count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg-url", help="a URL of the PostgreSQL cluster to use")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--connections", type=int, default=CONNECTIONS)
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        parser.error("wrk not found (apt-get install wrk): this benchmark needs it")
    cluster = pg_cluster_url(args.pg_url)
    records = []
    for rep in range(1, args.repeat + 1):
        # Alternate the order, so that neither configuration always runs first.
        for replicas in (1, 2) if rep % 2 else (2, 1):
            record = configuration(replicas, cluster, args.seconds, rep, args.connections)
            records.append(record)
            print(json.dumps(record), flush=True)
    print(json.dumps(_summary(records)), flush=True)


if __name__ == "__main__":
    main()
