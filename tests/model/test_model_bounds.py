"""The domain's bounds and its label rule (what every door shares)."""

from __future__ import annotations

import pytest

from onecluster.errors import FabricError, ValidationError
from onecluster.model import (
    MAX_GPUS,
    Dataset,
    Fabric,
    GpuPool,
    Site,
    Team,
    label_problem,
    name_problem,
)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("", "non-empty"),
        ("x" * 129, "129 characters long"),
        (" x", "blanks"),
        ("x\x00", "U+0000"),
        ("x\x1b[31m", "U+001B"),
        ("x\u202ay", "U+202A"),
        ("x\u202ey", "U+202E"),
        ("x\u2069y", "U+2069"),
        ("x\u200ey", "U+200E"),
        ("x\u061cy", "U+061C"),
        ("x\ufeffy", "U+FEFF"),
        ("x\u2028y", "U+2028"),
    ],
)
def test_a_label_refuses_what_hides_or_reorders_text(value: str, words: str) -> None:
    problem = label_problem("job name", value)
    assert problem is not None and words in problem


@pytest.mark.parametrize(
    "value", ["train", "Train LLaMA 7B", "训练-任务", "H100 SXM", "run #3 — final"]
)
def test_a_label_takes_printable_text_of_any_script(value: str) -> None:
    assert label_problem("job name", value) is None


@pytest.mark.parametrize(
    "build",
    [
        lambda: GpuPool(gpu_type="H100", count=MAX_GPUS + 1),
        lambda: GpuPool(gpu_type="H100", count=8.5),  # type: ignore[arg-type]
        lambda: GpuPool(gpu_type="H100", count=8, cost_per_gpu_hour=float("inf")),
        lambda: GpuPool(gpu_type="H100\u202e", count=8),
        lambda: Team(name="t", home_site="a", quota={"H100": 10**23}),
        lambda: Team(name="t", home_site="a", weight=float("inf")),
        lambda: Dataset(name="d", size_bytes=10**30, sites=frozenset({"a"})),
        lambda: Site(
            name="a",
            region="r\u2067",
            jurisdiction="CN",
            pools=(GpuPool(gpu_type="H100", count=8),),
        ),
    ],
)
def test_absurd_counts_and_hidden_characters_are_refused(build: object) -> None:
    with pytest.raises(ValidationError):
        build()  # type: ignore[operator]


def test_a_fabric_name_is_a_label() -> None:
    site = Site(name="a", region="r", jurisdiction="CN", pools=(GpuPool(gpu_type="H", count=1),))
    with pytest.raises(FabricError, match=r"U\+202E"):
        Fabric(name="prod\u202e", sites=(site,))


@pytest.mark.parametrize("value", ["llm\n", "llm\r\n", "\nllm", "l\u202elm", "LLM", "a" * 64])
def test_a_name_is_the_whole_string_and_nothing_hidden(value: str) -> None:
    assert name_problem("team", value) is not None
    with pytest.raises(ValidationError, match="team name"):
        Team(name=value, home_site="a")
