"""Link state and routing in the server: the LinkBoard on virtual time, and the same through
the real API (agents' syncs with probe reports, /links, /routes, /links/check, /events)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text
from tests.server.conftest import RunningServer

from onecluster.clock import ManualClock
from onecluster.errors import AuthError, ForbiddenError, ValidationError
from onecluster.fabric import load_fabric
from onecluster.schema import LinkReport, ProbeSample
from onecluster.server import ControlPlane, ServerConfig
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
    """Both ends of every circuit probing ten times a second, on virtual time (the agents'
    clocks read the same as the server's, less ``skew``)."""

    def __init__(self, skew: float = 0.0) -> None:
        self.seq: dict[tuple[str, str], int] = {}
        self.cut: set[str] = set()
        self.skew = skew

    def report(self, site: str, start: float, end: float) -> list[LinkReport]:
        """Reports of ``site`` for probes sent in [start, end)."""
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
                samples.append(ProbeSample(seq=seq, sent_s=t - self.skew, rtt_ms=rtt))
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
    *,
    delay: float = 0.0,
) -> list[str]:
    """Each site syncs every second, its body ``delay`` seconds in transit."""
    alerts = []
    t = start
    while t < end:
        for site in sites:
            alerts += board.report(
                site,
                f"agent-{site}",
                probes.report(site, t, t + 1.0),
                service_address=None,
                clock_s=t + 1.0 - probes.skew,
                now=t + 1.0 + delay,
            )
        t += 1.0
    return [a.kind for a in alerts]


def states(board: LinkBoard) -> dict[str, str]:
    return dict(board.statistics().states)


def test_circuits_warm_up_then_a_cut_reroutes_and_a_heal_brings_it_back() -> None:
    board, probes = LinkBoard(FABRIC), Probes()
    kinds = feed(board, probes, 0.0, 3.0)
    assert "link_up" not in kinds and set(states(board).values()) == {"unknown"}  # warming up
    kinds = feed(board, probes, 3.0, 7.0)
    assert kinds.count("link_up") == 4
    assert set(states(board).values()) == {"up"}
    version = board.statistics().route_version
    probes.cut = {"sha-sin-hk", "sha-sin-tw"}
    kinds = feed(board, probes, 7.0, 9.0)
    assert kinds.count("link_down") == 2 and "route_changed" in kinds
    assert "link_degraded" not in kinds  # straight to down
    assert board.down_circuits() == {"sha-sin-hk", "sha-sin-tw"}
    assert board.circuit_load() == {"sha-sin-hk": 1.0, "sha-sin-tw": 1.0}
    to_sg = {r.dst: r for r in board.routes("shanghai").routes}["singapore"]
    assert to_sg.next_circuit == "sha-tyo"
    assert to_sg.sites == ["shanghai", "tokyo", "singapore"]
    assert board.statistics().route_version == version + 1
    probes.cut = set()
    kinds = feed(board, probes, 9.0, 12.0)
    assert "link_up" not in kinds  # 3 s of replies is not yet 5 s of steady ones
    kinds = feed(board, probes, 12.0, 16.0)
    assert kinds.count("link_up") == 2 and "route_changed" in kinds
    assert board.routes("shanghai").routes[0].next_circuit == "sha-sin-hk"
    taken = [a.kind for a in board.take_alerts()]
    assert taken.count("link_down") == 2 and board.take_alerts() == []  # the outbox, in order


