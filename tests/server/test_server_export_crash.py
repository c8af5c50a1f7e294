"""The server is SIGKILLed in the middle of an export: the register it leaves verifies
offline and holds that export's entry; restarted on the same state, the server finishes
the export and writes its end once.

Real processes for the server (``onecluster server``, SQLite in its state directory); the
three sites' data planes run in this process (``SiteData`` on loopback) and sync through
the REST API with their agent tokens, as agents do.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from onecluster.agent._data import SiteData
from onecluster.client import Client
from onecluster.register import verify
from onecluster.schema import AgentSync, ApprovalIn, DatasetAdd, ExportIn, TokenCreate
from onecluster.server import copy_register
from onecluster.store import Store, make_engine

pytestmark = [pytest.mark.slow, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
FABRIC = str(ROOT / "examples" / "fabrics" / "three-site.yaml")
KEY = b"a test key of more than sixteen bytes"


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _copy(server: Server, out: Path) -> Path:
    """The register in the server's database, copied out as a folder for ``verify``."""
    store = Store(make_engine(f"sqlite:///{server.state / 'onecluster.db'}"))
    try:
        copy_register(store, out)
    finally:
        store.close()
    return out


def _entries(register: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (register / "entries.jsonl").read_text().splitlines()]


class Server:
    """``onecluster server`` as a child process in its own session."""

    def __init__(self, tmp: Path) -> None:
        self.state = tmp / "state"
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp / "server.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        argv = ["--state-dir", str(self.state), "server", "--fabric", FABRIC]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "onecluster.cli", *argv, "--port", str(self.port)],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 60
        while not self._healthy():
            assert time.monotonic() < deadline, self.log.read_text()
            time.sleep(0.1)

    def _healthy(self) -> bool:
        assert self.process is not None and self.process.poll() is None, self.log.read_text()
        try:
            return httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    def kill(self) -> None:
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=30)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    s = Server(tmp_path)
    s.start()
    yield s
    s.stop()


class Sites:
    """The three data planes and their agent tokens; :meth:`round` syncs each once."""

    def __init__(self, tmp: Path, server: Server, admin: Client) -> None:
        self.server = server
        self.planes = {
            site: SiteData(
                site,
                tmp / "planes" / site,
                address="127.0.0.1",
                deid_key=KEY if site == "shanghai" else None,
            )
            for site in ("shanghai", "singapore", "tokyo")
        }
        self.tokens = {
            site: admin.create_token(TokenCreate(role="agent", site=site)).token
            for site in self.planes
        }

    def round(self) -> None:
        for site, plane in self.planes.items():
            with Client(self.server.url, self.tokens[site]) as agent:
                sync = AgentSync(agent_id=f"agent-{site}", attempts=[], data=plane.report())
                plane.apply(agent.agent_sync(site, sync).data)

    def until(self, done: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + 90
        while not done():
            assert time.monotonic() < deadline, f"{what}: not within 90 s"
            self.round()
            time.sleep(0.1)

    def close(self) -> None:
        for plane in self.planes.values():
            plane.close()


def test_a_server_killed_mid_export_leaves_a_register_that_verifies_with_its_entry(
    server: Server, tmp_path: Path
) -> None:
    tree = tmp_path / "records"
    tree.mkdir()
    rows = "\n".join(f"{i},13{i % 10}{i:08d},user{i}@example.com" for i in range(20_000))
    (tree / "records.csv").write_text("id,mobile,email\n" + rows + "\n")
    admin = Client(server.url, (server.state / "admin.token").read_text().strip())
    sites = Sites(tmp_path, server, admin)
    try:
        scan = admin.add_dataset(DatasetAdd(name="records", site="shanghai", path=str(tree)))
        sites.until(lambda: admin.scan(scan.id).state == "done", "the scan")
        member_token = admin.create_token(
            TokenCreate(role="member", team="llm", holder="alice")
        ).token
        compliance_token = admin.create_token(TokenCreate(role="compliance", holder="bob")).token
        member = Client(server.url, member_token)
        asked = member.request_approval(
            ApprovalIn(
                dataset="records",
                destinations=["singapore"],
                purpose="crash test",
                personal=True,
                route="standard_contract",
                route_ref="SC-1",
                valid_until=4_000_000_000.0,
                max_bytes=10**9,
            )
        )
        with Client(server.url, compliance_token) as bob:
            bob.approve(asked.id)
        export = member.start_export(ExportIn(dataset="records", to="singapore", approval=asked.id))
        sites.until(lambda: member.export(export.id).state != "preparing", "the intent")
        assert member.export(export.id).state == "sending"
        member.close()
        admin.close()

        server.kill()
        register = _copy(server, tmp_path / "copy-1")
        report = verify(register)
        entries = [
            json.loads(line) for line in (register / "entries.jsonl").read_text().splitlines()
        ]
        assert report.size == len(entries)
        [intent] = [e for e in entries if e["export"] == export.id and e["type"] == "intent"]
        assert intent["destination"] == "singapore"

        server.start()
        member = Client(server.url, member_token)
        sites.until(
            lambda: member.export(export.id).state in ("done", "failed"), "the export's end"
        )
        done = member.export(export.id)
        assert done.state == "done", done.error
        member.close()
        server.stop()
        register = _copy(server, tmp_path / "copy-2")
        verify(register)
        entries = [
            json.loads(line) for line in (register / "entries.jsonl").read_text().splitlines()
        ]
        mine = [e["type"] for e in entries if e["export"] == export.id]
        assert mine == ["intent", "complete"]
    finally:
        sites.close()
