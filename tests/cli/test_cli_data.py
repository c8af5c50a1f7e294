"""``dataset``, ``push`` and ``transfers`` against a real server, with the agents played by
syncs.  A command that waits polls the server between pauses; the test makes each pause the
agents' next move (``time.sleep`` is replaced by a script), so nothing ever sleeps."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
from typer.testing import CliRunner

from onecluster.cli import build_app
from onecluster.client import Client
from onecluster.schema import (
    AgentSync,
    AgentSyncReply,
    DataReport,
    PathReport,
    ReplicaReport,
    ScanReport,
    TokenCreate,
    TransferReport,
)

pytestmark = pytest.mark.integration

GB = 10**9
ROOT = "1f" * 32


def _cli(server: tuple[str, str], *args: str) -> tuple[int, str, str]:
    url, admin = server
    result = CliRunner().invoke(
        build_app(), ["--server", url, "--token", admin, *args], env={"COLUMNS": "200"}
    )
    return result.exit_code, result.stdout, result.stderr


@dataclass
class Agent:
    """A site's agent with a data plane, as far as the server can tell."""

    server: tuple[str, str]
    site: str
    held: list[ReplicaReport] = field(default_factory=list)

    def __post_init__(self) -> None:
        url, admin = self.server
        with Client(url, admin) as client:
            token = client.create_token(TokenCreate(role="agent", site=self.site)).token
        self.client = Client(url, token)

    def sync(
        self,
        scans: list[ScanReport] | None = None,
        transfers: list[TransferReport] | None = None,
    ) -> AgentSyncReply:
        data = DataReport(
            port=7400,
            address="127.0.0.1",
            scans=scans or [],
            transfers=transfers or [],
            replicas=self.held,
        )
        return self.client.agent_sync(self.site, AgentSync(agent_id=f"fake-{self.site}", data=data))

    def hold(self, dataset: str, root: str = ROOT, path: str = "/data") -> None:
        self.held.append(
            ReplicaReport(dataset=dataset, root=root, state="complete", bytes_present=GB, path=path)
        )


Agents = Callable[[str], Agent]


@pytest.fixture
def agents(server: tuple[str, str]) -> Iterator[Agents]:
    """Makes the agent of a site (closed after the test)."""
    made: list[Agent] = []

    def make(site: str) -> Agent:
        made.append(Agent(server, site))
        return made[-1]

    yield make
    for agent in made:
        agent.client.close()


def _script(monkeypatch: pytest.MonkeyPatch, *moves: Callable[[], object]) -> list[object]:
    """Each pause of the command under test plays the next move; returns the moves left."""
    left = list(moves)

    def pause(_seconds: float) -> None:
        assert left, "the command waited for more than the agents had to do"
        left.pop(0)()

    monkeypatch.setattr("time.sleep", pause)
    return left  # type: ignore[return-value]


def _scanned(server: tuple[str, str], agents: Agents, name: str, site: str = "singapore") -> Agent:
    """``name`` registered at ``site`` and scanned there (version ROOT, complete)."""
    agent = agents(site)
    code, out, err = _cli(server, "dataset", "add", name, "--site", site, "--path", f"/d/{name}",
                          "--no-wait", "--json")  # fmt: skip
    assert code == 0, err
    scan = json.loads(out)
    agent.hold(name, path=f"/d/{name}")
    done = ScanReport(id=scan["id"], state="done", bytes_done=GB, root=ROOT, files=2, chunks=9)
    agent.sync(scans=[done])
    return agent


def test_dataset_add_waits_for_the_scan_and_prints_the_version(
    server: tuple[str, str], agents: Agents, monkeypatch: pytest.MonkeyPatch
) -> None:
    tokyo = agents("tokyo")
    scan_id: list[str] = []

    def scanning() -> None:
        [order] = [o for o in tokyo.sync().data.scans if o.dataset == "waited"]
        scan_id.append(order.id)
        progress = ScanReport(
            id=order.id, state="scanning", bytes_done=GB // 2, bytes_total=GB, files_total=2
        )
        tokyo.sync(scans=[progress])

    def done() -> None:
        tokyo.hold("waited")
        report = ScanReport(
            id=scan_id[0], state="done", bytes_done=GB, bytes_total=GB, root=ROOT, files=2
        )
        tokyo.sync(scans=[report])

    left = _script(monkeypatch, scanning, done)
    code, out, err = _cli(server, "dataset", "add", "waited", "--site", "tokyo", "--path", "/d/w")
    assert (code, left) == (0, []), err
    assert "scanning, 500.00 MB of 1.00 GB (50%)" in out  # a plain progress line (no terminal)
    assert f"dataset waited: a new version, {ROOT} (1.00 GB, 2 files)" in out