def test_a_peer_agent_restarting_is_not_a_cut() -> None:
    board, probes = LinkBoard(FABRIC, stale_s=5.0, lag_s=3.0), Probes()
    feed(board, probes, 0.0, 7.0)
    restarted = Probes()  # Tokyo's new agent numbers its probes from 0
    kinds: list[str] = []
    seen = []
    for t in range(7, 17):
        # Shanghai's probes of sha-tyo go unanswered while Tokyo's agent is away (7-9 s)
        probes.cut = {"sha-tyo"} if t < 9 else set()
        kinds += feed(board, probes, t, t + 1.0, sites=["shanghai", "singapore"])
        if t >= 9:
            # The new agent's first sync has no probes yet (it learns its peers from the
            # reply); then its probes flow.
            reports = restarted.report("tokyo", t, t + 1.0)
            if t == 9:
                reports = [r.model_copy(update={"samples": []}) for r in reports]
            alerts = board.report(
                "tokyo",
                "agent-tokyo-2",
                reports,
                service_address=None,
                clock_s=t + 1.0,
                now=t + 1.0,
            )
            kinds += [a.kind for a in alerts]
        seen.append(states(board)["sha-tyo"])
    assert set(seen) == {"up"}, list(enumerate(seen, 7))  # no alert, no reroute
    assert not [k for k in kinds if k.startswith("link_") or k == "route_changed"]


def test_one_end_seeing_silence_for_longer_than_the_lag_is_down() -> None:
    # e.g. one end's probes fail while the other's pass (a one-way filter), or one end's
    # tracker holds a flapping circuit down: route around it
    board, probes = LinkBoard(FABRIC, stale_s=5.0, lag_s=3.0), Probes()
    feed(board, probes, 0.0, 7.0)
    probes.cut = {"sha-tyo"}
    feed(board, probes, 7.0, 9.0, sites=["shanghai"])
    probes.cut = set()
    feed(board, probes, 7.0, 9.0, sites=["singapore", "tokyo"])
    assert states(board)["sha-tyo"] == "up"  # the second end's report may be on its way
    for t in range(9, 13):
        probes.cut = {"sha-tyo"}
        feed(board, probes, t, t + 1.0, sites=["shanghai"])
        probes.cut = set()
        feed(board, probes, t, t + 1.0, sites=["singapore", "tokyo"])
    assert states(board)["sha-tyo"] == "down"


def test_a_wall_clock_step_heals_within_the_offset_window() -> None:
    board, probes = LinkBoard(FABRIC), Probes()
    feed(board, probes, 0.0, 7.0)
    # the server's wall clock steps 10 s ahead: for a while probes look 10 s old ...
    feed(board, probes, 7.0, 9.0, delay=10.0)
    # ... but within the offset window the new, larger offset is the only one left
    feed(board, probes, 9.0, 80.0, delay=10.0)
    assert set(states(board).values()) == {"up"}
    probes.cut = {"sha-sin-hk"}
    kinds = feed(board, probes, 80.0, 83.0, delay=10.0)
    assert "link_down" in kinds


def test_samples_without_the_agents_clock_are_left_out() -> None:
    board, probes = LinkBoard(FABRIC), Probes()
    reports = probes.report("tokyo", 0.0, 1.0)
    [reason] = board.refusals("tokyo", reports, clocked=False)
    assert "probe_clock_s" in reason
    board.report("tokyo", "a", reports, service_address=None, clock_s=None, now=1.0)
    assert {p.circuit for p in board.peers("shanghai")} == {"sha-tyo"}  # endpoints taken
    assert all(e.sent == 0 or e.state == "unknown" for link in board.links(1.0) for e in link.ends)


def test_a_site_gone_silent_is_judged_by_the_other_end_after_the_lag() -> None:
    board, probes = LinkBoard(FABRIC, stale_s=5.0, lag_s=3.0), Probes()
    feed(board, probes, 0.0, 7.0)
    probes.cut = {"sha-tyo", "sin-tyo"}  # Tokyo is lost: its agent and its circuits
    kinds = feed(board, probes, 7.0, 9.0, sites=["shanghai", "singapore"])
    assert states(board)["sha-tyo"] == "up"  # Tokyo's last word is still fresh
    kinds += feed(board, probes, 9.0, 12.0, sites=["shanghai", "singapore"])
    assert states(board)["sha-tyo"] == states(board)["sin-tyo"] == "down"
    assert "link_degraded" not in kinds


