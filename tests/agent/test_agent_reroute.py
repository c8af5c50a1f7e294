"""Fast reroute in the agent: the routes move off a circuit its own probes find silent — at
once, whether the server answers, hangs or is gone — and the server's next table confirms or
corrects them, but never puts traffic back on a circuit still silent here."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from onecluster.agent import Agent
from onecluster.agent._links import SiteLinks
from onecluster.agent._routing import SiteRoutes
from onecluster.backends import LocalBackend
from onecluster.clock import ManualClock
from onecluster.errors import BackendError, UnavailableError
from onecluster.fabric import load_fabric
from onecluster.network import KernelRoute
from onecluster.schema import AgentSync, AgentSyncReply, PeerOut, RouteOut, RouteTableOut
from onecluster.telemetry import Prober

THREE = load_fabric(Path(__file__).resolve().parents[2] / "examples/fabrics/three-site.yaml")
HK, TW, TYO = "10.212.0.2", "10.212.1.2", "10.212.2.2"  # the far ends' circuit addresses
PEERS = {"sha-sin-hk": HK, "sha-sin-tw": TW, "sha-tyo": TYO}


class RecordingRoutes:
    """A RouteSink that keeps what it was told (or fails when told to)."""

    def __init__(self) -> None:
        self.applied: list[list[KernelRoute]] = []
        self.fail = False

    def apply(self, routes: Sequence[KernelRoute]) -> None:
        if self.fail:
            raise BackendError("cannot program the routes: Nexthop has invalid gateway")
        self.applied.append(list(routes))

    def via(self, dst: str) -> str | None:
        return next(r.via for r in self.applied[-1] if r.dst == dst)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def table(
    singapore: str = "sha-sin-hk", *, version: int = 1, down: Sequence[str] = ()
) -> RouteTableOut:
    """Shanghai's table: Singapore over ``singapore`` (backup sha-sin-tw), Tokyo direct."""
    via = {"sha-sin-hk": "singapore", "sha-sin-tw": "singapore", "sha-tyo": "tokyo"}[singapore]
    return RouteTableOut(
        version=version,
        changed_at=None,
        down=list(down),
        routes=[
            RouteOut(
                src="shanghai",
                dst="singapore",
                next_circuit=singapore,
                next_site=via,
                sites=["shanghai", "singapore"],
                circuits=[singapore],
                rtt_ms=68.0,
                backup_sites=["shanghai", "singapore"],
                backup_circuits=["sha-sin-tw"],
                backup_rtt_ms=71.0,
                dst_address="10.211.0.2",
            ),
            RouteOut(
                src="shanghai",
                dst="tokyo",
                next_circuit="sha-tyo",
                next_site="tokyo",
                sites=["shanghai", "tokyo"],
                circuits=["sha-tyo"],
                rtt_ms=26.0,
                backup_sites=["shanghai", "singapore", "tokyo"],
                backup_circuits=["sha-sin-hk", "sin-tyo"],
                backup_rtt_ms=140.0,
                dst_address="10.211.0.3",
            ),
        ],
    )


@pytest.fixture
def routes() -> tuple[SiteRoutes, RecordingRoutes, Clock]:
    sink, clock = RecordingRoutes(), Clock()
    return SiteRoutes(sink, service_address="10.211.0.1", fabric=THREE, clock=clock), sink, clock


def test_a_silent_next_circuit_is_routed_around_at_once(
    routes: tuple[SiteRoutes, RecordingRoutes, Clock],
) -> None:
    site, sink, _ = routes
    site.follow(table(), PEERS)
    assert sink.via("10.211.0.2") == HK
    site.avoid(frozenset({"sha-sin-hk", "sha-sin-tw"}))
    assert (sink.via("10.211.0.2"), sink.via("10.211.0.3")) == (TYO, TYO)  # through Tokyo
    stats = site.statistics()
    assert stats.overrides == {"singapore": "sha-tyo"} and stats.local_switches == 1
    assert sink.applied[-1][0].src == "10.211.0.1"


