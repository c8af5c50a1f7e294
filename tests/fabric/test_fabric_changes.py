"""A fabric written back as YAML reads back equal, and the diff between two fabrics names
every site, pool, circuit, team, quota, dataset and objective added, removed or changed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from onecluster.fabric import dump_fabric, fabric_diff, load_fabric, parse_fabric
from onecluster.model import (
    Circuit,
    Dataset,
    Fabric,
    GpuPool,
    LatencyObjective,
    Site,
    Team,
)

ROOT = Path(__file__).resolve().parents[2]
THREE = load_fabric(ROOT / "examples" / "fabrics" / "three-site.yaml")

_SITES = ("a", "b", "c", "d-1", "e.2")
_TYPES = ("H100", "A100", "L40S", "MI300X")


@st.composite
def fabrics(draw: st.DrawFn) -> Fabric:
    """Valid fabrics (the loader's own defaults spelled out: a circuit's risk group and an
    objective's reason are never empty)."""
    names = draw(st.lists(st.sampled_from(_SITES), min_size=1, max_size=4, unique=True))
    sites = tuple(
        Site(
            name=n,
            region=draw(st.sampled_from(["cn-east-2", "ap-1", "eu west"])),
            jurisdiction=draw(st.sampled_from(["CN", "SG", "yes", "1.5"])),
            backend=draw(st.sampled_from(["local", "slurm", "kubernetes"])),
            controls_export=draw(st.booleans()),
            pools=tuple(
                GpuPool(
                    gpu_type=t,
                    count=draw(st.integers(1, 100_000)),
                    cost_per_gpu_hour=draw(st.sampled_from([0.0, 1.1, 2.8, 3.25, 1e-5])),
                )
                for t in draw(
                    st.lists(st.sampled_from(_TYPES), min_size=1, max_size=3, unique=True)
                )
            ),
        )
        for n in names
    )
    ends = [(names[i], names[i + 1]) for i in range(len(names) - 1)]
    if len(names) > 2 and draw(st.booleans()):
        ends.append((names[0], names[-1]))
    circuits = tuple(
        Circuit(
            name=f"c{i}",
            a=a,
            b=b,
            capacity_gbps=draw(st.sampled_from([1.0, 2.5, 400.0])),
            rtt_ms=draw(st.sampled_from([0.0, 0.4, 26.0, 72.5])),
            loss=draw(st.sampled_from([0.0, 0.0001, 0.02])),
            distance_km=draw(st.sampled_from([0.0, 2300.0, 7000.5])),
            parallel=draw(st.integers(1, 4)),
            risk_group=draw(st.sampled_from([f"c{i}", "duct-1"])),
        )
        for i, (a, b) in enumerate(ends)
    )
    types = sorted({p.gpu_type for s in sites for p in s.pools})
    teams = tuple(
        Team(
            name=f"t{i}",
            home_site=draw(st.sampled_from(names)),
            weight=draw(st.sampled_from([1.0, 2.0, 0.5])),
            quota=draw(
                st.none()
                | st.dictionaries(st.sampled_from(types), st.integers(0, 1000), max_size=3)
            ),
        )
        for i in range(draw(st.integers(0, 3)))
    )
    datasets = tuple(
        Dataset(
            name=f"ds{i}",
            # As the loader makes them: a number of GB (a float) × 10⁹, rounded.
            size_bytes=round(draw(st.floats(0, 1e7)) * 1e9),
            sites=frozenset(draw(st.lists(st.sampled_from(names), min_size=1, unique=True))),
        )
        for i in range(draw(st.integers(0, 2)))
    )
    objectives = ()
    if len(names) > 1 and draw(st.booleans()):
        objectives = (
            LatencyObjective(
                a=names[0], b=names[1], max_rtt_ms=draw(st.sampled_from([1.0, 40.5])), reason="r"
            ),
        )
    return Fabric(
        name=draw(st.sampled_from(["f", "three-site", "metro.2"])),
        sites=sites,
        circuits=circuits,
        teams=teams,
        datasets=datasets,
        objectives=objectives,
    )


@settings(max_examples=200, deadline=None)
@given(fabrics())
def test_a_fabric_written_back_reads_back_equal(fabric: Fabric) -> None:
    text = dump_fabric(fabric, comment="written by a test\nsecond line")
    assert text.startswith("# written by a test\n# second line\n")
    assert parse_fabric(text) == fabric


def test_the_example_fabric_reads_back_equal() -> None:
    assert parse_fabric(dump_fabric(THREE)) == THREE


@settings(deadline=None)
@given(fabrics())
def test_a_fabric_has_no_change_against_itself(fabric: Fabric) -> None:
    diff = fabric_diff(fabric, fabric)
    assert not diff
    assert diff.summary() == "no change"


@settings(max_examples=200, deadline=None)
@given(fabrics(), fabrics())
def test_the_diff_backwards_swaps_added_and_removed(old: Fabric, new: Fabric) -> None:
    forward, backward = fabric_diff(old, new), fabric_diff(new, old)
    flip = {"added": "removed", "removed": "added", "changed": "changed"}
    assert sorted((c.kind, flip[c.action], c.name) for c in forward.changes) == sorted(
        (c.kind, c.action, c.name) for c in backward.changes
    )
    assert {c.name for c in forward.of("site", "added")} == set(new.site_names) - set(
        old.site_names
    )
    pools_new = {f"{s.name}/{p.gpu_type}" for s in new.sites for p in s.pools}
    pools_old = {f"{s.name}/{p.gpu_type}" for s in old.sites for p in s.pools}
    assert {c.name for c in forward.of("pool", "removed")} == pools_old - pools_new
    for change in forward.of("pool", "changed"):
        assert all(f.old != f.new for f in change.fields)
    assert bool(forward) == (old != new)


def _with_new_site() -> Fabric:
    osaka = Site(
        name="osaka",
        region="ap-northeast-3",
        jurisdiction="JP",
        pools=(GpuPool(gpu_type="H200", count=64, cost_per_gpu_hour=4.0),),
    )
    tokyo = THREE.site("tokyo")
    bigger = replace(
        tokyo,
        pools=(
            GpuPool(gpu_type="H100", count=256, cost_per_gpu_hour=3.2),
            *tokyo.pools[1:],
        ),
    )
    teams = tuple(
        replace(t, quota={**(t.quota or {}), "H100": 96}) if t.name == "vision" else t
        for t in THREE.teams
    )
    return replace(
        THREE,
        sites=(THREE.sites[0], THREE.sites[1], bigger, osaka),
        circuits=(
            *THREE.circuits,
            Circuit(name="tyo-osa", a="tokyo", b="osaka", capacity_gbps=10, rtt_ms=8),
        ),
        teams=teams,
        datasets=THREE.datasets[:2],
    )


def test_the_diff_of_an_onboarded_site_lists_each_change_with_old_and_new_values() -> None:
    diff = fabric_diff(THREE, _with_new_site())
    assert [(c.event_kind, c.name) for c in diff.changes] == [
        ("fabric_site_added", "osaka"),
        ("fabric_pool_changed", "tokyo/H100"),
        ("fabric_pool_added", "osaka/H200"),
        ("fabric_circuit_added", "tyo-osa"),
        ("fabric_quota_changed", "vision/H100"),
        ("fabric_dataset_removed", "speech-ja-10k"),
    ]
    by_name = {c.name: c for c in diff.changes}
    assert by_name["tokyo/H100"].describe() == "pool tokyo/H100 changed: count 192 → 256"
    assert by_name["vision/H100"].describe() == "quota vision/H100 changed: gpus 320 → 96"
    assert by_name["osaka/H200"].describe() == (
        "pool osaka/H200 added (count 64, cost_per_gpu_hour 4)"
    )
    assert by_name["speech-ja-10k"].describe() == (
        "dataset speech-ja-10k removed (size_gb 420, sites tokyo)"
    )
    assert diff.summary() == "3 added, 2 changed, 1 removed"


def test_a_team_declaring_quotas_again_is_one_team_change_and_its_quotas() -> None:
    speech = THREE.team("speech")
    assert speech is not None
    derived = replace(
        THREE, teams=tuple(replace(t, quota=None) if t is speech else t for t in THREE.teams)
    )
    diff = fabric_diff(THREE, derived)
    assert [c.describe() for c in diff.of("team")] == [
        "team speech changed: quota declared → derived"
    ]
    assert sorted(c.name for c in diff.of("quota", "removed")) == [
        "speech/H100",
        "speech/H800",
        "speech/L40S",
    ]


def test_renaming_the_fabric_and_moving_a_circuit_are_changes() -> None:
    moved = replace(
        THREE,
        name="three-site-2",
        circuits=tuple(
            replace(c, rtt_ms=30.5, risk_group="new-duct") if c.name == "sha-tyo" else c
            for c in THREE.circuits
        ),
    )
    diff = fabric_diff(THREE, moved)
    assert [c.describe() for c in diff.changes] == [
        "the fabric changed: name three-site → three-site-2",
        "circuit sha-tyo changed: rtt_ms 26 → 30.5; risk_group route-eastchina-sea → new-duct",
    ]