def test_a_failed_scan_exits_10_with_its_error(
    server: tuple[str, str], agents: Agents, monkeypatch: pytest.MonkeyPatch
) -> None:
    tokyo = agents("tokyo")

    def fail() -> None:
        [order] = [o for o in tokyo.sync().data.scans if o.dataset == "broken"]
        tokyo.sync(scans=[ScanReport(id=order.id, state="failed", error="/d/b: no such file")])

    _script(monkeypatch, fail)
    code, _, err = _cli(server, "dataset", "add", "broken", "--site", "tokyo", "--path", "/d/b")
    assert code == 10
    assert "the scan of /d/b at tokyo failed: /d/b: no such file" in err


def test_dataset_show_and_list(server: tuple[str, str], agents: Agents) -> None:
    _scanned(server, agents, "shown")
    code, out, _ = _cli(server, "dataset", "show", "shown")
    assert code == 0
    assert f"{ROOT[:12]} (latest)" in out and "singapore" in out and "complete" in out
    assert "/d/shown" in out
    code, out, _ = _cli(server, "dataset", "show", "shown", "--json")
    assert json.loads(out)["latest"] == ROOT
    code, out, _ = _cli(server, "dataset", "list")
    assert code == 0 and "shown" in out and "cc-zh-2026" in out and "declared" in out
    code, _, err = _cli(server, "dataset", "show", "nosuch")
    assert code == 3 and "there is no dataset 'nosuch'" in err