def test_the_servers_table_confirms_a_local_switch_without_another_change(
    routes: tuple[SiteRoutes, RecordingRoutes, Clock],
) -> None:
    site, sink, _ = routes
    site.follow(table(), PEERS)
    site.avoid(frozenset({"sha-sin-hk", "sha-sin-tw"}))
    applied = len(sink.applied)
    site.follow(table("sha-tyo", version=2, down=["sha-sin-hk", "sha-sin-tw"]), PEERS)
    assert len(sink.applied) == applied  # the same routes: nothing to program
    assert site.statistics().overrides == {}  # the table itself goes round now


def test_the_servers_table_corrects_a_local_switch(
    routes: tuple[SiteRoutes, RecordingRoutes, Clock],
) -> None:
    site, sink, _ = routes
    site.follow(table(), PEERS)
    site.avoid(frozenset({"sha-sin-hk"}))
    assert sink.via("10.211.0.2") == TW  # the next best circuit, by the fabric
    # the server knows better (say sha-sin-tw is failing at the far end): it goes via Tokyo
    site.follow(table("sha-tyo", version=2, down=["sha-sin-hk", "sha-sin-tw"]), PEERS)
    assert sink.via("10.211.0.2") == TYO


def test_a_stale_table_never_puts_traffic_back_on_a_circuit_silent_here(
    routes: tuple[SiteRoutes, RecordingRoutes, Clock],
) -> None:
    site, sink, _ = routes
    site.follow(table(), PEERS)
    site.avoid(frozenset({"sha-sin-hk"}))
    site.follow(table(), PEERS)  # the server has not heard yet, or is stale
    assert sink.via("10.211.0.2") == TW
    site.avoid(frozenset())  # the probes find it working again (steadily, undamped)
    assert sink.via("10.211.0.2") == HK  # the table's primary again


def test_without_the_fabric_the_tables_backup_is_taken() -> None:
    sink = RecordingRoutes()
    site = SiteRoutes(sink, service_address="10.211.0.1")
    site.follow(table(), PEERS)
    site.avoid(frozenset({"sha-sin-hk"}))
    assert sink.via("10.211.0.2") == TW
    site.avoid(frozenset({"sha-sin-hk", "sha-sin-tw"}))
    assert sink.via("10.211.0.2") is None  # unreachable: senders fail fast


def test_a_fabric_older_than_the_table_gives_way_to_the_tables_backup() -> None:
    sink = RecordingRoutes()
    site = SiteRoutes(sink, service_address="10.211.0.1", fabric=THREE)
    newer = table()
    newer.routes[0].backup_circuits = ["sha-sin-new"]  # a circuit applied since (decision 164)
    site.follow(newer, {**PEERS, "sha-sin-new": "10.212.9.2"})
    site.avoid(frozenset({"sha-sin-hk"}))
    assert sink.via("10.211.0.2") == "10.212.9.2"  # not the old fabric's sha-sin-tw detour


def test_a_detour_needs_its_next_hops_address() -> None:
    sink = RecordingRoutes()
    site = SiteRoutes(sink, service_address="10.211.0.1", fabric=THREE)
    site.follow(table(), {"sha-sin-hk": HK, "sha-sin-tw": TW})  # Tokyo's end not announced
    site.avoid(frozenset({"sha-sin-hk", "sha-sin-tw"}))
    assert sink.via("10.211.0.2") is None  # unreachable rather than a route with no next hop


def test_routes_are_reapplied_with_no_sync_and_a_failure_is_retried(
    routes: tuple[SiteRoutes, RecordingRoutes, Clock],
) -> None:
    site, sink, clock = routes
    site.follow(table(), PEERS)
    site.refresh()
    assert len(sink.applied) == 1
    clock.now += 10.0
    site.refresh()  # the server is gone, but a device that came back gets its routes
    assert len(sink.applied) == 2
    sink.fail = True
    site.avoid(frozenset({"sha-sin-hk"}))  # logged, not raised
    sink.fail = False
    site.refresh()  # retried at the next look, not 10 s later
    assert sink.via("10.211.0.2") == TW


# -- with real probes on loopback ---------------------------------------------------------


