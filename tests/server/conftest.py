"""A real onecluster server on 127.0.0.1 (uvicorn in a thread) with a virtual clock.

The reconcile loop's interval is an hour, so after its first pass tests drive it by hand
with ``server.step()``; agents are simulated with ``server.sync(...)``.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import uvicorn
from sqlalchemy import text

from onecluster.client import Client
from onecluster.clock import ManualClock
from onecluster.errors import NotLeaderError
from onecluster.fabric import load_fabric
from onecluster.schema import AgentSync, AgentSyncReply, AttemptReport, TokenCreate
from onecluster.server import ControlPlane, Reconciler, ReconcileStats, ServerConfig, create_app
from onecluster.server._election import Election
from onecluster.store import make_engine
from onecluster.store._tables import Base

# Test helpers next to this file (world.py) import as top-level modules.
sys.path.insert(0, str(Path(__file__).parent))

FABRIC = Path(__file__).resolve().parents[2] / "examples" / "fabrics" / "three-site.yaml"
T0 = 1_780_000_000.0


class RunningServer:
    """One uvicorn server in a background thread; ``restart()`` keeps the database."""

    def __init__(self, state_dir: Path, clock: ManualClock, db_url: str | None = None) -> None:
        self.clock = clock
        self.config = ServerConfig(
            fabric=load_fabric(FABRIC),
            state_dir=state_dir,
            db_url=db_url,
            reconcile_interval_s=3600.0,
            lease_s=10.0,
            grace_s=5.0,
        )
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.url = ""
        self._clients: list[Client] = []
        self._agent_tokens: dict[str, str] = {}

    def start(self) -> None:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        self.config = replace(self.config, advertise_url=self.url)
        app = create_app(self.config, clock=self.clock)
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        deadline = time.monotonic() + 20
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.01)
        self._server, self._thread, self._app = server, thread, app
        # The leader runs a first reconcile pass at once; wait for it so tests start clean.  A
        # second server on the same database follows: wait until it knows who leads.
        election = self._app.state.election
        while self.reconciler.statistics().passes < 1:
            if election.term > 0 and not election.leading and election.leader_url is not None:
                break
            time.sleep(0.01)

    def stop(self) -> None:
        for c in self._clients:
            c.close()
        self._clients.clear()
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=20)
            self._server = self._thread = None

    def restart(self) -> None:
        self.stop()
        self.start()

    @property
    def control(self) -> ControlPlane:
        control = self._app.state.control
        assert isinstance(control, ControlPlane)
        return control

    @property
    def reconciler(self) -> Reconciler:
        reconciler = self._app.state.reconciler
        assert isinstance(reconciler, Reconciler)
        return reconciler

    @property
    def election(self) -> Election:
        election = self._app.state.election
        assert isinstance(election, Election)
        return election

    def step(self) -> ReconcileStats:
        """One reconcile pass now."""
        return self.reconciler.step()

    def client(self, token: str | None) -> Client:
        c = Client(self.url, token)
        self._clients.append(c)
        return c

    @property
    def admin_token(self) -> str:
        return (self.config.state_dir / "admin.token").read_text().strip()

    def admin(self) -> Client:
        return self.client(self.admin_token)

    def token(self, **scope: str) -> str:
        return self.admin().create_token(TokenCreate(**scope)).token  # type: ignore[arg-type]

    def sync(
        self, site: str, *reports: AttemptReport, agent_id: str = "agent-1", **body: object
    ) -> AgentSyncReply:
        """One agent sync of ``site`` with its own agent token (minted once per site)."""
        if site not in self._agent_tokens:
            self._agent_tokens[site] = self.token(role="agent", site=site)
        sync = AgentSync(agent_id=agent_id, attempts=list(reports), **body)  # type: ignore[arg-type]
        client = self.client(self._agent_tokens[site])
        deadline = time.monotonic() + 10.0
        while True:  # as an agent does (decision 168): a replica re-elected on a loaded host
            try:  # refuses syncs until it has taken office again, for a moment
                return client.agent_sync(site, sync)
            except NotLeaderError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


def emptied_postgres() -> str:
    """The URL of the project's PostgreSQL (``ONECLUSTER_TEST_PG_URL``), every table
    dropped; skips the test when it is not set."""
    url = os.environ.get("ONECLUSTER_TEST_PG_URL")
    if not url:
        pytest.skip("ONECLUSTER_TEST_PG_URL is not set; start one with scripts/postgres.sh")
    engine = make_engine(url)
    with engine.begin() as conn:
        Base.metadata.drop_all(conn)
        conn.execute(text("DROP TABLE IF EXISTS alembic_version"))
    engine.dispose()
    return url


@pytest.fixture
def pg_server(tmp_path: Path, clock: ManualClock) -> Iterator[RunningServer]:
    """A server on the project's PostgreSQL (``ONECLUSTER_TEST_PG_URL``), emptied first."""
    url = emptied_postgres()
    s = RunningServer(tmp_path / "state", clock, db_url=url)
    s.start()
    yield s
    s.stop()


@pytest.fixture
def server(tmp_path: Path, clock: ManualClock) -> Iterator[RunningServer]:
    s = RunningServer(tmp_path / "state", clock)
    s.start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def module_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """One server for a whole module (its tests must not depend on each other's jobs).

    Alone on its database, it has nobody to hand the leadership to: a leader lease of 10 s,
    not 2, so that a renewal late on a loaded host does not depose and re-elect it (a new
    term, a ``leader_elected`` event) in the middle of a module that compares the database
    before and after each request."""
    s = RunningServer(tmp_path_factory.mktemp("state"), ManualClock(T0))
    s.config = replace(s.config, leader_lease_s=10.0)
    s.start()
    yield s
    s.stop()