def test_sync_latency_does_not_move_probe_times() -> None:
    board, probes = LinkBoard(FABRIC), Probes(skew=1000.0)  # the agents' clocks are far off
    feed(board, probes, 0.0, 7.0)
    assert set(states(board).values()) == {"up"}
    # one sync arrives half a second late and its first probe was lost: not an outage
    probes.cut = {"sha-tyo"}
    probes_once = probes.report("shanghai", 7.0, 7.1)
    probes.cut = set()
    late = probes_once + probes.report("shanghai", 7.1, 8.0)
    merged = {}
    for r in late:
        merged.setdefault(r.circuit, []).extend(r.samples)
    body = [LinkReport(circuit=c, endpoint="10.212.0.1:7000", samples=v) for c, v in merged.items()]
    kinds = [
        a.kind
        for a in board.report(
            "shanghai", "agent-shanghai", body, service_address=None, clock_s=8.0 - 1000.0, now=8.49
        )
    ]
    assert "link_down" not in kinds
    assert states(board)["sha-tyo"] == "up"


def test_probes_stamped_after_the_agents_clock_are_left_out() -> None:
    # No agent finishes a probe after it built the sync that reports it: such samples (a
    # broken agent) cannot be placed in time, and must not keep a circuit fresh for an hour.
    board, probes = LinkBoard(FABRIC), Probes()
    feed(board, probes, 0.0, 7.0)
    future = [
        r.model_copy(
            update={"samples": [s.model_copy(update={"sent_s": 3600.0}) for s in r.samples]}
        )
        for r in probes.report("tokyo", 7.0, 8.0)
    ]
    board.report("tokyo", "agent-tokyo", future, service_address=None, clock_s=8.0, now=8.0)
    board.refresh(20.0)  # no agent has reported for 13 s
    assert set(states(board).values()) == {"unknown"}


def test_resent_samples_are_ignored_and_a_new_agent_starts_afresh() -> None:
    board, probes = LinkBoard(FABRIC), Probes()
    feed(board, probes, 0.0, 7.0)
    again = probes.report("shanghai", 7.0, 8.0)
    for _ in range(2):  # the second is a retry
        board.report(
            "shanghai", "agent-shanghai", again, service_address=None, clock_s=8.0, now=8.0
        )
    assert set(states(board).values()) == {"up"}
    probes.seq = {}  # a restarted agent numbers its probes from 0 again
    fresh = probes.report("shanghai", 8.0, 9.0)
    board.report("shanghai", "agent-shanghai-2", fresh, service_address=None, clock_s=9.0, now=9.0)
    [view] = [e for e in board.links(9.0)[0].ends if e.site == "shanghai"]
    assert view.state == "warming"
    assert board.links(9.0)[0].state == "up"  # the other end still vouches for it


def test_ends_that_stop_reporting_go_stale_and_the_circuit_unknown() -> None:
    board, probes = LinkBoard(FABRIC, stale_s=5.0), Probes()
    feed(board, probes, 0.0, 7.0)
    alerts = board.refresh(20.0)
    assert {a.kind for a in alerts} == {"link_unknown"}
    assert set(states(board).values()) == {"unknown"}
    assert board.down_circuits() == frozenset()  # unknown circuits are not routed around


def test_reports_about_other_sites_circuits_are_left_out_and_change_nothing() -> None:
    board, probes = LinkBoard(FABRIC), Probes()
    good = probes.report("tokyo", 0.0, 1.0)
    stray = LinkReport(circuit="sha-sin-hk", endpoint="10.0.0.1:1")  # not a circuit of Tokyo
    nowhere = LinkReport(circuit="nowhere", endpoint="10.0.0.1:1")
    refused = board.refusals("tokyo", [*good, stray, nowhere, good[0]])
    assert len(refused) == 3
    assert "does not reach it" in refused[0] and "does not have" in refused[1]
    assert "twice" in refused[2]
    with pytest.raises(ValidationError, match="does not reach it"):
        board.check("tokyo", [stray])
    board.report(
        "tokyo", "a", [*good, stray, good[0]], service_address="10.211.0.3", clock_s=1.0, now=1.0
    )
    assert board.peers("shanghai") == []  # nothing of sha-sin-hk was taken from Tokyo
    assert [p.circuit for p in board.peers("singapore")] == ["sin-tyo"]  # the good report was
    assert board.routes("shanghai").routes[1].dst_address == "10.211.0.3"


