"""A fabric file with absurd counts or hidden characters is refused, naming the line."""

from __future__ import annotations

import pytest

from onecluster.errors import FabricError
from onecluster.fabric import parse_fabric

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
datasets:
  - {name: d, size_gb: 10, sites: [a]}
"""


@pytest.mark.parametrize(
    ("old", "new", "line", "words"),
    [
        ("count: 8,", "count: 100000000000000000000000,", 7, "above the limit of 1e+06"),
        ("count: 4}", "count: 1000001}", 12, "GPU count of pool H100 is 1e+06"),
        ("cost_per_gpu_hour: 2", "cost_per_gpu_hour: inf", 7, "finite"),
        ("cost_per_gpu_hour: 2", "cost_per_gpu_hour: 1e300", 7, "cost per GPU-hour"),
        ("quota: {H100: 4}", "quota: {H100: 100000000000000000000000}", 16, "quota of team t"),
        ("size_gb: 10", "size_gb: 1e30", 18, "size of dataset d"),
        ("capacity_gbps: 1,", "capacity_gbps: inf,", 14, "capacity_gbps"),
        ("rtt_ms: 10", "rtt_ms: nan", 14, "rtt_ms"),
        ("region: r1", 'region: "r1\\u202e"', 3, "U+202E"),
        ("jurisdiction: SG", 'jurisdiction: "S\\u2066G"', 8, "U+2066"),
        ("gpu_type: H100, count: 8", 'gpu_type: "H100\\u200b", count: 8', 7, "U+200B"),
        ("fabric: tiny", 'fabric: "tiny\\ttab"', 1, "U+0009"),
    ],
)
def test_absurd_counts_and_hidden_characters_name_their_line(
    old: str, new: str, line: int, words: str
) -> None:
    assert old in GOOD
    with pytest.raises(FabricError) as caught:
        parse_fabric(GOOD.replace(old, new), source="f.yaml")
    assert caught.value.message.startswith(f"f.yaml:{line}: "), caught.value.message
    assert words in caught.value.message


def test_the_bounds_leave_big_real_fabrics_alone() -> None:
    big = GOOD.replace("count: 8,", "count: 200000,").replace("size_gb: 10", "size_gb: 5000000")
    fabric = parse_fabric(big)
    assert fabric.site("a").total_gpus == 200_000
