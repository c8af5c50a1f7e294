"""Failover of the control plane: from the leader's SIGKILL to the new leader's first pass.

Real processes on loopback: PostgreSQL (a database of this run's own in the project's
cluster, created here and dropped at the end), two ``onecluster server`` replicas over it
(each in a session of its own, with its own ``--state-dir`` and the default
``--leader-lease`` of 2 s) and three agents, one per site of ``three-site.yaml`` (local
backend, ``--server A,B``).  Each round:

1. asks ``GET /api/v1/cluster/leader`` which replica leads, and SIGKILLs that one's process
   group (at a random moment of its half-second renewal cycle);
2. at once submits a one-GPU job to the survivor (every replica takes submissions), whose
   command writes the time it started to a file;
3. polls the survivor's ``/healthz`` every 10 ms and the job every 50 ms until the job's
   command has run, and reads from the events the new term's ``leader_elected``.

Times, all from the kill and on one host clock:

- *healthz leader*: the survivor's ``/healthz`` first says ``role: leader``;
- *elected*: the ``leader_elected`` event of the new term (stamped in the takeover
  transaction by the new leader);
- *first pass*: the job's ``started_at`` — the new leader's first reconcile pass places it,
  since it was queued before the takeover (a new leader reads the queue afresh); the script
  checks that it came less than a pass interval (0.5 s) after *elected*, i.e. that it was the
  first pass, and says so per round;
- *job running*: the job's command started at its site's agent (the agent learns of the
  placement at its next sync: its heartbeat, or its backoff after syncs that failed during
  the election).

Then the killed replica is started again (same state folder and port) and the next round
waits until it answers as a follower.  Prints one JSON line per round and a summary
(median and worst of each)::

    .venv/bin/python benchmarks/bench_failover.py --kills 10

The PostgreSQL cluster: ``--pg-url``, else ``$ONECLUSTER_TEST_PG_URL``, else
``scripts/postgres.sh url``.  Goal: first pass < 3 s median; anchors: a Kubernetes Lease
(15 s) and Slurm's ``SlurmctldTimeout`` (120 s).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import signal
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

import httpx
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from cli_procs import free_port, spawn_cli
from onecluster.client import Client
from onecluster.schema import JobSubmit, TokenCreate

ROOT = Path(__file__).resolve().parents[1]
FABRIC = ROOT / "examples" / "fabrics" / "three-site.yaml"
SITES = {"shanghai": "H800", "singapore": "H100", "tokyo": "H100"}
LEADER_LEASE_S = 2.0  # the server's default; the script does not set it
PASS_INTERVAL_S = 0.5  # ServerConfig.reconcile_interval_s
ANCHORS_S = {"kubernetes_lease": 15.0, "slurmctld_timeout": 120.0}
GOAL_S = 3.0


def _wait_until(what: str, check: Callable[[], bool], timeout: float, every: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f} s waiting until {what}")
        time.sleep(every)


def pg_cluster_url(given: str | None) -> str:
    if given:
        return given
    if os.environ.get("ONECLUSTER_TEST_PG_URL"):
        return os.environ["ONECLUSTER_TEST_PG_URL"]
    out = subprocess.run(
        [str(ROOT / "scripts" / "postgres.sh"), "url"], capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


@contextmanager
def own_database(cluster_url: str, prefix: str = "oc_bench_failover") -> Iterator[str]:
    """A fresh database in the cluster of ``cluster_url``, dropped afterwards (other tests
    empty the default one)."""
    name = f"{prefix}_{secrets.token_hex(4)}"
    engine = create_engine(cluster_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(cluster_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with engine.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        engine.dispose()


class Processes:
    """The replicas and agents, each a child in a session of its own, logging to a file."""

    def __init__(self, tmp: Path, db_url: str) -> None:
        self.tmp = tmp
        self.db_url = db_url
        self.urls = {name: f"http://127.0.0.1:{free_port()}" for name in ("a", "b")}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.procs[name] = spawn_cli(self.tmp / f"{name}.log", argv, env)

    def start_replica(self, name: str, *, log_level: str = "info") -> None:
        url = self.urls[name]
        argv = ["--state-dir", str(self.tmp / f"state-{name}"), "server", "--fabric", str(FABRIC)]
        argv += ["--db", self.db_url, "--port", url.rsplit(":", 1)[1], "--advertise-url", url]
        argv += ["--log-level", log_level]
        self._spawn(name, argv)
        _wait_until(f"replica {name} answers", lambda: self.health(name) is not None, 60)

    def start_agent(self, site: str, token: str) -> None:
        servers = ",".join(self.urls.values())
        argv = ["--server", servers, "agent", "--site", site, "--backend", "local"]
        argv += ["--fabric", str(FABRIC), "--work-dir", str(self.tmp / f"work-{site}")]
        argv += ["--stop-grace", "2"]
        self._spawn(f"agent-{site}", argv, {**os.environ, "ONECLUSTER_TOKEN": token})

    def health(self, name: str) -> dict[str, object] | None:
        """The replica's ``/healthz``, or None while it does not answer."""
        proc = self.procs[name]
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited ({proc.returncode}):\n{self.log_tail(name)}")
        try:
            r = httpx.get(f"{self.urls[name]}/healthz", timeout=1.0)
        except httpx.TransportError:
            return None
        return dict(r.json()) if r.status_code == 200 else None

    def kill(self, name: str) -> float:
        """SIGKILL the process group of ``name``; the time of the kill."""
        proc = self.procs[name]
        at = time.time()
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        return at

    def log_tail(self, name: str, chars: int = 3000) -> str:
        path = self.tmp / f"{name}.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def stop_all(self) -> None:
        """SIGTERM every process group (agents first), SIGKILL what is left after 20 s."""
        order = sorted(self.procs, key=lambda n: not n.startswith("agent"))
        for name in order:
            if self.procs[name].poll() is None:
                os.killpg(self.procs[name].pid, signal.SIGTERM)
        for name in order:
            proc = self.procs[name]
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@dataclass(frozen=True, slots=True)
class Round:
    """One kill; times in seconds from it."""

    round: int
    killed: str
    term: int
    healthz_leader_s: float
    elected_s: float
    first_pass_s: float
    job_running_s: float
    first_pass_after_elected_s: float

    @property
    def was_first_pass(self) -> bool:
        return self.first_pass_after_elected_s < PASS_INTERVAL_S