# -- through the API ------------------------------------------------------------------------


def sync_links(
    server: RunningServer, probes: Probes, site: str, start: float, end: float
) -> object:
    return server.sync(
        site,
        agent_id=f"agent-{site}",
        links=probes.report(site, start, end),
        service_address=f"10.211.0.{['shanghai', 'singapore', 'tokyo'].index(site) + 1}",
        probe_clock_s=end,
    )


def test_agents_learn_peers_and_routes_and_admins_see_links_and_events(
    server: RunningServer,
) -> None:
    probes = Probes()
    for t in range(7):  # past the 5 s warm-up
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
    # A report about a circuit that does not reach the site is left out, and the agent told;
    # the rest of the sync counts (a bad --link must never cost a site its jobs).
    reply = server.sync(
        "tokyo",
        links=[
            LinkReport(circuit="sha-sin-hk", endpoint="1.2.3.4:5"),
            LinkReport(circuit="sin-tyo", endpoint="10.212.3.2:61862"),
        ],
    )
    assert len(reply.refused_links) == 1 and "does not reach it" in reply.refused_links[0]
    assert server.admin().sites()[2].status == "up"
    assert [p.circuit for p in server.control.links.peers("singapore")] == ["sin-tyo"]
    assert server.control.links.peers("shanghai") == []
    token = server.token(role="agent", site="tokyo")
    for bad in (
        {"service_address": "10.0.0.1\nroute add default"},
        {"links": [{"circuit": "sin-tyo", "endpoint": "10.212.3.2:99999"}]},
    ):
        r = httpx.post(
            f"{server.url}/api/v1/agents/tokyo/sync",
            json={"agent_id": "x", **bad},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert r.status_code == 400, bad  # nothing that is not an address gets near a kernel
        assert "service_address" in r.text or "endpoint" in r.text
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
                    ProbeSample(seq=i, sent_s=i * 0.1, rtt_ms=None if i > 5 else 26.0)
                    for i in range(20)
                ],
            )
        ],
        service_address=None,
        clock_s=2.0,
        now=server.clock.now(),
    )
    assert server.control.links.circuit_load() == {"sha-tyo": 1.0}


def _cut_by_a_first_leader(config: ServerConfig, clock: ManualClock) -> tuple[Probes, int]:
    """Leader of term 1 on ``config``'s database sees sha-tyo cut and keeps its links; the
    probes, and its route table's version."""
    first, probes = ControlPlane.open(config, clock), Probes()
    first.resume_links(1)
    feed(first.links, probes, 1000.0, 1007.0)
    probes.cut = {"sha-tyo"}
    feed(first.links, probes, 1007.0, 1009.0)
    clock.advance(9.0)
    first.publish_alerts()
    version = first.links.statistics().route_version
    first.close()
    return probes, version


def test_a_new_leader_goes_on_from_the_links_the_one_before_kept(tmp_path: Path) -> None:
    # Two control planes on one database, one after the other (a change of leader): the
    # second judges no circuit again from nothing.
    clock = ManualClock(1000.0)
    config = ServerConfig(fabric=FABRIC, state_dir=tmp_path)
    probes, route_version = _cut_by_a_first_leader(config, clock)
    second = ControlPlane.open(config, clock)
    second.links.stand_by()  # as a replica's lifespan leaves it until it takes office
    assert feed(second.links, probes, 1009.0, 1010.0) == []  # not taken: not yet in office
    second.resume_links(2)
    assert second.links.office == 2 and not second.links.standing_by
    assert states(second.links)["sha-tyo"] == "down"
    assert second.links.statistics().route_version == route_version
    assert second.links.down_circuits() == {"sha-tyo"}
    assert [p.endpoint for p in second.links.peers("shanghai")] == [
        "10.212.0.2:7000"
    ] * 3  # probing never pauses
    kinds = feed(second.links, probes, 1010.0, 1013.0)
    clock.advance(4.0)
    second.publish_alerts()
    assert kinds == []
    assert len(second.store.events(kind_prefix="link_down")) == 1  # sent once, by the first
    second.close()


