"""Datasets and transfers through a real server, with agents played by syncs: register, scan,
push, the orders each site's data plane gets, and every refusal (each changing nothing)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx
import pytest

from onecluster.errors import ConflictError, ForbiddenError, NotFoundError, ValidationError
from onecluster.schema import (
    AgentSyncReply,
    DataReport,
    DatasetAdd,
    LinkReport,
    PathReport,
    PushIn,
    ReplicaReport,
    ScanOut,
    ScanReport,
    TransferOut,
    TransferReport,
)

if TYPE_CHECKING:
    from conftest import RunningServer

pytestmark = pytest.mark.integration

ROOT = "ab" * 32
NEWER = "cd" * 32
GB = 10**9
#: Where each site's data plane listens, and its addresses on its circuits.
ADDRESS = {"shanghai": "10.211.0.1", "singapore": "10.211.0.2", "tokyo": "10.211.0.3"}
CIRCUITS = {
    "shanghai": {"sha-sin-hk": "10.1.1.1", "sha-sin-tw": "10.1.2.1", "sha-tyo": "10.1.3.1"},
    "singapore": {"sha-sin-hk": "10.1.1.2", "sha-sin-tw": "10.1.2.2", "sin-tyo": "10.1.4.1"},
    "tokyo": {"sha-tyo": "10.1.3.2", "sin-tyo": "10.1.4.2"},
}


def push_in(dataset: str = "corpus", to: str = "shanghai", **more: Any) -> PushIn:
    return PushIn.model_validate({"dataset": dataset, "to": to, **more})


def agent(
    server: RunningServer,
    site: str,
    *,
    scans: list[ScanReport] | None = None,
    transfers: list[TransferReport] | None = None,
    replicas: list[ReplicaReport] | None = None,
    circuit_bytes: dict[str, int] | None = None,
) -> AgentSyncReply:
    """One sync of ``site``'s agent with a data plane at port 7400 and its circuits' ends."""
    data = DataReport(
        port=7400,
        scans=scans or [],
        transfers=transfers or [],
        replicas=replicas or [],
        circuit_bytes=circuit_bytes or {},
    )
    links = [LinkReport(circuit=c, endpoint=f"{a}:4000") for c, a in CIRCUITS[site].items()]
    return server.sync(
        site, data=data, service_address=ADDRESS[site], links=links, probe_clock_s=1.0
    )


def held(site_path: str, root: str = ROOT, state: str = "complete", present: int = GB) -> Any:
    return ReplicaReport(
        dataset="corpus", root=root, state=state, bytes_present=present, path=site_path
    )  # type: ignore[arg-type]


def scanned(server: RunningServer, site: str = "singapore", root: str = ROOT) -> ScanOut:
    """``corpus`` registered at ``site`` and scanned there by its agent."""
    scan = server.admin().add_dataset(DatasetAdd(name="corpus", site=site, path="/data/corpus"))
    done = ScanReport(
        id=scan.id, state="done", bytes_done=GB, bytes_total=GB, root=root, files=3, chunks=800
    )
    agent(server, site, scans=[done], replicas=[held("/data/corpus", root)])
    return server.admin().scan(scan.id)


def test_add_then_the_agent_scans_it_and_the_version_and_replica_show(
    server: RunningServer,
) -> None:
    admin = server.admin()
    scan = admin.add_dataset(DatasetAdd(name="corpus", site="tokyo", path="/data/corpus"))
    assert (scan.state, scan.dataset, scan.site, scan.path) == (
        "queued",
        "corpus",
        "tokyo",
        "/data/corpus",
    )
    assert admin.add_dataset(DatasetAdd(name="corpus", site="tokyo", path="/data/corpus")) == scan
    [order] = agent(server, "tokyo").data.scans
    assert (order.id, order.dataset, order.path) == (scan.id, "corpus", "/data/corpus")
    assert agent(server, "singapore").data.scans == []
    progress = ScanReport(id=scan.id, state="scanning", files_done=1, bytes_done=GB // 2)
    agent(server, "tokyo", scans=[progress])
    assert admin.scan(scan.id).bytes_done == GB // 2
    done = ScanReport(id=scan.id, state="done", bytes_done=GB, root=ROOT, files=3, chunks=800)
    reply = agent(server, "tokyo", scans=[done], replicas=[held("/data/corpus")])
    assert reply.data.scans == []
    seen = admin.scan(scan.id)
    assert (seen.state, seen.root, seen.new_version) == ("done", ROOT, True)
    dataset = admin.dataset("corpus")
    assert (dataset.latest, dataset.declared_bytes) == (ROOT, None)
    [version] = dataset.versions
    assert (version.bytes, version.files, version.chunks) == (GB, 3, 800)
    assert [(r.site, r.state, r.path) for r in version.replicas] == [
        ("tokyo", "complete", "/data/corpus")
    ]
    names = [d.name for d in admin.datasets()]
    assert names == ["cc-zh-2026", "corpus", "imagenet-21k", "speech-ja-10k"]


def test_a_name_the_fabric_declares_gets_real_versions(server: RunningServer) -> None:
    admin = server.admin()
    before = admin.dataset("cc-zh-2026")
    assert (before.latest, before.declared_bytes, before.versions) == (None, 1800 * GB, [])
    scan = admin.add_dataset(DatasetAdd(name="cc-zh-2026", site="shanghai", path="/d/cc"))
    done = ScanReport(id=scan.id, state="done", bytes_done=GB, root=ROOT)
    agent(server, "shanghai", scans=[done])
    after = admin.dataset("cc-zh-2026")
    assert (after.latest, after.declared_bytes) == (ROOT, 1800 * GB)


def test_a_failed_scan_shows_its_error(server: RunningServer) -> None:
    scan = server.admin().add_dataset(DatasetAdd(name="corpus", site="tokyo", path="/nope"))
    failed = ScanReport(id=scan.id, state="failed", error="/nope: no such directory")
    agent(server, "tokyo", scans=[failed])
    seen = server.admin().scan(scan.id)
    assert (seen.state, seen.error) == ("failed", "/nope: no such directory")


def test_push_end_to_end_with_tickets_paths_and_the_replica_complete(
    server: RunningServer,
) -> None:
    for site in ("shanghai", "tokyo"):
        agent(server, site)
    scanned(server, "singapore")
    admin = server.admin()
    created = admin._http.post("/api/v1/transfers", json={"dataset": "corpus", "to": "shanghai"})
    assert created.status_code == 201
    t = TransferOut.model_validate(created.json())
    assert (t.src, t.dst, t.root, t.state, t.bytes_total, t.chunks_total) == (
        "singapore",
        "shanghai",
        ROOT,
        "queued",
        GB,
        800,
    )
    assert {p.name for p in t.paths} == {"sha-sin-hk", "sha-sin-tw", "sha-tyo+sin-tyo"}
    # The destination is told to pull it, with the ticket and the paths.
    [receive] = agent(server, "shanghai").data.receive
    assert (receive.id, receive.src, receive.root, receive.priority) == (
        t.id,
        "singapore",
        ROOT,
        "bulk",
    )
    assert len(receive.ticket) >= 32
    hops = {p.name: [(h.address, h.port) for h in p.hops] for p in receive.paths}
    assert hops["sha-sin-hk"] == [("10.1.1.2", 7400)]
    assert hops["sha-tyo+sin-tyo"] == [("10.1.3.2", 7400), ("10.1.4.1", 7400)]
    # The source serves it with the same ticket; the relay relays its own path only.
    [serve] = agent(server, "singapore", replicas=[held("/data/corpus")]).data.serve
    assert (serve.id, serve.ticket, serve.relay) == (t.id, receive.ticket, False)
    [relay] = agent(server, "tokyo").data.serve
    assert (relay.relay, set(relay.rates)) == (True, {"sha-tyo+sin-tyo"})
    # Pushing again while it runs answers the same transfer.
    again = admin._http.post("/api/v1/transfers", json={"dataset": "corpus", "to": "shanghai"})
    assert (again.status_code, again.json()["id"]) == (200, t.id)
    running = TransferReport(
        id=t.id,
        state="running",
        bytes_done=GB // 2,
        bytes_sent=GB // 4,
        rate_bps=1e9,
        paths=[PathReport(name="sha-sin-hk", bytes=GB // 4, streams=4)],
    )
    agent(server, "shanghai", transfers=[running])
    server.clock.advance(4)
    seen = admin.transfer(t.id)
    assert (seen.state, seen.bytes_done, seen.seconds) == ("running", GB // 2, 4.0)
    assert seen.eta_s == pytest.approx(GB / 2 * 8 / 1e9)
    assert {p.name: p.bytes for p in seen.paths}["sha-sin-hk"] == GB // 4
    done = TransferReport(id=t.id, state="done", bytes_done=GB, bytes_sent=GB // 2)
    reply = agent(server, "shanghai", transfers=[done], replicas=[held("/srv/corpus")])
    assert reply.data.receive == []
    seen = admin.transfer(t.id)
    assert (seen.state, seen.bytes_sent, seen.seconds, seen.finished_at) == (
        "done",
        GB // 2,
        4.0,
        server.clock.now(),
    )
    [version] = admin.dataset("corpus").versions
    assert {(r.site, r.state) for r in version.replicas} == {
        ("singapore", "complete"),
        ("shanghai", "complete"),
    }
    assert agent(server, "singapore", replicas=[held("/data/corpus")]).data.serve == []
    assert admin.transfers() == [] and [x.id for x in admin.transfers(state="all")] == [t.id]


def test_pushing_to_a_site_that_has_it_all_is_done_with_nothing_sent(
    server: RunningServer,
) -> None:
    scanned(server, "singapore")
    answer = server.admin()._http.post(
        "/api/v1/transfers", json={"dataset": "corpus", "to": "singapore"}
    )
    assert answer.status_code == 200
    t = TransferOut.model_validate(answer.json())
    assert (t.state, t.bytes_sent, t.bytes_done, t.eta_s) == ("done", 0, GB, 0.0)


def test_without_from_the_source_is_the_best_connected_holder(server: RunningServer) -> None:
    for site in ("shanghai", "singapore", "tokyo"):
        agent(server, site)
    scanned(server, "shanghai")
    agent(server, "singapore", replicas=[held("/s/corpus")])
    # To tokyo: singapore has 2 Gbit/s direct, shanghai 1.
    t = server.admin().push(push_in(to="tokyo"))
    assert t.src == "singapore"


def test_cancel_stops_it_everywhere_and_only_once(server: RunningServer) -> None:
    scanned(server)
    admin = server.admin()
    t = admin.push(push_in())
    cancelled = admin.cancel_transfer(t.id)
    assert cancelled.state == "cancelled"
    assert agent(server, "shanghai").data.receive == []
    with pytest.raises(ConflictError, match="already ended"):
        admin.cancel_transfer(t.id)
    assert admin.transfer(t.id) == cancelled


def test_a_member_pushes_and_an_agent_may_only_read(server: RunningServer) -> None:
    scanned(server)
    member = server.client(server.token(role="member", team="vision"))
    assert member.push(push_in()).state == "queued"
    robot = server.client(server.token(role="agent", site="tokyo"))
    assert [d.name for d in robot.datasets()][:2] == ["cc-zh-2026", "corpus"]
    with pytest.raises(ForbiddenError, match="cannot act on datasets and transfers"):
        robot.push(push_in(to="tokyo"))
    with pytest.raises(ForbiddenError):
        robot.add_dataset(DatasetAdd(name="x", site="tokyo", path="/x"))


# -- refusals: each is a clear message and changes nothing -------------------------------------


def _unchanged(server: RunningServer) -> tuple[Any, ...]:
    admin = server.admin()
    return (admin.datasets(), admin.transfers(state="all"), admin.events(limit=1000))


def test_registering_at_an_unknown_site_is_404_naming_the_sites(server: RunningServer) -> None:
    before = _unchanged(server)
    with pytest.raises(NotFoundError, match="there is no site 'mars'") as caught:
        server.admin().add_dataset(DatasetAdd(name="corpus", site="mars", path="/d"))
    assert "shanghai, singapore, tokyo" in (caught.value.hint or "")
    assert _unchanged(server) == before


def test_a_relative_path_is_refused(server: RunningServer) -> None:
    answer = server.admin()._http.post(
        "/api/v1/datasets", json={"name": "corpus", "site": "tokyo", "path": "data/corpus"}
    )
    assert answer.status_code == 400
    assert "is not absolute" in answer.json()["error"]["message"]


@pytest.mark.parametrize(
    ("body", "error", "message"),
    [
        (push_in(dataset="nosuch"), NotFoundError, "there is no dataset 'nosuch'"),
        (push_in(to="mars"), NotFoundError, "there is no site 'mars'"),
        (push_in(**{"from": "mars"}), NotFoundError, "there is no site 'mars'"),
        (push_in(version=NEWER), NotFoundError, f"dataset corpus has no version {NEWER}"),
        (push_in(**{"from": "shanghai"}), ValidationError, "moves nothing"),
        (push_in(**{"from": "tokyo"}), ConflictError, "site tokyo holds no complete replica"),
    ],
)
def test_push_refusals_of_a_scanned_dataset(
    server: RunningServer, body: PushIn, error: type[Exception], message: str
) -> None:
    scanned(server)
    before = _unchanged(server)
    with pytest.raises(error, match=message):
        server.admin().push(body)
    assert _unchanged(server) == before


def test_unknown_dataset_names_the_known_ones(server: RunningServer) -> None:
    scanned(server)
    with pytest.raises(NotFoundError) as caught:
        server.admin().push(push_in(dataset="corpsu"))
    assert "cc-zh-2026, corpus, imagenet-21k" in (caught.value.hint or "")
    with pytest.raises(NotFoundError, match="there is no dataset 'corpsu'"):
        server.admin().dataset("corpsu")


def test_a_dataset_with_no_scanned_version_cannot_be_pushed(server: RunningServer) -> None:
    server.admin().add_dataset(DatasetAdd(name="corpus", site="tokyo", path="/d"))
    before = _unchanged(server)
    for name in ("corpus", "cc-zh-2026"):  # registered, and only declared
        with pytest.raises(ConflictError, match="no scanned version yet") as caught:
            server.admin().push(push_in(dataset=name))
        assert "onecluster dataset add" in (caught.value.hint or "")
    assert _unchanged(server) == before


def test_a_version_no_site_holds_whole_cannot_be_pushed(server: RunningServer) -> None:
    scanned(server)
    agent(server, "singapore", replicas=[held("/data/corpus", state="partial", present=5)])
    before = _unchanged(server)
    with pytest.raises(ConflictError, match="no site holds a complete replica"):
        server.admin().push(push_in())
    assert _unchanged(server) == before


def test_unknown_scans_and_transfers_are_404(server: RunningServer) -> None:
    admin = server.admin()
    with pytest.raises(NotFoundError, match="there is no scan s-nosuch"):
        admin.scan("s-nosuch")
    with pytest.raises(NotFoundError, match="there is no transfer t-nosuch"):
        admin.transfer("t-nosuch")
    with pytest.raises(NotFoundError, match="there is no transfer t-nosuch"):
        admin.cancel_transfer("t-nosuch")


# -- the sync's data part --------------------------------------------------------------------


def test_reports_about_unknown_foreign_or_ended_things_change_nothing(
    server: RunningServer,
) -> None:
    scanned(server)
    admin = server.admin()
    t = admin.push(push_in())
    agent(server, "tokyo")
    before = _unchanged(server)
    stray = [
        TransferReport(id="t-nosuch", state="done"),
        TransferReport(id=t.id, state="done"),  # only its destination reports on it
    ]
    agent(server, "tokyo", transfers=stray, scans=[ScanReport(id="s-x", state="done")])
    assert _unchanged(server) == before


def test_a_data_report_that_cannot_be_taken_costs_the_site_nothing(
    server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_args: object, **_kw: object) -> None:
        raise RuntimeError("the data tables are broken")

    monkeypatch.setattr(server.control.store, "record_data", broken)
    reply = agent(server, "tokyo")
    assert reply.lease_s == server.config.lease_s
    assert {s.name: s.status for s in server.admin().sites()}["tokyo"] == "up"
    monkeypatch.setattr(server.control.store, "data_work", broken)
    assert agent(server, "tokyo").data.receive == []


def test_a_sync_without_data_changes_no_replica(server: RunningServer) -> None:
    scanned(server)
    before = server.admin().dataset("corpus")
    server.sync("singapore")  # an agent with no data plane
    assert server.admin().dataset("corpus") == before


def test_a_bad_replica_path_is_left_out_and_the_rest_taken(server: RunningServer) -> None:
    scanned(server)
    agent(server, "singapore", replicas=[held("/data/corpus"), held("relative/x", root=NEWER)])
    [version] = server.admin().dataset("corpus").versions
    assert [r.site for r in version.replicas] == ["singapore"]


def test_data_plane_bytes_make_the_circuit_busy_for_the_scheduler(server: RunningServer) -> None:
    agent(server, "tokyo", circuit_bytes={"sin-tyo": 0})
    server.clock.advance(1)
    agent(server, "tokyo", circuit_bytes={"sin-tyo": 125_000_000})  # 1 Gbit/s of 2
    assert server.control.circuit_load(server.clock.now())["sin-tyo"] == pytest.approx(0.5)


# -- scheduling with registered datasets -----------------------------------------------------


def test_a_job_may_name_a_registered_dataset_and_gets_its_size(server: RunningServer) -> None:
    scanned(server, "tokyo")
    job = _submit(server, dataset="corpus")
    assert (job.status_code, job.json()["dataset_bytes"]) == (201, GB)
    typo = _submit(server, dataset="corpsu")
    assert typo.status_code == 422
    assert "is not declared in the fabric nor registered" in typo.json()["error"]["message"]
    assert "corpus" in typo.json()["error"]["hint"]
    # A fabric-declared name that has a real version now takes the version's size.
    assert _submit(server, dataset="speech-ja-10k").json()["dataset_bytes"] == 420 * GB


def test_a_dataset_registered_moments_ago_is_admitted(server: RunningServer) -> None:
    server.admin().add_dataset(DatasetAdd(name="fresh", site="tokyo", path="/d"))
    assert _submit(server, dataset="fresh").status_code == 201


def test_the_scheduler_sees_the_latest_versions_complete_replicas(server: RunningServer) -> None:
    scanned(server, "tokyo")
    assert server.control.data.replicas() == {"corpus": frozenset({"tokyo"})}


def _submit(server: RunningServer, **fields: Any) -> httpx.Response:
    job = {"team": "speech", "gpus": 8, "duration_s": 60, "command": ["true"], **fields}
    return server.admin()._http.post("/api/v1/jobs", json=job)


def test_a_job_goes_where_its_registered_dataset_is(server: RunningServer) -> None:
    for site in ("shanghai", "singapore", "tokyo"):
        agent(server, site)
    scan = server.admin().add_dataset(DatasetAdd(name="corpus", site="tokyo", path="/d/c"))
    done = ScanReport(id=scan.id, state="done", bytes_done=10**12, root=ROOT)
    agent(server, "tokyo", scans=[done], replicas=[held("/d/c", present=10**12)])
    # H100s at singapore (cheaper) and tokyo, where the terabyte is.
    without = _submit(server, gpu_types=["H100"])
    assert server.step().started == 1
    assert [p.site for p in server.admin().job(without.json()["id"]).parts] == ["singapore"]
    with_data = _submit(server, gpu_types=["H100"], dataset="corpus")
    assert server.step().started == 2  # (counted since the server started)
    assert [p.site for p in server.admin().job(with_data.json()["id"]).parts] == ["tokyo"]
