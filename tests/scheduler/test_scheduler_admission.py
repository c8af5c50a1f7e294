"""Admission: a typo in a job's dataset is refused, never placed without locality."""

from __future__ import annotations

from dataclasses import replace

import pytest

from onecluster.errors import ImpossibleJobError
from onecluster.model import Dataset, Fabric, JobSpec
from onecluster.scheduler import Scheduler


def test_an_undeclared_dataset_is_refused_naming_the_known_ones(small: Fabric) -> None:
    fabric = replace(
        small,
        datasets=(
            Dataset(name="corpus", size_bytes=10, sites=frozenset({"a"})),
            Dataset(name="images", size_bytes=10, sites=frozenset({"b"})),
        ),
    )
    spec = JobSpec(team="t1", gpus=8, duration_s=60, dataset="nosuch-ds")
    with pytest.raises(ImpossibleJobError, match="dataset 'nosuch-ds' is not declared") as caught:
        Scheduler(fabric).admit(spec)
    assert caught.value.hint is not None and "corpus, images" in caught.value.hint
    Scheduler(fabric).admit(replace(spec, dataset="corpus"))
    Scheduler(fabric).admit(replace(spec, dataset=None))


def test_a_fabric_without_datasets_says_there_are_none(small: Fabric) -> None:
    with pytest.raises(ImpossibleJobError) as caught:
        Scheduler(small).admit(JobSpec(team="t1", gpus=1, duration_s=60, dataset="corpus"))
    assert caught.value.hint is not None and "known datasets: none" in caught.value.hint


def test_a_registered_dataset_is_known_beside_the_declared_ones(small: Fabric) -> None:
    spec = JobSpec(team="t1", gpus=1, duration_s=60, dataset="scanned")
    Scheduler(small).admit(spec, datasets={"scanned"})
    with pytest.raises(ImpossibleJobError, match="nor registered") as caught:
        Scheduler(small).admit(replace(spec, dataset="scaned"), datasets={"scanned"})
    assert caught.value.hint is not None and "known datasets: scanned;" in caught.value.hint
