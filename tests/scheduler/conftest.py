"""Shared fabric and helpers for the scheduler's tests."""

from __future__ import annotations

import pytest

from onecluster.fabric import parse_fabric
from onecluster.model import Fabric

SMALL = """\
fabric: small
sites:
  - name: a
    region: r1
    jurisdiction: CN
    pools: [{gpu_type: H100, count: 8, cost_per_gpu_hour: 1}]
  - name: b
    region: r2
    jurisdiction: SG
    pools: [{gpu_type: H100, count: 8, cost_per_gpu_hour: 3}]
  - name: c
    region: r3
    jurisdiction: JP
    pools: [{gpu_type: L40S, count: 4, cost_per_gpu_hour: 1}]
circuits:
  - {name: a-b, between: [a, b], capacity_gbps: 1, rtt_ms: 60}
  - {name: b-c, between: [b, c], capacity_gbps: 1, rtt_ms: 30}
  - {name: a-c, between: [a, c], capacity_gbps: 1, rtt_ms: 30}
teams:
  - {name: t1, home_site: a, quota: {H100: 8}}
  - {name: t2, home_site: b, quota: {H100: 8}}
  - {name: t3, home_site: c, weight: 3, quota: {L40S: 4}}
"""


@pytest.fixture
def small() -> Fabric:
    return parse_fabric(SMALL, source="small.yaml")
