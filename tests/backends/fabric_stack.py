"""A server and one agent per site as real processes, for the backends' end-to-end tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from onecluster.client import Client
from onecluster.errors import PlatformError
from onecluster.schema import JobOut, JobSubmit, TokenCreate

T = TypeVar("T")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait(
    what: str,
    check: Callable[[], T | None],
    timeout: float = 60.0,
    explain: Callable[[], str] = str,
) -> T:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}\n{explain()}")
        time.sleep(0.2)


class Stack:
    """The server of ``fabric`` and one agent per site of ``agent_args`` (its extra
    arguments) as real processes, stopped by :meth:`close`."""

    def __init__(self, state: Path, fabric: Path, agent_args: dict[str, list[str]]) -> None:
        self.state = state
        self.url = f"http://127.0.0.1:{_free_port()}"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.confs: dict[str, Path] = {}  # the Slurm sites' slurm.conf, where a test sets them
        cli = [sys.executable, "-m", "onecluster.cli"]
        self.cli = cli
        (state / "logs").mkdir(parents=True)
        self._spawn(
            "server",
            [
                *cli,
                "--state-dir",
                str(state),
                "server",
                "--fabric",
                str(fabric),
                "--port",
                self.url.rsplit(":", 1)[1],
            ],
        )
        token_file = state / "admin.token"
        wait("the server's admin token", lambda: token_file.exists() and token_file.read_text())
        self.admin_token = token_file.read_text().strip()
        self.admin = Client(self.url, self.admin_token)
        wait("the server", self._healthy)
        for site, args in agent_args.items():
            token = self.admin.create_token(TokenCreate(role="agent", site=site)).token
            self._spawn(
                f"agent-{site}",
                [
                    *cli,
                    "--server",
                    self.url,
                    "agent",
                    "--site",
                    site,
                    "--fabric",
                    str(fabric),  # the fabric names the site's backend
                    *args,
                    "--work-dir",
                    str(state / "agents" / site),
                    "--stop-grace",
                    "3",
                ],
                env={"ONECLUSTER_TOKEN": token},
            )
        self.members = {
            team: Client(
                self.url, self.admin.create_token(TokenCreate(role="member", team=team)).token
            )
            for team in ("llm", "vision", "speech")
        }

    def _healthy(self) -> bool:
        try:
            self.admin.health()
        except PlatformError:
            return False
        return True

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        with (self.state / "logs" / f"{name}.log").open("wb") as log:
            self.procs[name] = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
            )

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
            for p in sorted((self.state / "logs").glob("*.log"))
        )

    def site_status(self) -> dict[str, str]:
        return {s.name: s.status for s in self.admin.sites()}

    def submit(self, team: str, **fields: Any) -> JobOut:
        return self.members[team].submit(JobSubmit(team=team, **fields))

    def job(self, job_id: str) -> JobOut:
        return self.admin.job(job_id)

    def until(self, job_id: str, state: str, timeout: float = 90.0) -> JobOut:
        def check() -> JobOut | None:
            job = self.job(job_id)
            if job.state in ("failed", "cancelled") and state not in ("failed", "cancelled"):
                pytest.fail(f"job {job_id} ended {job.state}: {job.reason}\n{self.logs()}")
            return job if job.state == state else None

        def explain() -> str:
            job = self.job(job_id)
            events = "\n".join(f"{e.kind}: {e.message}" for e in self.admin.events(limit=50))
            return f"{job.model_dump_json(indent=1)}\n{events}\n{self.logs()}"

        return wait(f"job {job_id} to be {state}", check, timeout, explain)

    def close(self) -> None:
        for client in (self.admin, *self.members.values()):
            client.close()
        for name, proc in sorted(self.procs.items(), key=lambda kv: kv[0] == "server"):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            assert proc.returncode is not None, name