def wait_until(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


class Far:
    """The far ends of two Shanghai–Singapore circuits, each its own prober (so one can die
    alone)."""

    def __init__(self) -> None:
        self.hk = Prober({"sha-sin-hk": "127.0.0.2"}, port=0, interval_s=0.02)
        self.tw = Prober({"sha-sin-tw": "127.0.0.3"}, port=0, interval_s=0.02)
        self.hk.start()
        self.tw.start()

    def peers(self) -> list[PeerOut]:
        return [
            PeerOut(
                circuit="sha-sin-hk", site="singapore", endpoint=self.hk.endpoints()["sha-sin-hk"]
            ),
            PeerOut(
                circuit="sha-sin-tw", site="singapore", endpoint=self.tw.endpoints()["sha-sin-tw"]
            ),
        ]

    def close(self) -> None:
        self.hk.close()
        self.tw.close()


@pytest.fixture
def far() -> Iterator[Far]:
    ends = Far()
    yield ends
    ends.close()


def shanghai(sink: RecordingRoutes) -> SiteLinks:
    near = Prober({"sha-sin-hk": "127.0.0.1", "sha-sin-tw": "127.0.0.1"}, port=0, interval_s=0.02)
    # 0.5 s of silence rather than the default 0.16 s: a loaded test host may pause the far
    # ends' threads for a tenth of a second, which must not move the routes here
    return SiteLinks(near, service_address="10.211.0.1", routes=sink, silence_s=0.5)


def reply(far: Far) -> AgentSyncReply:
    return AgentSyncReply(heartbeat_interval_s=1.0, attempts=[], peers=far.peers(), routes=table())


def test_a_circuit_whose_far_end_dies_is_routed_around_by_the_probes_alone(far: Far) -> None:
    sink = RecordingRoutes()
    links = shanghai(sink)
    try:
        links.delivered(reply(far))
        links.start()
        assert sink.via("10.211.0.2") == "127.0.0.2"
        wait_until(lambda: links.prober.snapshot()[0].received >= 25)
        assert links.route_statistics() is not None
        assert links.route_statistics().silent == frozenset()  # type: ignore[union-attr]
        far.hk.close()  # sha-sin-hk falls silent; nobody syncs
        wait_until(lambda: sink.via("10.211.0.2") == "127.0.0.3", timeout=5)
        stats = links.route_statistics()
        assert stats is not None and stats.silent == {"sha-sin-hk"}
        assert stats.local_switches == 1
    finally:
        links.close()


def test_the_routes_move_while_a_sync_hangs_on_a_server_that_does_not_answer(
    far: Far, tmp_path: Path
) -> None:
    """The server is cut off: the agent's sync waits on it (here until released), and the
    routes move all the same."""
    sink = RecordingRoutes()
    links = shanghai(sink)
    first = threading.Event()
    hanging = threading.Event()
    release = threading.Event()

    class HangingServer:
        def agent_sync(
            self, site: str, body: AgentSync, *, timeout_s: float | None = None
        ) -> AgentSyncReply:
            if not first.is_set():
                first.set()
                return reply(far)
            hanging.set()
            release.wait(timeout=30)
            raise UnavailableError("the server did not answer")

        def close(self) -> None:
            pass

    clock = ManualClock(1_000.0)  # the agent's turns
    agent = Agent(
        "shanghai",
        LocalBackend("shanghai", {"H100": 1}, tmp_path),
        "http://unused",
        "t",
        clock=clock,
        link=HangingServer(),
        links=links,
    )
    try:
        agent.step()  # the first sync: the table and the far ends
        links.start()
        assert sink.via("10.211.0.2") == "127.0.0.2"
        wait_until(lambda: links.prober.snapshot()[0].received >= 25)
        clock.advance(1.0)  # a heartbeat later: the next sync is due
        syncing = threading.Thread(target=agent.step)  # blocks in the hanging sync
        syncing.start()
        wait_until(hanging.is_set)
        far.hk.close()
        wait_until(lambda: sink.via("10.211.0.2") == "127.0.0.3", timeout=5)
        assert syncing.is_alive()  # the sync is still waiting on the server
        release.set()
        syncing.join(timeout=10)
        assert agent.statistics().syncs_failed == 1
    finally:
        release.set()
        agent.shutdown()
