from pathlib import Path

import pytest

from onecluster.errors import FabricError
from onecluster.fabric import load_fabric, parse_fabric

ROOT = Path(__file__).resolve().parents[2]

GOOD = """\
fabric: tiny
sites:
  - name: a
    region: r1
    jurisdiction: CN
    pools:
      - {gpu_type: H100, count: 8, cost_per_gpu_hour: 2}
  - name: b
    region: r2
    jurisdiction: SG
    pools:
      - {gpu_type: H100, count: 4}
circuits:
  - {name: a-b, between: [a, b], capacity_gbps: 1, rtt_ms: 10}
teams:
  - {name: t, home_site: a, quota: {H100: 4}}
"""


def test_example_fabrics_load() -> None:
    three = load_fabric(ROOT / "examples/fabrics/three-site.yaml")
    assert three.site_names == ("shanghai", "singapore", "tokyo")
    assert three.total_gpus == 1200
    assert three.site("shanghai").controls_export
    assert len(three.circuits_between("shanghai", "singapore")) == 2
    metro = load_fabric(ROOT / "examples/fabrics/four-site-metro.yaml")
    assert len(metro.sites) == 4
    assert metro.objectives[0].max_rtt_ms == 1.0


def test_good_fabric_round_trip() -> None:
    f = parse_fabric(GOOD)
    assert f.team("t") is not None
    assert f.team("t").quota_for("H100") == 4  # type: ignore[union-attr]
    assert f.site("a").pool("H100").cost_per_gpu_hour == 2  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        (GOOD.replace("count: 8", "count: -8"), 7, "GPU count"),
        (GOOD.replace("count: 8", "count: eight"), 7, "whole number"),
        (
            GOOD.replace("jurisdiction: SG", "jurisdiction: SG\n    colour: red"),
            11,
            "unknown field 'colour'",
        ),
        (GOOD.replace("home_site: a", "home_site: z"), 16, "unknown home site 'z'"),
        (GOOD.replace("between: [a, b]", "between: [a, q]"), 14, "unknown site 'q'"),
        (GOOD.replace("quota: {H100: 4}", "quota: {A100: 4}"), 16, "GPU type 'A100'"),
        (GOOD.replace("    region: r2\n", ""), 8, "missing the field 'region'"),
        (GOOD + "  - {name: t, home_site: a}\n", 17, "declared twice"),
        ("sites: [\n", 2, "not valid YAML"),
        # Absurd counts and hidden characters (issue 12)
        (GOOD.replace("count: 8,", "count: 100000000000000000000000,"), 7, "above the limit"),
        (GOOD.replace("count: 4}", "count: 1000001}"), 12, "pool H100 is 1e+06"),
        (GOOD.replace("cost_per_gpu_hour: 2", "cost_per_gpu_hour: inf"), 7, "finite"),
        (GOOD.replace("cost_per_gpu_hour: 2", "cost_per_gpu_hour: 1e300"), 7, "cost per GPU"),
        (GOOD.replace("{H100: 4}", "{H100: 100000000000000000000000}"), 16, "quota of team t"),
        (GOOD + "datasets:\n  - {name: d, size_gb: 1e30, sites: [a]}\n", 18, "dataset d"),
        (GOOD.replace("capacity_gbps: 1,", "capacity_gbps: inf,"), 14, "capacity_gbps"),
        (GOOD.replace("rtt_ms: 10", "rtt_ms: nan"), 14, "rtt_ms"),
        (GOOD.replace("region: r1", 'region: "r1\\u202e"'), 3, "U+202E"),
        (GOOD.replace("jurisdiction: SG", 'jurisdiction: "S\\u2066G"'), 8, "U+2066"),
        (GOOD.replace("gpu_type: H100, count: 8", 'gpu_type: "H\\u200b", count: 8'), 7, "U+200B"),
        (GOOD.replace("fabric: tiny", 'fabric: "tiny\\ttab"'), 1, "U+0009"),
    ],
)
def test_errors_name_line_and_field(text: str, line: int, words: str) -> None:
    with pytest.raises(FabricError) as info:
        parse_fabric(text, source="f.yaml")
    assert info.value.message.startswith(f"f.yaml:{line}:"), info.value.message
    assert words in info.value.message


def test_the_bounds_leave_big_real_fabrics_alone() -> None:
    big = GOOD.replace("count: 8,", "count: 200000,")
    big += "datasets:\n  - {name: d, size_gb: 5000000, sites: [a]}\n"
    fabric = parse_fabric(big)
    assert fabric.site("a").total_gpus == 200_000


def test_unreachable_site_is_refused() -> None:
    text = GOOD.replace(
        "circuits:\n  - {name: a-b, between: [a, b], capacity_gbps: 1, rtt_ms: 10}\n",
        "circuits: []\n",
    )
    with pytest.raises(FabricError, match="cannot be reached"):
        parse_fabric(text, source="f.yaml")


def test_missing_file_and_empty_file(tmp_path: Path) -> None:
    with pytest.raises(FabricError, match="does not exist"):
        load_fabric(tmp_path / "nope.yaml")
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    with pytest.raises(FabricError, match="empty"):
        load_fabric(empty)
