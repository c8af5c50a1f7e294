from pathlib import Path

import pytest

from onecluster.errors import ValidationError
from onecluster.fabric import load_fabric
from onecluster.lab import BRIDGE_IP, LabState, plan_lab
from onecluster.lab._state import ProcessRecord

ROOT = Path(__file__).resolve().parents[2]
THREE = load_fabric(ROOT / "examples/fabrics/three-site.yaml")


def test_every_site_gets_a_namespace_and_every_circuit_a_pair_of_addresses() -> None:
    plan = plan_lab(THREE, scale=0.05)
    assert [s.netns for s in plan.sites] == ["oclab-shanghai", "oclab-singapore", "oclab-tokyo"]
    assert [s.service_ip for s in plan.sites] == ["10.211.0.1", "10.211.0.2", "10.211.0.3"]
    assert all(s.mgmt_ip.startswith("10.210.0.") and s.mgmt_ip != BRIDGE_IP for s in plan.sites)
    hk = plan.circuit("sha-sin-hk")
    assert (hk.device, hk.a_ip, hk.b_ip) == ("sha-sin-hk", "10.212.0.1", "10.212.0.2")
    assert hk.address_of("singapore") == "10.212.0.2"
    assert hk.peer_of("singapore") == "10.212.0.1"
    assert hk.one_way_ms == 34 and hk.loss == 0.0001
    assert hk.rate_bps == pytest.approx(50e6)
    assert plan.circuit("sin-tyo").rate_bps == pytest.approx(100e6)  # 2 Gbit/s × 0.05
    assert hk.limit_bytes >= 50e6 / 8 * 0.068  # a bandwidth-delay product of queue
    assert [c.circuit for c in plan.between("singapore", "shanghai")] == [
        "sha-sin-hk",
        "sha-sin-tw",
    ]
    assert {c.circuit for c in plan.of_site("tokyo")} == {"sha-tyo", "sin-tyo"}


def test_a_lab_this_host_cannot_build_is_refused_with_the_reason() -> None:
    with pytest.raises(ValidationError, match="lab name"):
        plan_lab(THREE, name="Lab-With-A-Long-Name")
    with pytest.raises(ValidationError, match="scale"):
        plan_lab(THREE, scale=2)
    with pytest.raises(ValidationError, match="at least 1 Mbit/s"):
        plan_lab(THREE, scale=1e-4)
    with pytest.raises(ValidationError, match="MTU"):
        plan_lab(THREE, mtu=100)
    plan = plan_lab(THREE)
    with pytest.raises(ValidationError, match="no site 'osaka'"):
        plan.site("osaka")
    with pytest.raises(ValidationError, match="no circuit joins"):
        plan_lab(load_fabric(ROOT / "examples/fabrics/four-site-metro.yaml")).between(
            "metro-east", "regional"
        )


def test_the_state_file_round_trips_and_a_damaged_one_is_refused(tmp_path: Path) -> None:
    assert LabState.load(tmp_path) is None
    state = LabState(name="oclab", fabric="/x/fabric.yaml", scale=0.05, mtu=1500)
    state.netns.append("oclab-tokyo")
    state.emulators["sin-tyo"] = ProcessRecord(pid=12, log="/x/c3.log")
    state.sites_down["tokyo"] = ["sin-tyo"]
    state.save(tmp_path)
    assert (tmp_path / "state.json").stat().st_mode & 0o777 == 0o600
    assert LabState.load(tmp_path) == state
    (tmp_path / "state.json").write_text('{"version": 99}')
    with pytest.raises(ValidationError, match="version 99"):
        LabState.load(tmp_path)
    (tmp_path / "state.json").write_text('{"version": 1, "name": "x"}')
    with pytest.raises(ValidationError, match="damaged"):
        LabState.load(tmp_path)
    (tmp_path / "state.json").write_text("{not json")
    with pytest.raises(ValidationError, match="cannot read"):
        LabState.load(tmp_path)
