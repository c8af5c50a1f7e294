import itertools
import json
import math
import statistics
from importlib import resources

import pytest

from onecluster.errors import ValidationError
from onecluster.workload import FittedWorkload, generate, load_fitted

TEAMS = ("llm", "vision", "speech")


def test_same_seed_same_jobs_other_seed_other_jobs() -> None:
    a = generate(500, 7, TEAMS)
    assert a == generate(500, 7, TEAMS)
    assert a != generate(500, 8, TEAMS)


def test_fitted_figures_ship_in_the_package() -> None:
    raw = json.loads(
        resources.files("onecluster.workload").joinpath("fitted_alibaba_v2023.json").read_text()
    )
    fit = load_fitted()
    assert fit.duration_mu == raw["duration"]["mu"]
    assert math.isclose(sum(fit.gpu_probabilities), 1.0)
    assert len(fit.interarrival_quantiles_s) == 1001
    assert list(fit.interarrival_quantiles_s) == sorted(fit.interarrival_quantiles_s)


def test_distributions_match_the_fitted_figures() -> None:
    fit = load_fitted()
    n = 40_000
    jobs = generate(n, 1, TEAMS, max_duration_s=math.inf)
    for size, p in zip(fit.gpu_sizes, fit.gpu_probabilities, strict=True):
        share = sum(j.gpus == size for j in jobs) / n
        assert abs(share - p) < 0.005 + 0.1 * p
    logs = [math.log(j.duration_s) for j in jobs if j.duration_s > 1.0]
    assert abs(statistics.fmean(logs) - fit.duration_mu) < 0.05
    assert abs(statistics.pstdev(logs) - fit.duration_sigma) < 0.05
    gaps = [b.submit_time - a.submit_time for a, b in itertools.pairwise(jobs)]
    q = fit.interarrival_quantiles_s
    table_mean = statistics.fmean((x + y) / 2 for x, y in itertools.pairwise(q))
    assert abs(statistics.fmean(gaps) - table_mean) / table_mean < 0.05
    assert abs(statistics.median(gaps) - q[500]) / q[500] < 0.05
    teams = {t: sum(j.team == t for j in jobs) / n for t in TEAMS}
    assert all(abs(v - 1 / 3) < 0.02 for v in teams.values())


def test_exponential_arrivals_have_the_fitted_mean_and_time_scale_compresses() -> None:
    fit = load_fitted()
    jobs = generate(20_000, 3, TEAMS, interarrival="exponential", time_scale=10.0)
    mean_gap = jobs[-1].submit_time / (len(jobs) - 1)
    assert abs(mean_gap - fit.interarrival_mean_s / 10.0) / (fit.interarrival_mean_s / 10) < 0.05


def test_options_home_sites_datasets_and_clip() -> None:
    jobs = generate(
        2_000,
        5,
        TEAMS,
        home_sites={"llm": "shanghai"},
        datasets={"cc-zh": 10**9},
        dataset_fraction=0.5,
        max_duration_s=600.0,
    )
    assert all(j.duration_s <= 600.0 for j in jobs)
    assert {j.home_site for j in jobs if j.team == "llm"} == {"shanghai"}
    assert {j.home_site for j in jobs if j.team != "llm"} == {None}
    with_data = [j for j in jobs if j.dataset is not None]
    assert 0.45 < len(with_data) / len(jobs) < 0.55
    assert all(j.dataset_bytes == 10**9 for j in with_data)


@pytest.mark.parametrize(
    "kwargs",
    [{"n": -1}, {"teams": ()}, {"time_scale": 0.0}, {"dataset_fraction": 1.5}],
)
def test_bad_arguments_are_refused(kwargs: dict[str, object]) -> None:
    args: dict[str, object] = {"n": 10, "seed": 0, "teams": TEAMS, **kwargs}
    with pytest.raises(ValidationError):
        generate(**args)  # type: ignore[arg-type]


def test_malformed_fitted_description_is_refused() -> None:
    with pytest.raises(ValidationError, match="malformed"):
        FittedWorkload.from_json({"gpus": {}})
