"""Which transfers are exports, and where they may be relayed (pure)."""

from __future__ import annotations

from pathlib import Path

from onecluster.export import is_export, relay_allowed
from onecluster.fabric import load_fabric

FABRIC = Path(__file__).resolve().parents[2] / "examples" / "fabrics" / "three-site.yaml"


def test_only_leaving_a_jurisdiction_that_controls_exports_is_an_export() -> None:
    fabric = load_fabric(FABRIC)
    assert is_export(fabric, "shanghai", "singapore")
    assert is_export(fabric, "shanghai", "tokyo")
    assert not is_export(fabric, "singapore", "shanghai")
    assert not is_export(fabric, "singapore", "tokyo")
    assert not is_export(fabric, "tokyo", "singapore")


def test_a_controlled_site_s_transfers_relay_only_at_home() -> None:
    fabric = load_fabric(FABRIC)
    assert not relay_allowed(fabric, "shanghai", "tokyo")
    assert not relay_allowed(fabric, "shanghai", "singapore")
    assert relay_allowed(fabric, "singapore", "tokyo")
    assert relay_allowed(fabric, "tokyo", "shanghai")
