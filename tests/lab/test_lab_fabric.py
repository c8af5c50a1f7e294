"""The three-site lab end to end (root, slow): measured RTTs against the fabric, a cut of
Shanghai–Singapore under traffic rerouted through Tokyo, a heal, a site lost and restored, a
flapping circuit that does not make routes oscillate, an emulator that dies, and a teardown
that leaves no namespace or process behind."""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Iterator

import pytest
from tests.lab.conftest import THREE_SITES, needs_lab_host, running_lab, wait_for

from onecluster.client import Client
from onecluster.errors import ConflictError
from onecluster.lab import FlowSample, Lab
from onecluster.launch import Launcher
from onecluster.network import link_exists, list_netns, show_routes

pytestmark = [pytest.mark.lab, pytest.mark.slow, needs_lab_host]

FABRIC = THREE_SITES


@pytest.fixture(scope="module")
def lab_and_admin() -> Iterator[tuple[Lab, Client]]:
    with running_lab() as both:
        yield both


@pytest.fixture(scope="module")
def lab(lab_and_admin: tuple[Lab, Client]) -> Lab:
    return lab_and_admin[0]


@pytest.fixture(scope="module")
def admin(lab_and_admin: tuple[Lab, Client]) -> Client:
    return lab_and_admin[1]


def next_circuit(admin: Client, src: str, dst: str) -> str | None:
    return next(r.next_circuit for r in admin.routes(src).routes if r.dst == dst)


def test_1_measured_rtts_match_the_fabric(lab: Lab, admin: Client) -> None:
    wait_for(lambda: all(e.rtt_min_ms for link in admin.links() for e in link.ends), 10, "RTTs")
    for link in admin.links():
        assert link.state == "up"
        for end in link.ends:
            assert end.rtt_min_ms is not None
            # the emulator adds a little processing time, never less than the fabric's RTT
            assert link.rtt_ms - 0.5 <= end.rtt_min_ms <= link.rtt_ms * 1.1 + 2.0, (
                link.circuit,
                end,
            )
    with pytest.raises(ConflictError):
        lab.up(FABRIC)


def test_2_a_cut_under_traffic_reroutes_through_tokyo_and_the_traffic_goes_on(
    lab: Lab, admin: Client
) -> None:
    assert next_circuit(admin, "shanghai", "singapore") == "sha-sin-hk"
    samples: list[tuple[float, FlowSample]] = []

    def flow() -> None:
        for sample in lab.traffic("shanghai", "singapore", seconds=24.0, interval_s=0.25):
            samples.append((time.monotonic(), sample))

    sender = threading.Thread(target=flow)
    sender.start()
    wait_for(lambda: bool(samples) and samples[-1][1].bytes > 1_000_000, 15, "traffic flows")
    before = {c.circuit: c.emulator for c in lab.status().circuits}
    assert lab.cut("shanghai", "singapore") == ["sha-sin-hk", "sha-sin-tw"]
    took = wait_for(
        lambda: next_circuit(admin, "shanghai", "singapore") == "sha-tyo", 10, "reroute"
    )
    assert took < 5.0
    route = next(r for r in admin.routes("shanghai").routes if r.dst == "singapore")
    assert route.sites == ["shanghai", "tokyo", "singapore"]
    netns = lab.status().sites[0].netns
    wait_for(
        lambda: any(
            r["dst"] == "10.211.0.2" and r.get("gateway") == "10.212.2.2"
            for r in show_routes(netns)
        ),
        5,
        "Shanghai's kernel routes Singapore via Tokyo",
    )
    switched = time.monotonic()
    wait_for(
        lambda: samples[-1][0] > switched + 6.0, 15, "six seconds of traffic after the reroute"
    )
    at_switch = next(s.bytes for t, s in samples if t >= switched)
    assert samples[-1][1].bytes - at_switch > 2_000_000  # the same connection carries on
    after = {c.circuit: c.emulator for c in lab.status().circuits}
    for relay in ("sha-tyo", "sin-tyo"):
        b, a = before[relay], after[relay]
        assert b is not None and a is not None
        moved = max(
            a.directions[i]["forwarded_bytes"] - b.directions[i]["forwarded_bytes"] for i in (0, 1)
        )
        assert moved > 2_000_000, relay  # ... over Tokyo's circuits
    kinds = [e.kind for e in admin.events(kind="link")[-6:]]
    assert kinds.count("link_down") >= 2
    assert any("via tokyo" in e.message for e in admin.events(kind="route"))
    sender.join(timeout=40)
    assert samples[-1][1].done
    assert lab.heal("shanghai", "singapore") == ["sha-sin-hk", "sha-sin-tw"]
    wait_for(lambda: next_circuit(admin, "shanghai", "singapore") == "sha-sin-hk", 20, "route back")


def test_3_a_lost_site_comes_back(lab: Lab, admin: Client) -> None:
    assert lab.site_down("tokyo") == ["sha-tyo", "sin-tyo"]
    tokyo = lab.status().sites[2]
    assert tokyo.down and tokyo.processes == 0
    wait_for(lambda: next_circuit(admin, "shanghai", "tokyo") is None, 10, "Tokyo unreachable")
    with pytest.raises(ConflictError):
        lab.site_down("tokyo")
    lab.site_up("tokyo")
    assert next_circuit(admin, "shanghai", "tokyo") == "sha-tyo"


def test_4_a_flapping_circuit_does_not_make_routes_oscillate(lab: Lab, admin: Client) -> None:
    start = admin.routes().version
    lab.flap("shanghai", "tokyo", period_s=5.0, down_s=1.0)
    versions, states = [start], []
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline:
        versions.append(admin.routes().version)
        states.append({link.circuit: link.state for link in admin.links()}["sha-tyo"])
        time.sleep(0.5)
    lab.heal("shanghai", "tokyo")
    changes = sum(1 for a, b in itertools.pairwise(versions) if a != b)
    assert "down" in states  # the flap was seen...
    assert changes <= 2, versions  # ... and the circuit taken out once, not every 5 s
    assert states[-1] == "down"  # held out while it keeps flapping (damping)


def test_5_an_emulator_that_dies_is_a_circuit_down(lab: Lab, admin: Client) -> None:
    status = {c.circuit: c for c in lab.status().circuits}
    emulator = status["sin-tyo"].emulator
    assert emulator is not None
    os.kill(emulator.pid, 9)
    wait_for(
        lambda: {link.circuit: link.state for link in admin.links()}["sin-tyo"] == "down",
        10,
        "seen down",
    )
    dead = {c.circuit: c for c in lab.status().circuits}["sin-tyo"]
    assert dead.emulator is None and "not running" in dead.problem
    lab.heal("singapore", "tokyo")  # starts it again
    assert {c.circuit: c for c in lab.status().circuits}["sin-tyo"].emulator is not None


def test_6_down_all_leaves_nothing_behind(lab: Lab) -> None:
    status = lab.status()
    pids = [s.agent_pid for s in status.sites if s.agent_pid] + [
        c.emulator.pid for c in status.circuits if c.emulator
    ]
    lab.down_all()
    assert [ns for ns in list_netns() if ns.startswith("octest-")] == []
    assert not link_exists("octest-mgmt")
    # a fresh launcher, as a later command would have, sees none of the lab's processes
    launcher = Launcher(lab.dir / "logs", marker=f"{lab.dir}/")
    assert pids and not any(launcher.owns(pid) for pid in pids)
    assert launcher.own_processes() == []
    assert not lab.exists()
