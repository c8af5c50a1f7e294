"""The TUN link emulator between two real namespaces: delay, loss, cut, heal, flap, death."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.lab.conftest import Echo, needs_lab_host, wait_for

from onecluster.errors import UnavailableError, ValidationError
from onecluster.fabric import load_fabric
from onecluster.lab import TunEmulator, plan_lab
from onecluster.lab._circuits import start_tun_emulator
from onecluster.lab._plan import CircuitPlan, LabPlan, SitePlan
from onecluster.launch import Launcher
from onecluster.network import KernelRoute, KernelRoutes, add_address, link_exists, show_routes

pytestmark = [pytest.mark.lab, needs_lab_host]

ROOT = Path(__file__).resolve().parents[2]


def two_site_plan(a_ns: str, b_ns: str, one_way_ms: float) -> LabPlan:
    base = plan_lab(load_fabric(ROOT / "examples/fabrics/three-site.yaml"))
    sites = (
        SitePlan(
            site="a", index=0, netns=a_ns, service_ip="10.211.0.1", mgmt_ip="", mgmt_host_dev=""
        ),
        SitePlan(
            site="b", index=1, netns=b_ns, service_ip="10.211.0.2", mgmt_ip="", mgmt_host_dev=""
        ),
    )
    circuit = CircuitPlan(
        circuit="ab",
        index=0,
        a="a",
        b="b",
        device="ab",
        a_ip="10.212.0.1",
        b_ip="10.212.0.2",
        one_way_ms=one_way_ms,
        loss=0.0,
        rate_bps=20e6,
        burst_bytes=16384,
        limit_bytes=262144,
        mtu=1500,
    )
    return LabPlan(
        name="octest", scale=base.scale, mtu=1500, bridge="", sites=sites, circuits=(circuit,)
    )


@pytest.fixture
def circuit(netns_pair: tuple[str, str], tmp_path: Path) -> Iterator[tuple[TunEmulator, Echo, str]]:
    a_ns, b_ns = netns_pair
    plan = two_site_plan(a_ns, b_ns, one_way_ms=10.0)
    with Launcher(tmp_path, grace_s=1.0) as launcher:
        emulator, _ = start_tun_emulator(plan, plan.circuits[0], tmp_path, launcher)
        echo = Echo(b_ns, "10.212.0.2")
        yield emulator, echo, a_ns
        echo.close()


def test_the_configured_delay_is_what_a_round_trip_takes(
    circuit: tuple[TunEmulator, Echo, str],
) -> None:
    emulator, echo, a_ns = circuit
    rtts = [r for r in echo.ping(a_ns, 30) if r is not None]
    assert len(rtts) == 30
    assert 20.0 <= min(rtts) < 22.0  # 2 × 10 ms, within the loop's timing
    status = emulator.status()
    assert status.state == "up" and status.delay_ms == (10.0, 10.0)
    assert all(d["forwarded"] >= 30 for d in status.directions)


def test_cut_heal_and_loss(circuit: tuple[TunEmulator, Echo, str]) -> None:
    emulator, echo, a_ns = circuit
    emulator.cut()
    assert emulator.status().state == "cut"
    assert echo.ping(a_ns, 3, timeout_s=0.2) == [None, None, None]
    assert emulator.status().directions[0]["cut"] >= 3
    emulator.heal()
    assert all(r is not None for r in echo.ping(a_ns, 3))
    emulator.request({"op": "set", "loss": [0.5, 0.0]})
    answered = [r for r in echo.ping(a_ns, 60, timeout_s=0.1) if r is not None]
    assert 10 <= len(answered) <= 50  # about half lost on the way out
    with pytest.raises(ValidationError, match="unknown op"):
        emulator.request({"op": "explode"})


@pytest.mark.parametrize(
    ("request_body", "error"),
    [
        ({"op": "set", "loss": [2.0, 0.0]}, "loss must be between"),
        ({"op": "set", "delay_ms": [1e300, 1.0]}, "delay_ms must be between"),
        ({"op": "set", "delay_ms": "12"}, "list of two numbers"),
        ({"op": "set", "delay_ms": [5.0, 5.0], "loss": [0.1, "x"]}, "loss must be a number"),
        ({"op": "flap", "period_s": 1.0}, "down_s must be a number"),
        ({"op": "set", "delay_ms": [10**400, 1.0]}, "OverflowError"),
    ],
)
def test_a_bad_request_is_refused_and_changes_nothing(
    circuit: tuple[TunEmulator, Echo, str], request_body: dict[str, object], error: str
) -> None:
    emulator, echo, a_ns = circuit
    with pytest.raises(ValidationError, match=error):
        emulator.request(request_body)
    status = emulator.status()  # still alive, nothing applied
    assert status.delay_ms == (10.0, 10.0) and status.loss == (0.0, 0.0) and status.state == "up"
    assert all(r is not None for r in echo.ping(a_ns, 3))


def test_a_flapping_circuit_is_down_part_of_each_period(
    circuit: tuple[TunEmulator, Echo, str],
) -> None:
    emulator, echo, a_ns = circuit
    emulator.flap(period_s=1.0, down_s=0.5)
    assert emulator.status().state == "flapping"
    results = echo.ping(a_ns, 40, timeout_s=0.05)
    lost = sum(r is None for r in results)
    assert 8 <= lost <= 32
    with pytest.raises(ValidationError, match="down_s"):
        emulator.flap(period_s=1.0, down_s=2.0)


def test_a_dead_emulator_takes_its_devices_with_it(
    netns_pair: tuple[str, str], tmp_path: Path
) -> None:
    a_ns, b_ns = netns_pair
    plan = two_site_plan(a_ns, b_ns, one_way_ms=1.0)
    launcher = Launcher(tmp_path)
    emulator, process = start_tun_emulator(plan, plan.circuits[0], tmp_path, launcher)
    assert link_exists("ab", a_ns) and link_exists("ab", b_ns)
    os.kill(emulator.pid, signal.SIGKILL)
    wait_for(lambda: launcher.exited() == [(process, 137)], 5, "the emulator is seen to die")
    wait_for(lambda: not link_exists("ab", a_ns), 5, "the TUN device goes with its emulator")
    assert not link_exists("ab", b_ns)
    with pytest.raises(UnavailableError, match="not running"):
        emulator.status()


def test_kernel_routes_are_programmed_in_one_batch(
    netns_pair: tuple[str, str], tmp_path: Path
) -> None:
    a_ns, b_ns = netns_pair
    plan = two_site_plan(a_ns, b_ns, one_way_ms=1.0)
    with Launcher(tmp_path, grace_s=1.0) as launcher:
        start_tun_emulator(plan, plan.circuits[0], tmp_path, launcher)
        add_address("lo", "10.211.0.1/32", a_ns)
        routes = KernelRoutes(a_ns)
        routes.apply(
            [
                KernelRoute(dst="10.211.0.2", via="10.212.0.2", src="10.211.0.1"),
                KernelRoute(dst="10.211.0.9", via=None),
            ]
        )
        table = {r["dst"]: r for r in show_routes(a_ns)}
        assert table["10.211.0.2"]["gateway"] == "10.212.0.2"
        assert table["10.211.0.2"]["prefsrc"] == "10.211.0.1"
        assert table["10.211.0.9"]["type"] == "unreachable"
        routes.apply(
            [KernelRoute(dst="10.211.0.2", via="10.212.0.2", src="10.211.0.1")]
        )  # idempotent
