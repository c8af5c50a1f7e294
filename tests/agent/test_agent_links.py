"""The agent's side of links: what it reports from its probes and which routes it programs
from the server's reply (into a recording route sink, a test double of the kernel's)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from onecluster.agent import Agent, AgentConfig, run_agent
from onecluster.agent._links import SiteLinks
from onecluster.backends import LocalBackend
from onecluster.clock import ManualClock
from onecluster.errors import BackendError, ValidationError
from onecluster.network import KernelRoute
from onecluster.schema import AgentSync, AgentSyncReply, PeerOut, RouteOut, RouteTableOut
from onecluster.telemetry import Prober


class RecordingRoutes:
    """A RouteSink that keeps what it was told (or fails when told to)."""

    def __init__(self) -> None:
        self.applied: list[list[KernelRoute]] = []
        self.fail = False

    def apply(self, routes: Sequence[KernelRoute]) -> None:
        if self.fail:
            raise BackendError("cannot program the routes: Nexthop has invalid gateway")
        self.applied.append(list(routes))


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def links() -> Iterator[tuple[SiteLinks, RecordingRoutes, Clock]]:
    prober = Prober({"sha-sin-hk": "127.0.0.1", "sha-tyo": "127.0.0.1"}, port=0)
    sink, clock = RecordingRoutes(), Clock()
    site = SiteLinks(prober, service_address="10.211.0.1", routes=sink, clock=clock)
    yield site, sink, clock
    site.close()


def route(dst: str, circuit: str | None, address: str | None) -> RouteOut:
    return RouteOut(
        src="shanghai",
        dst=dst,
        next_circuit=circuit,
        next_site=dst if circuit else None,
        sites=[],
        circuits=[],
        rtt_ms=None,
        backup_sites=[],
        backup_circuits=[],
        backup_rtt_ms=None,
        dst_address=address,
    )


def reply(*routes: RouteOut, version: int = 1) -> AgentSyncReply:
    return AgentSyncReply(
        heartbeat_interval_s=1.0,
        attempts=[],
        peers=[
            PeerOut(circuit="sha-sin-hk", site="singapore", endpoint="10.212.0.2:7001"),
            PeerOut(circuit="sha-tyo", site="tokyo", endpoint="10.212.2.2:7002"),
        ],
        routes=RouteTableOut(version=version, changed_at=None, down=[], routes=list(routes)),
    )


def wait_until(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def test_routes_lead_to_each_peers_address_on_the_next_circuit(
    links: tuple[SiteLinks, RecordingRoutes, Clock],
) -> None:
    site, sink, _ = links
    site.reports()
    site.delivered(
        reply(
            route("singapore", "sha-sin-hk", "10.211.0.2"),
            route("tokyo", "sha-tyo", "10.211.0.3"),
            route("osaka", None, "10.211.0.4"),
            route("seoul", "sha-tyo", None),  # not announced yet: left alone
        )
    )
    assert sink.applied == [
        [
            KernelRoute(dst="10.211.0.2", via="10.212.0.2", src="10.211.0.1"),
            KernelRoute(dst="10.211.0.3", via="10.212.2.2", src="10.211.0.1"),
            KernelRoute(dst="10.211.0.4", via=None),
        ]
    ]
    peers = {s.circuit: s.peer for s in site.prober.snapshot()}
    assert peers["sha-tyo"] is not None and peers["sha-tyo"].port == 7002


def test_routes_are_programmed_on_change_and_refreshed_now_and_then(
    links: tuple[SiteLinks, RecordingRoutes, Clock],
) -> None:
    site, sink, clock = links
    table = reply(route("singapore", "sha-sin-hk", "10.211.0.2"))
    site.delivered(table)
    site.delivered(table)
    assert len(sink.applied) == 1
    site.delivered(reply(route("singapore", "sha-tyo", "10.211.0.2"), version=2))  # rerouted
    assert sink.applied[-1][0].via == "10.212.2.2"
    clock.now += 11.0
    site.delivered(reply(route("singapore", "sha-tyo", "10.211.0.2"), version=2))
    assert len(sink.applied) == 3  # re-applied: a device that came back lost its routes


def test_a_route_that_cannot_be_programmed_is_retried_on_the_next_sync(
    links: tuple[SiteLinks, RecordingRoutes, Clock],
) -> None:
    site, sink, _ = links
    table = reply(route("singapore", "sha-sin-hk", "10.211.0.2"))
    sink.fail = True
    site.delivered(table)  # logged, not raised
    sink.fail = False
    site.delivered(table)
    assert len(sink.applied) == 1


def test_reports_carry_every_circuit_and_unacknowledged_outcomes_stay(
    links: tuple[SiteLinks, RecordingRoutes, Clock],
) -> None:
    site, _, _ = links
    reports = {r.circuit: r for r in site.reports()}
    assert set(reports) == {"sha-sin-hk", "sha-tyo"}
    assert reports["sha-tyo"].endpoint.startswith("127.0.0.1:")
    assert reports["sha-tyo"].samples == []  # no peer known yet: nothing probed


def test_an_agent_refuses_links_that_are_not_its_sites(tmp_path: Path) -> None:
    fabric = Path(__file__).resolve().parents[2] / "examples/fabrics/three-site.yaml"
    config = AgentConfig(
        site="tokyo",
        server_url="http://127.0.0.1:1",
        token="t",
        fabric_path=fabric,
        links={"sha-sin-hk": "127.0.0.1"},
        work_dir=tmp_path,
    )
    with pytest.raises(ValidationError, match="not a circuit of site tokyo"):
        config.check_links_against_fabric()
    with pytest.raises(ValidationError, match="not a circuit of site tokyo"):
        run_agent(config)
    with pytest.raises(ValidationError, match="IPv4"):
        AgentConfig(
            site="tokyo",
            server_url="http://x",
            token="t",
            pools={"H100": 1},
            links={"sin-tyo": "nope"},
        )
    with pytest.raises(ValidationError, match="service address"):
        AgentConfig(
            site="tokyo", server_url="http://x", token="t", pools={"H100": 1}, apply_routes=True
        )


def test_a_circuit_falling_silent_makes_the_agent_sync_early(tmp_path: Path) -> None:
    far = Prober({"c1": "127.0.0.2"}, port=0)
    endpoint = far.endpoints()["c1"]
    syncs: list[float] = []
    clock = ManualClock(1_000.0)  # the agent's turns; the probes run on real time

    class Link:
        def agent_sync(
            self, site: str, body: AgentSync, *, timeout_s: float | None = None
        ) -> AgentSyncReply:
            syncs.append(clock.now())
            return AgentSyncReply(
                heartbeat_interval_s=1.0,
                attempts=[],
                peers=[PeerOut(circuit="c1", site="b", endpoint=endpoint)],
            )

        def close(self) -> None:
            pass

    near = Prober({"c1": "127.0.0.1"}, port=0)
    agent = Agent(
        "shanghai",
        LocalBackend("shanghai", {"H100": 1}, tmp_path),
        "http://unused",
        "t",
        clock=clock,
        link=Link(),
        links=SiteLinks(near),
    )
    near.start()
    far.start()
    try:
        rest = agent.step()  # the first sync: the reply names c1's far end
        assert rest <= 0.25  # while probing it turns often enough to notice a silence
        wait_until(lambda: near.snapshot()[0].received >= 5)
        far.close()  # the far end falls silent
        wait_until(near.attention)
        for _ in range(3):  # a heartbeat is 1 s; while the circuit wants attention, 0.25 s
            clock.advance(0.25)
            agent.step()
        assert syncs == [1_000.0, 1_000.25, 1_000.5, 1_000.75]
    finally:
        agent.shutdown()  # its last report is one more sync
        far.close()
