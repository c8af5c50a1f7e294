"""An agent moves from one server replica to another and keeps its running job.

Two ``onecluster server`` processes — replicas A and B, each with its own state folder — share
one PostgreSQL database (a database of its own in the project's cluster, made for this test and
dropped after it).  The agent is given ``--server A,B``; a job runs through it; A is SIGKILLed.
The agent's next sync is refused by A's closed port and goes to B in the same call, so its
lease (kept in the database per site) is renewed without a gap: after more than a whole lease
the job still runs its first and only attempt, the same process, and B says so.

Real processes throughout: the two servers, the agent (local backend) and the job.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from onecluster.client import Client
from onecluster.process import alive
from onecluster.schema import JobSubmit, TokenCreate

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

ROOT = Path(__file__).resolve().parents[2]
FABRIC = str(ROOT / "examples" / "fabrics" / "three-site.yaml")
LEASE_S = 10.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait_until(
    what: str, check: Callable[[], bool], timeout: float, logs: Callable[[], str]
) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting until {what}\n{logs()}"
        time.sleep(0.2)


class Replicas:
    """Server replicas A and B on one database, and an agent, as child processes."""

    def __init__(self, tmp: Path, db_url: str) -> None:
        self.tmp = tmp
        self.db_url = db_url
        self.urls = {name: f"http://127.0.0.1:{_free_port()}" for name in ("a", "b")}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        with (self.tmp / f"{name}.log").open("ab") as log:
            self.procs[name] = subprocess.Popen(
                [sys.executable, "-m", "onecluster.cli", *argv],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )

    def start_server(self, name: str) -> None:
        port = self.urls[name].rsplit(":", 1)[1]
        argv = ["--state-dir", str(self.tmp / f"state-{name}"), "server", "--fabric", FABRIC]
        argv += ["--db", self.db_url, "--port", port, "--lease", str(LEASE_S)]
        self._spawn(name, argv, dict(os.environ))
        _wait_until(f"replica {name} answers", lambda: self._healthy(name), 60, self.logs)

    def _healthy(self, name: str) -> bool:
        assert self.procs[name].poll() is None, self.logs()
        try:
            return httpx.get(f"{self.urls[name]}/healthz", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    def start_agent(self, token: str) -> None:
        env = {**os.environ, "ONECLUSTER_TOKEN": token}
        argv = ["--server", f"{self.urls['a']},{self.urls['b']}", "agent", "--site", "shanghai"]
        argv += ["--backend", "local", "--fabric", FABRIC, "--work-dir", str(self.tmp / "work")]
        argv += ["--stop-grace", "2"]
        self._spawn("agent", argv, env)

    def kill(self, name: str) -> None:
        os.killpg(self.procs[name].pid, signal.SIGKILL)
        self.procs[name].wait(timeout=10)

    def log(self, name: str) -> str:
        path = self.tmp / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def logs(self) -> str:
        return "".join(f"--- {n} ---\n{self.log(n)[-3000:]}\n" for n in ("agent", "a", "b"))

    def stop(self) -> None:
        for proc in self.procs.values():  # the agent first: it was started after the servers
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@pytest.fixture
def replicas(tmp_path: Path, pg_database: str) -> Iterator[Replicas]:
    r = Replicas(tmp_path, pg_database)
    try:
        yield r
    finally:
        r.stop()


def test_an_agent_keeps_its_running_attempt_when_it_moves_to_another_replica(
    replicas: Replicas, tmp_path: Path
) -> None:
    a, b = replicas.urls["a"], replicas.urls["b"]
    replicas.start_server("a")  # first alone: it creates the schema
    admin_token = (tmp_path / "state-a" / "admin.token").read_text().strip()
    runs = tmp_path / "runs"
    with Client([a, b], admin_token) as admin:
        agent_token = admin.create_token(TokenCreate(role="agent", site="shanghai")).token
        replicas.start_agent(agent_token)
        _wait_until(
            "shanghai is up",
            lambda: {s.name: s.status for s in admin.sites()}["shanghai"] == "up",
            60,
            replicas.logs,
        )
        script = f'echo "$$ $ONECLUSTER_ATTEMPT_ID" >> {runs}; exec sleep 600'
        job = admin.submit(
            JobSubmit(
                team="llm", gpus=8, gpu_types=["H800"], duration_s=3600.0,
                command=["sh", "-c", script],
            )
        )  # fmt: skip
        _wait_until(
            "the job runs", lambda: runs.exists() and runs.read_text() != "", 60, replicas.logs
        )
        assert admin.job(job.id).state == "running"
    pid, attempt_id = runs.read_text().split()
    # B joins while the job runs (both replicas serve the API over the same database).
    replicas.start_server("b")
    replicas.kill("a")
    killed_at = time.time()
    with Client([a, b], admin_token) as admin:

        def renewed_past_a_lease() -> bool:
            shanghai = {s.name: s for s in admin.sites()}["shanghai"]
            return (shanghai.last_heartbeat or 0.0) > killed_at + LEASE_S + 1.0

        _wait_until(
            "B has renewed shanghai's lease for longer than a lease",
            renewed_past_a_lease,
            LEASE_S * 4,
            replicas.logs,
        )
        assert admin.base_url == b
        after = admin.job(job.id)
        shanghai = {s.name: s for s in admin.sites()}["shanghai"]
    assert (after.state, after.attempts, after.preemptions) == ("running", 1, 0), replicas.logs()
    assert shanghai.status == "up"
    assert runs.read_text().split() == [pid, attempt_id], "the attempt was started again"
    assert alive(int(pid)), "the first run was stopped"
    agent_log = replicas.log("agent")
    # It tried A, found it gone, and went on with B (B's renewals above say B took its syncs).
    assert f"cannot reach the onecluster server at {a}" in agent_log
    assert "works again after" in agent_log
    assert "stopping" not in agent_log, agent_log  # the agent never fenced its attempts