def one_round(n: int, procs: Processes, admin: Client, token: str, tmp: Path) -> Round:
    """Kill the leader, submit to the survivor, time what follows."""
    leader_url = admin.leader().leader
    killed = next(name for name, url in procs.urls.items() if url == leader_url)
    survivor = "b" if killed == "a" else "a"
    cursor = max((e.id for e in admin.events(limit=1)), default=0)
    marker = tmp / f"ran-{n}"
    job = JobSubmit(
        name=f"failover-{n}",
        team="llm",
        gpus=1,
        duration_s=60.0,
        command=["sh", "-c", f"date +%s.%N > {marker}"],
    )
    time.sleep(random.uniform(0.0, LEADER_LEASE_S / 4))  # any moment of the renewal cycle
    killed_at = procs.kill(killed)
    with Client(procs.urls[survivor], token) as at_survivor:
        job_id = at_survivor.submit(job).id
        healthz_at: float | None = None
        placed_at: float | None = None
        next_job_look = 0.0
        deadline = time.monotonic() + 60.0
        while healthz_at is None or placed_at is None or not marker.exists():
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"round {n}: no failover within 60 s (healthz {healthz_at}, placed "
                    f"{placed_at}, ran {marker.exists()})\n"
                    f"--- {survivor} ---\n{procs.log_tail(survivor)}"
                )
            if healthz_at is None:
                health = procs.health(survivor)
                if health is not None and health.get("role") == "leader":
                    healthz_at = time.time()
            if placed_at is None and time.monotonic() >= next_job_look:
                next_job_look = time.monotonic() + 0.05
                placed_at = at_survivor.job(job_id).started_at
            time.sleep(0.01)
        _wait_until("the job's command wrote its start", lambda: marker.read_text() != "", 10)
        ran_at = float(marker.read_text())
        elected = at_survivor.events(kind="leader_elected", after=cursor)
    if len(elected) != 1:
        raise RuntimeError(f"round {n}: {len(elected)} leader_elected events, not one: {elected}")
    health = procs.health(survivor) or {}
    return Round(
        round=n,
        killed=killed,
        term=int(str(health.get("term", 0))),
        healthz_leader_s=round(healthz_at - killed_at, 3),
        elected_s=round(elected[0].time - killed_at, 3),
        first_pass_s=round(placed_at - killed_at, 3),
        job_running_s=round(ran_at - killed_at, 3),
        first_pass_after_elected_s=round(placed_at - elected[0].time, 3),
    )