def test_push_waits_with_progress_then_prints_what_it_did(
    server: tuple[str, str], agents: Agents, monkeypatch: pytest.MonkeyPatch
) -> None:
    _scanned(server, agents, "pushed")
    shanghai = agents("shanghai")
    order: list[str] = []

    def running() -> None:
        [receive] = [r for r in shanghai.sync().data.receive if r.dataset == "pushed"]
        order.append(receive.id)
        report = TransferReport(
            id=receive.id,
            state="running",
            bytes_done=GB // 4,
            bytes_sent=GB // 8,
            rate_bps=8e8,
            paths=[PathReport(name="default", bytes=GB // 8, streams=2)],
        )
        shanghai.sync(transfers=[report])

    def done() -> None:
        shanghai.hold("pushed", path="/srv/pushed")
        report = TransferReport(
            id=order[0],
            state="done",
            bytes_done=GB,
            bytes_sent=GB // 2,
            chunks_total=9,
            chunks_sent=5,
            paths=[PathReport(name="default", bytes=GB // 2, streams=2, state="done")],
        )
        shanghai.sync(transfers=[report])

    left = _script(monkeypatch, running, done)
    code, out, err = _cli(server, "push", "pushed", "--to", "shanghai")
    assert (code, left) == (0, []), err
    assert "running, 250.00 MB of 1.00 GB (25%), 800.0 Mbit/s" in out
    assert f"transfer {order[0]}: pushed@{ROOT[:12]} singapore → shanghai done" in out
    assert "500.00 MB sent over default" in out


def test_push_json_once_it_has_ended(
    server: tuple[str, str], agents: Agents, monkeypatch: pytest.MonkeyPatch
) -> None:
    _scanned(server, agents, "jsoned")
    shanghai = agents("shanghai")

    def done() -> None:
        [receive] = [r for r in shanghai.sync().data.receive if r.dataset == "jsoned"]
        report = TransferReport(
            id=receive.id,
            state="done",
            bytes_done=GB,
            bytes_sent=GB,
            chunks_total=9,
            chunks_sent=9,
            paths=[PathReport(name="default", bytes=GB, streams=2, state="done")],
        )
        shanghai.sync(transfers=[report])

    _script(monkeypatch, done)
    code, out, err = _cli(server, "push", "jsoned", "--to", "shanghai", "--json")
    assert code == 0, err
    transfer = json.loads(out)  # the only thing on stdout
    for key in ("id", "root", "bytes_total", "bytes_sent", "chunks_total", "chunks_sent"):
        assert key in transfer
    assert (transfer["state"], transfer["root"], transfer["bytes_sent"]) == ("done", ROOT, GB)
    assert [p["name"] for p in transfer["paths"]] == ["default"]
    assert transfer["seconds"] >= 0


def test_a_failed_transfer_exits_10_with_its_error(
    server: tuple[str, str], agents: Agents, monkeypatch: pytest.MonkeyPatch
) -> None:
    _scanned(server, agents, "failing")
    shanghai = agents("shanghai")

    def fail() -> None:
        [receive] = [r for r in shanghai.sync().data.receive if r.dataset == "failing"]
        bad = TransferReport(id=receive.id, state="failed", error="chunk 3 failed verification")
        shanghai.sync(transfers=[bad])

    _script(monkeypatch, fail)
    code, out, err = _cli(server, "push", "failing", "--to", "shanghai")
    assert code == 10
    assert "failed: chunk 3 failed verification" in err
    assert "failing@" in out


def test_transfers_list_and_cancel(server: tuple[str, str], agents: Agents) -> None:
    _scanned(server, agents, "listed")
    code, out, err = _cli(server, "push", "listed", "--to", "tokyo", "--no-wait", "--json")
    assert code == 0, err
    transfer = json.loads(out)
    assert transfer["state"] == "queued"
    code, out, _ = _cli(server, "transfers")
    assert code == 0 and transfer["id"] in out and "singapore → tokyo" in out
    code, out, _ = _cli(server, "transfers", "--json")
    assert transfer["id"] in [t["id"] for t in json.loads(out)]
    code, out, _ = _cli(server, "transfers", "cancel", transfer["id"])
    assert code == 0 and "cancelled" in out
    code, _, err = _cli(server, "transfers", "cancel", transfer["id"])
    assert code == 4 and "already ended (cancelled)" in err
    code, out, _ = _cli(server, "transfers")
    assert transfer["id"] not in out
    code, out, _ = _cli(server, "transfers", "--all", "--json")
    assert {t["id"]: t["state"] for t in json.loads(out)}[transfer["id"]] == "cancelled"


def test_push_to_where_it_is_already_sends_nothing(server: tuple[str, str], agents: Agents) -> None:
    _scanned(server, agents, "there")
    code, out, err = _cli(server, "push", "there", "--to", "singapore")
    assert code == 0, err
    assert "singapore holds all of it already, nothing sent" in out


def test_push_resolves_a_version_prefix(server: tuple[str, str], agents: Agents) -> None:
    _scanned(server, agents, "prefixed")
    code, out, err = _cli(
        server, "push", "prefixed", "--to", "tokyo", "--version", ROOT[:8], "--no-wait", "--json"
    )
    assert code == 0, err
    assert json.loads(out)["root"] == ROOT
    code, _, err = _cli(server, "push", "prefixed", "--to", "tokyo", "--version", "ffff")
    assert code == 3 and "no version starting with 'ffff'" in err


@pytest.mark.parametrize(
    ("args", "exit_code", "message"),
    [
        (("nosuch", "--to", "tokyo"), 3, "there is no dataset 'nosuch'"),
        (("refused", "--to", "mars"), 3, "there is no site 'mars'"),
        (("refused", "--to", "tokyo", "--from", "tokyo"), 2, "moves nothing"),
        (("refused", "--to", "shanghai", "--from", "tokyo"), 4, "holds no complete replica"),
        (("unscanned", "--to", "tokyo"), 4, "no scanned version yet"),
        (("refused", "--to", "tokyo", "--version", "x" * 64), 2, "invalid value for version"),
    ],
)
def test_push_refusals_exit_with_their_codes(
    server: tuple[str, str], agents: Agents, args: tuple[str, ...], exit_code: int, message: str
) -> None:
    _scanned(server, agents, "refused")
    _cli(server, "dataset", "add", "unscanned", "--site", "tokyo", "--path", "/u", "--no-wait")
    code, _, err = _cli(server, "push", *args)
    assert (code, message in err) == (exit_code, True), err


def test_dataset_add_refuses_an_unknown_site(server: tuple[str, str]) -> None:
    code, _, err = _cli(server, "dataset", "add", "x", "--site", "mars", "--path", "/d")
    assert code == 3 and "there is no site 'mars'" in err


def test_dataset_add_refuses_an_empty_path_before_any_request(server: tuple[str, str]) -> None:
    code, _, err = _cli(server, "dataset", "add", "x", "--site", "tokyo", "--path", " ")
    assert code == 2 and "give the directory at the site" in err


def test_server_refuses_a_relay_share_over_one_before_starting() -> None:
    result = CliRunner().invoke(
        build_app(), ["server", "--fabric", "nowhere.yaml", "--relay-share", "1.5"]
    )
    assert result.exit_code == 2 and "--relay-share" in result.stderr


@pytest.mark.parametrize(
    ("flag", "value"), [("--grace", "-1"), ("--fair-share-half-life", "0"), ("--grace", "nan")]
)
def test_server_refuses_a_bad_grace_or_half_life_before_starting(flag: str, value: str) -> None:
    result = CliRunner().invoke(build_app(), ["server", "--fabric", "nowhere.yaml", flag, value])
    assert result.exit_code == 2 and flag in result.stderr
