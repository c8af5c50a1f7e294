"""A running job outlives the control plane: the server is SIGKILLed while a job runs, stays
down 20 s, and comes back on the same SQLite database — with the default lease, the job keeps
running through it, has one attempt, and completes with exit 0.

Real processes: ``onecluster server``, ``onecluster agent`` (local backend) and the job.  The
20 s outage is the scenario itself, not a wait for something to happen.
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

pytestmark = [pytest.mark.slow, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
FABRIC = str(ROOT / "examples" / "fabrics" / "three-site.yaml")
OUTAGE_S = 20.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_until(what: str, check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.2)


class Stack:
    """A server and one agent as child processes, each in its own session."""

    def __init__(self, tmp: Path) -> None:
        self.state = tmp / "state"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.logs = tmp
        self.server: subprocess.Popen[bytes] | None = None
        self.agent: subprocess.Popen[bytes] | None = None
        self.work = tmp / "agent"

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        with (self.logs / f"{name}.log").open("ab") as log:
            return subprocess.Popen(
                [sys.executable, "-m", "onecluster.cli", *argv],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )

    def start_server(self, *options: str) -> None:
        argv = ["--state-dir", str(self.state), "server", "--fabric", FABRIC, *options]
        self.server = self._spawn("server", [*argv, "--port", str(self.port)], dict(os.environ))
        wait_until("the server answers", self._healthy, 60)

    def _healthy(self) -> bool:
        assert self.server is not None and self.server.poll() is None, self.log("server")
        try:
            return httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    def start_agent(self, token: str, *options: str) -> None:
        env = {**os.environ, "ONECLUSTER_TOKEN": token}
        argv = ["--server", self.url, "agent", "--site", "shanghai", "--backend", "local"]
        argv += ["--fabric", FABRIC, "--work-dir", str(self.work), *options]
        self.agent = self._spawn("agent", argv, env)

    def kill_server(self) -> None:
        assert self.server is not None
        os.killpg(self.server.pid, signal.SIGKILL)
        self.server.wait(timeout=10)

    def log(self, name: str) -> str:
        path = self.logs / f"{name}.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def stop(self) -> None:
        for proc in (self.agent, self.server):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    s = Stack(tmp_path)
    try:
        yield s
    finally:
        s.stop()


def test_a_running_job_survives_a_20_s_outage_of_the_server(stack: Stack) -> None:
    stack.start_server()
    admin_token = (stack.state / "admin.token").read_text().strip()
    with Client(stack.url, admin_token) as admin:
        agent = admin.create_token(TokenCreate(role="agent", site="shanghai"))
        stack.start_agent(agent.token)
        wait_until(
            "shanghai is up",
            lambda: {s.name: s.status for s in admin.sites()}["shanghai"] == "up",
            60,
        )
        job = admin.submit(
            JobSubmit(
                name="week-long-training",
                team="llm",
                gpus=8,
                gpu_types=["H800"],
                duration_s=3600.0,
                command=["sh", "-c", "echo started; sleep 35; echo finished"],
            )
        )
        wait_until("the job runs", lambda: "started" in admin.logs(job.id).data, 60)
    stack.kill_server()
    outage_began = time.monotonic()
    time.sleep(OUTAGE_S)  # the scenario: the control plane is gone for 20 s
    stack.start_server()
    assert time.monotonic() - outage_began >= OUTAGE_S
    with Client(stack.url, admin_token) as admin:
        wait_until("the job ends", lambda: admin.job(job.id).state not in ("running",), 120)
        done = admin.job(job.id)
        assert (done.state, done.exit_code, done.attempts, done.preemptions) == (
            "completed",
            0,
            1,
            0,
        ), f"{done}\n--- agent ---\n{stack.log('agent')}\n--- server ---\n{stack.log('server')}"
        assert "finished" in admin.logs(job.id).data


def _first_run(stack: Stack, admin: Client, pids: Path) -> tuple[str, int]:
    """Start the shanghai agent, submit a job whose first run never ends on its own (later
    runs end at once), wait until it runs; its id and the first run's pid."""
    agent = admin.create_token(TokenCreate(role="agent", site="shanghai"))
    stack.start_agent(agent.token, "--stop-grace", "1")
    wait_until("shanghai is up", lambda: admin.sites()[0].status == "up", 60)
    script = f'echo "$$ $ONECLUSTER_ATTEMPT_ID" >> {pids}; '
    script += 'case "$ONECLUSTER_ATTEMPT_ID" in *.1.0) exec sleep 600;; esac'
    job = admin.submit(
        JobSubmit(
            team="llm", gpus=8, gpu_types=["H800"], duration_s=60.0, command=["sh", "-c", script]
        )
    )
    wait_until("the job runs", lambda: pids.exists() and pids.read_text().strip() != "", 60)
    return job.id, int(pids.read_text().split()[0])


@pytest.mark.parametrize("fault", ["frozen", "killed"])
def test_a_job_ends_by_its_lease_when_its_agent_cannot_end_it(
    stack: Stack, tmp_path: Path, fault: str
) -> None:
    # The agent is frozen (SIGSTOP) or killed (SIGKILL) past its lease: its watchdog ends the
    # job before the server may start it again, and the job is never failed for it.
    stack.start_server("--lease", "10")
    admin_token = (stack.state / "admin.token").read_text().strip()
    pids = tmp_path / "pids"
    with Client(stack.url, admin_token) as admin:
        job_id, first = _first_run(stack, admin, pids)
        assert stack.agent is not None
        os.kill(stack.agent.pid, signal.SIGSTOP if fault == "frozen" else signal.SIGKILL)
        frozen_at = time.monotonic()
        wait_until("the watchdog ends the first run", lambda: not alive(first), 30)
        ended_after = time.monotonic() - frozen_at
        assert admin.job(job_id).state == "running"  # the server has not given it away yet
        assert ended_after <= 10.5, ended_after
        if fault == "frozen":
            os.kill(stack.agent.pid, signal.SIGCONT)
            wait_until("the job completes", lambda: admin.job(job_id).state == "completed", 60)
            done = admin.job(job_id)
            assert (done.attempts, done.exit_code) == (2, 0), done
        else:
            # nobody runs shanghai now: once its lease has ended the job waits to run again
            wait_until("the job is requeued", lambda: admin.job(job_id).state == "pending", 30)
            assert admin.sites()[0].status == "down"
        assert len(pids.read_text().splitlines()) == (2 if fault == "frozen" else 1)
