"""Link state and routing in the server: the LinkBoard on virtual time, and the same through
the real API (agents' syncs with probe reports, /links, /routes, /links/check, /events)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import httpx
import pytest
from tests.server.conftest import RunningServer

from onecluster.errors import AuthError, ForbiddenError, ValidationError
from onecluster.fabric import load_fabric
from onecluster.schema import LinkReport, ProbeSample
from onecluster.server._links import LinkBoard

FABRIC = load_fabric(Path(__file__).resolve().parents[2] / "examples/fabrics/three-site.yaml")
RTT = {c.name: c.rtt_ms for c in FABRIC.circuits}
ENDS = {
    "sha-sin-hk": ("shanghai", "singapore"),
    "sha-sin-tw": ("shanghai", "singapore"),
    "sha-tyo": ("shanghai", "tokyo"),
    "sin-tyo": ("singapore", "tokyo"),
}


class Probes:
    """Both ends of every circuit probing ten times a second, on virtual time."""

    def __init__(self) -> None:
        self.seq: dict[tuple[str, str], int] = {}
        self.cut: set[str] = set()

    def report(self, site: str, start: float, end: float) -> list[LinkReport]:
        """Reports of ``site`` for probes sent in [start, end), as seen at ``end``."""
        reports = []
        for circuit, (a, b) in ENDS.items():
            if site not in (a, b):
                continue
            samples = []
            t = start
            while t < end - 1e-9:
                key = (circuit, site)
                seq = self.seq.get(key, 0)
                self.seq[key] = seq + 1
                rtt = None if circuit in self.cut else RTT[circuit]
                samples.append(ProbeSample(seq=seq, age_s=end - t, rtt_ms=rtt))
                t += 0.1
            reports.append(
                LinkReport(
                    circuit=circuit,
                    endpoint=f"10.212.0.{1 if site == a else 2}:7000",
                    rtt_min_ms=RTT[circuit],
                    samples=samples,
                )
            )
        return reports


def feed(
    board: LinkBoard,
    probes: Probes,
    start: float,
    end: float,
    sites: Iterable[str] = ("shanghai", "singapore", "tokyo"),
) -> list[str]:
    alerts = []
    t = start
    while t < end:
        for site in sites:
            alerts += board.report(
                site,
                f"agent-{site}",
                probes.report(site, t, t + 1.0),
                service_address=None,
                now=t + 1.0,
            )
        t += 1.0
    return [a.kind for a in alerts]


def test_circuits_come_up_then_a_cut_reroutes_and_a_heal_brings_it_back() -> None:
    board, probes = LinkBoard(FABRIC), Probes()
    kinds = feed(board, probes, 0.0, 3.0)
    assert kinds.count("link_up") == 4
    assert all(state == "up" for state in board.statistics().states.values())
    version = board.statistics().route_version
    probes.cut = {"sha-sin-hk", "sha-sin-tw"}
    kinds = feed(board, probes, 3.0, 5.0)
    assert kinds.count("link_down") == 2 and "route_changed" in kinds
    assert board.down_circuits() == {"sha-sin-hk", "sha-sin-tw"}
    assert board.circuit_load() == {"sha-sin-hk": 1.0, "sha-sin-tw": 1.0}
    sh = {r.dst: r for r in board.routes("shanghai").routes}
    assert sh["singapore"].next_circuit == "sha-tyo" and sh["singapore"].sites == [
        "shanghai",
        "tokyo",
        "singapore",
    ]
    assert board.statistics().route_version == version + 1
    probes.cut = set()
    kinds = feed(board, probes, 5.0, 8.0)
    assert "link_up" not in kinds  # 3 s of replies is not yet 5 s of steady ones
    kinds = feed(board, probes, 8.0, 12.0)
    assert kinds.count("link_up") == 2 and "route_changed" in kinds
    assert board.routes("shanghai").routes[0].next_circuit == "sha-sin-hk"


def test_one_end_seeing_the_cut_is_enough() -> None:
    board, probes = LinkBoard(FABRIC), Probes()
    feed(board, probes, 0.0, 3.0)
    probes.cut = {"sha-tyo"}
    feed(board, probes, 3.0, 5.0, sites=["shanghai"])  # only Shanghai's probes fail
    probes.cut = set()
    feed(board, probes, 3.0, 5.0, sites=["singapore", "tokyo"])
    assert board.statistics().states["sha-tyo"] == "down"


def test_resent_samples_are_ignored_and_a_new_agent_starts_afresh() -> None:
    board, probes = LinkBoard(FABRIC), Probes()
    feed(board, probes, 0.0, 3.0)
    again = probes.report("shanghai", 3.0, 4.0)
    board.report("shanghai", "agent-shanghai", again, service_address=None, now=4.0)
    board.report("shanghai", "agent-shanghai", again, service_address=None, now=4.0)  # a retry
    assert all(s == "up" for s in board.statistics().states.values())
    probes.seq = {}  # a restarted agent numbers its probes from 0 again
    fresh = probes.report("shanghai", 4.0, 5.0)
    board.report("shanghai", "agent-shanghai-2", fresh, service_address=None, now=5.0)
    [view] = [e for e in board.links(5.0)[0].ends if e.site == "shanghai"]
    assert view.state == "up"


def test_ends_that_stop_reporting_go_stale_and_the_circuit_unknown() -> None:
    board, probes = LinkBoard(FABRIC, stale_s=5.0), Probes()
    feed(board, probes, 0.0, 3.0)
    alerts = board.refresh(20.0)
    assert {a.kind for a in alerts} == {"link_unknown"}
    assert set(board.statistics().states.values()) == {"unknown"}
    assert board.down_circuits() == frozenset()  # unknown circuits are not routed around


def test_a_report_about_another_sites_circuit_changes_nothing() -> None:
    board, probes = LinkBoard(FABRIC), Probes()
    good = probes.report("tokyo", 0.0, 1.0)
    stray = LinkReport(circuit="sha-sin-hk", endpoint="10.0.0.1:1")  # not a circuit of Tokyo
    with pytest.raises(ValidationError, match="does not reach it"):
        board.report("tokyo", "a", [*good, stray], service_address="10.211.0.3", now=1.0)
    with pytest.raises(ValidationError, match="does not have"):
        board.check("tokyo", [LinkReport(circuit="nowhere", endpoint="10.0.0.1:1")])
    with pytest.raises(ValidationError, match="twice"):
        board.check("tokyo", [good[0], good[0]])
    assert board.peers("shanghai") == []
    assert all(e.endpoint is None for link in board.links(1.0) for e in link.ends)
    assert board.routes().routes[0].dst_address is None


# -- through the API ------------------------------------------------------------------------


def sync_links(
    server: RunningServer, probes: Probes, site: str, start: float, end: float
) -> object:
    return server.sync(
        site,
        agent_id=f"agent-{site}",
        links=probes.report(site, start, end),
        service_address=f"10.211.0.{['shanghai', 'singapore', 'tokyo'].index(site) + 1}",
    )


def test_agents_learn_peers_and_routes_and_admins_see_links_and_events(
    server: RunningServer,
) -> None:
    probes = Probes()
    for t in (0.0, 1.0, 2.0):
        server.clock.set(server.clock.now() + 1.0)
        for site in ("shanghai", "singapore", "tokyo"):
            reply = sync_links(server, probes, site, t, t + 1.0)
    assert {p.circuit: p.site for p in reply.peers} == {
        "sha-tyo": "shanghai",
        "sin-tyo": "singapore",
    }  # type: ignore[attr-defined]
    admin = server.admin()
    links = {link.circuit: link for link in admin.links()}
    assert links["sha-sin-hk"].state == "up"
    assert {e.site for e in links["sha-sin-hk"].ends} == {"shanghai", "singapore"}
    routes = admin.routes("shanghai")
    to_sg = next(r for r in routes.routes if r.dst == "singapore")
    assert (to_sg.next_circuit, to_sg.dst_address) == ("sha-sin-hk", "10.211.0.2")
    assert len(admin.routes().routes) == 6
    checks = {(c.a, c.b): c for c in admin.links_check()}
    assert checks[("shanghai", "tokyo")].verdict == "primary-only"
    assert checks[("shanghai", "tokyo")].measured
    assert not any(c.measured for c in admin.links_check(measured=False))
    events = admin.events(kind="link")
    assert [e.kind for e in events].count("link_up") == 4
    newer = admin.events(after=events[-1].id)
    assert all(e.id > events[-1].id for e in newer)


def test_probe_reports_need_the_sites_own_agent_token(server: RunningServer) -> None:
    body = {"agent_id": "x", "links": [{"circuit": "sha-tyo", "endpoint": "1.2.3.4:5"}]}
    r = httpx.post(f"{server.url}/api/v1/agents/tokyo/sync", json=body)
    assert r.status_code == 401
    other = server.token(role="agent", site="singapore")
    r = httpx.post(
        f"{server.url}/api/v1/agents/tokyo/sync",
        json=body,
        headers={"Authorization": f"Bearer {other}"},
    )
    assert r.status_code == 403
    with pytest.raises(ValidationError, match="does not reach it"):
        server.sync("tokyo", links=[LinkReport(circuit="sha-sin-hk", endpoint="1.2.3.4:5")])
    assert server.admin().sites()[2].status == "unknown"  # the refused sync recorded nothing
    with pytest.raises((AuthError, ForbiddenError)):
        server.client("oc_not-a-token").links()


def test_a_circuit_that_is_down_counts_as_full_for_placement(server: RunningServer) -> None:
    server.control.links.report(
        "shanghai",
        "a",
        [
            LinkReport(
                circuit="sha-tyo",
                endpoint="1.2.3.4:5",
                samples=[
                    ProbeSample(seq=i, age_s=2.0 - i * 0.1, rtt_ms=None if i > 5 else 26.0)
                    for i in range(20)
                ],
            )
        ],
        service_address=None,
        now=server.clock.now(),
    )
    assert server.control.links.circuit_load() == {"sha-tyo": 1.0}