@pytest.mark.parametrize(
    ("term", "wait_s"),
    [(3, 1.0), (2, 3600.0)],  # a leader between the two that kept nothing; a day later
)
def test_links_a_leader_cannot_vouch_for_are_taken_for_their_damping_only(
    tmp_path: Path, term: int, wait_s: float
) -> None:
    clock = ManualClock(1000.0)
    config = ServerConfig(fabric=FABRIC, state_dir=tmp_path)
    _, route_version = _cut_by_a_first_leader(config, clock)
    second = ControlPlane.open(config, clock)
    if wait_s > 60.0:  # the carry's age is the database's clock: age the row instead
        with second.store.engine.begin() as conn:
            conn.execute(text("UPDATE link_carry SET written_at = written_at - :s"), {"s": wait_s})
    second.resume_links(term)
    assert set(states(second.links).values()) == {"unknown"}
    assert second.links.down_circuits() == frozenset()
    assert second.links.statistics().route_version == route_version + 1
    second.close()


@pytest.mark.parametrize(
    "body",
    [
        '{"version": Infinity, "down": [], "circuits": []}',
        '{"version": 1, "down": "sha-tyo", "circuits": []}',
        "[" * 100_000,
        '{"version": 1, "down": [], "circuits": [{"name": "sha-tyo", "a": "shanghai", '
        '"b": "tokyo", "state": "down", "ends": [{"site": "tokyo", "down": "false", '
        '"penalty": 1, "penalty_age_s": 0}]}]}',
        '{"version": 1, "down": [], "circuits": [{"name": "sha-tyo", "a": "shanghai", '
        '"b": "tokyo", "state": "down", "ends": [{"site": "tokyo", "down": true, '
        '"penalty": NaN, "penalty_age_s": -5}]}]}',
    ],
)
def test_a_damaged_carry_starts_the_links_blank_and_takes_office(tmp_path: Path, body: str) -> None:
    clock = ManualClock(1000.0)
    config = ServerConfig(fabric=FABRIC, state_dir=tmp_path)
    control = ControlPlane.open(config, clock)
    control.store.keep_links([], body, now=1.0)
    control.resume_links(1)
    assert control.links.office == 1
    assert set(states(control.links).values()) == {"unknown"}
    kept = control.store.kept_links()
    assert kept is not None and kept.body != body  # kept again, readable, under term 1
    control.close()


def test_a_replica_that_led_the_term_before_keeps_its_board_and_pending_alerts(
    tmp_path: Path,
) -> None:
    clock = ManualClock(1000.0)
    config = ServerConfig(fabric=FABRIC, state_dir=tmp_path)
    control, probes = ControlPlane.open(config, clock), Probes()
    control.resume_links(4)
    feed(control.links, probes, 1000.0, 1007.0)  # four link_up alerts, not yet stored
    control.links.stand_by()  # its lease lapsed (the database was away); it leads again
    control.resume_links(5)
    ups = control.store.events(kind_prefix="link_up")
    assert len(ups) == 4 and set(states(control.links).values()) == {"up"}
    control.close()


def test_taking_office_again_in_the_same_term_keeps_the_board(tmp_path: Path) -> None:
    # Taking office failed after the links were resumed (the pending queue's read, say) and
    # the next pass tries again: the board is not resumed a second time from its own carry.
    clock = ManualClock(1000.0)
    config = ServerConfig(fabric=FABRIC, state_dir=tmp_path)
    _cut_by_a_first_leader(config, clock)
    second = ControlPlane.open(config, clock)
    second.resume_links(2)
    second.resume_links(2)
    assert states(second.links)["sha-tyo"] == "down"
    second.close()
