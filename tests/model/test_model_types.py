import dataclasses

import pytest

from onecluster.errors import ValidationError
from onecluster.model import Circuit, GpuPool, JobSpec, PriorityClass, Site, Team


def test_domain_types_are_frozen() -> None:
    spec = JobSpec(team="t", gpus=1, duration_s=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.gpus = 2  # type: ignore[misc]


@pytest.mark.parametrize(
    "build",
    [
        lambda: JobSpec(team="t", gpus=0, duration_s=1),
        lambda: JobSpec(team="t", gpus=1, duration_s=0),
        lambda: JobSpec(team="Bad Team", gpus=1, duration_s=1),
        lambda: GpuPool(gpu_type="H100", count=0),
        lambda: Site(name="s", region="r", jurisdiction="x", pools=()),
        lambda: Site(
            name="s",
            region="r",
            jurisdiction="x",
            pools=(GpuPool(gpu_type="H", count=1),),
            backend="yarn",
        ),
        lambda: Circuit(name="c", a="x", b="x", capacity_gbps=1, rtt_ms=1),
        lambda: Circuit(name="c", a="x", b="y", capacity_gbps=1, rtt_ms=1, loss=1.5),
        lambda: Team(name="t", home_site="s", weight=0),
        lambda: Team(name="t", home_site="s", quota={"H100": -1}),
    ],
)
def test_invalid_values_are_refused(build: object) -> None:
    with pytest.raises(ValidationError):
        build()  # type: ignore[operator]


def test_priority_parse() -> None:
    assert PriorityClass.parse(" High ") is PriorityClass.HIGH
    with pytest.raises(ValidationError, match="use one of low, normal, high, critical"):
        PriorityClass.parse("urgent")


def test_team_quota_lookup() -> None:
    t = Team(name="t", home_site="s", quota={"H100": 8})
    assert t.quota_for("H100") == 8
    assert t.quota_for("A100") == 0
    assert Team(name="u", home_site="s", quota=None).quota_for("H100") is None


def test_circuit_bundle_capacity() -> None:
    c = Circuit(name="c", a="x", b="y", capacity_gbps=1, rtt_ms=1, parallel=2)
    assert c.total_gbps == 2
    assert c.bytes_per_second == 2e9 / 8
    assert c.other_end("x") == "y"