def _follows(procs: Processes, name: str, term: int) -> bool:
    """Replica ``name`` answers and has seen ``term`` (it follows the new leader)."""
    health = procs.health(name) or {}
    return health.get("term") == term and health.get("role") == "follower"


def _summary(rounds: list[Round]) -> dict[str, object]:
    out: dict[str, object] = {"benchmark": "failover", "kills": len(rounds)}
    for key in ("healthz_leader_s", "elected_s", "first_pass_s", "job_running_s"):
        values = [float(getattr(r, key)) for r in rounds]
        out[key] = {
            "median": round(statistics.median(values), 3),
            "worst": round(max(values), 3),
            "best": round(min(values), 3),
        }
    first = statistics.median(r.first_pass_s for r in rounds)
    out["first_pass_was_the_first_pass"] = sum(r.was_first_pass for r in rounds)
    out["goal_s"] = GOAL_S
    out["leader_lease_s"] = LEADER_LEASE_S
    out["median_first_pass_vs_anchor"] = {k: round(first / v, 3) for k, v in ANCHORS_S.items()}
    out["cpus"] = os.cpu_count()
    return out


def run(kills: int, cluster_url: str, keep_logs: Path | None) -> None:
    with (
        tempfile.TemporaryDirectory(prefix="oc-failover-") as tmpdir,
        own_database(cluster_url) as db_url,
    ):
        tmp = Path(tmpdir)
        procs = Processes(tmp, db_url)
        try:
            procs.start_replica("a")  # alone first: it creates the schema and the admin token
            token = (tmp / "state-a" / "admin.token").read_text().strip()
            procs.start_replica("b")
            with Client(list(procs.urls.values()), token) as admin:
                for site in SITES:
                    agent = admin.create_token(TokenCreate(role="agent", site=site)).token
                    procs.start_agent(site, agent)
                _wait_until(
                    "every site is up",
                    lambda: all(s.status == "up" for s in admin.sites()),
                    60,
                )
                rounds: list[Round] = []
                for n in range(1, kills + 1):
                    r = one_round(n, procs, admin, token, tmp)
                    rounds.append(r)
                    print(json.dumps({**asdict(r), "was_first_pass": r.was_first_pass}), flush=True)
                    procs.start_replica(r.killed)
                    _wait_until(
                        f"{r.killed} follows in term {r.term}",
                        partial(_follows, procs, r.killed, r.term),
                        30,
                    )
                    time.sleep(1.0)  # a couple of renewals with both replicas up
            print(json.dumps(_summary(rounds)), flush=True)
        finally:
            procs.stop_all()
            if keep_logs is not None:
                keep_logs.mkdir(parents=True, exist_ok=True)
                for log in tmp.glob("*.log"):
                    (keep_logs / log.name).write_bytes(log.read_bytes())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--pg-url", help="a URL of the PostgreSQL cluster to use")
    parser.add_argument("--keep-logs", type=Path, help="copy the processes' logs here")
    args = parser.parse_args()
    run(args.kills, pg_cluster_url(args.pg_url), args.keep_logs)


if __name__ == "__main__":
    main()
