from pathlib import Path

import pytest

from onecluster.fabric import load_fabric
from onecluster.model import Fabric
from onecluster.topology import check_objectives, paths_between, route

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def three() -> Fabric:
    return load_fabric(ROOT / "examples/fabrics/three-site.yaml")


@pytest.fixture(scope="module")
def metro() -> Fabric:
    return load_fabric(ROOT / "examples/fabrics/four-site-metro.yaml")


def test_diverse_parallel_circuits_give_primary_and_backup(three: Fabric) -> None:
    r = route(three, "shanghai", "singapore")
    assert r.primary is not None and r.backup is not None
    assert r.primary.circuits == ("sha-sin-hk",)
    assert r.backup.circuits == ("sha-sin-tw",)
    assert (r.primary.rtt_ms, r.backup.rtt_ms) == (68, 71)


def test_backup_avoids_the_primarys_risk_groups(three: Fabric) -> None:
    r = route(three, "shanghai", "tokyo")
    assert r.primary is not None and r.backup is not None
    assert r.primary.circuits == ("sha-tyo",)
    assert r.backup.relayed
    assert r.backup.sites == ("shanghai", "singapore", "tokyo")
    assert r.backup.circuits == ("sha-sin-hk", "sin-tyo")
    assert r.backup.rtt_ms == 68 + 72
    assert r.primary.disjoint_from(r.backup)


def test_a_cut_circuit_moves_the_primary_and_the_backup_relays(three: Fabric) -> None:
    r = route(three, "shanghai", "singapore", down={"sha-sin-hk"})
    assert r.primary is not None and r.backup is not None
    assert r.primary.circuits == ("sha-sin-tw",)
    assert r.backup.circuits == ("sha-tyo", "sin-tyo")  # through Tokyo
    both = route(three, "shanghai", "singapore", down={"sha-sin-hk", "sha-sin-tw"})
    assert both.primary is not None
    assert both.primary.sites == ("shanghai", "tokyo", "singapore")
    assert both.backup is None  # one more failure cuts the pair


def test_no_path_means_no_route(three: Fabric) -> None:
    cut = {"sha-sin-hk", "sha-sin-tw", "sha-tyo"}
    assert paths_between(three, "shanghai", "tokyo", down=cut) == []
    r = route(three, "shanghai", "tokyo", down=cut)
    assert r.primary is None and r.backup is None


def test_metro_objectives_hold_on_the_backup_too(metro: Fabric) -> None:
    checks = {(c.a, c.b): c for c in check_objectives(metro)}
    east_west = checks[("metro-east", "metro-west")]
    assert east_west.primary_rtt_ms == pytest.approx(0.45)
    assert east_west.backup_rtt_ms == pytest.approx(0.35 + 0.40)
    assert east_west.verdict == "ok"


def test_a_plan_that_holds_only_on_the_primary_is_flagged(three: Fabric) -> None:
    # Shanghai-Tokyo must stay under 40 ms: 26 ms direct, but 140 ms on the backup.
    [check] = check_objectives(three)
    assert (check.a, check.b) == ("shanghai", "tokyo")
    assert check.verdict == "primary-only"
    assert check.backup_rtt_ms == 140
