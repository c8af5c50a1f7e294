"""Fit the shipped workload generator to the Alibaba GPU trace v2023.

Reads ``../shared/data/traces/alibaba_v2023_pods.csv`` (or the path given as the first
argument), keeps the GPU pods the trace reader keeps (``onecluster.workload.read_alibaba``),
and fits, over the *steady window* (pods created from the 1st percentile of creation time on:
the trace's first weeks hold a few dozen long-lived services created months apart):

* job size — the empirical distribution of GPUs per job;
* duration — a lognormal by maximum likelihood (mean and standard deviation of ln seconds),
  plus the empirical quantiles and the largest duration (the generator's clip);
* inter-arrival — the mean (an exponential's rate) and 1,001 empirical quantiles (the
  generator samples the inverse CDF between them).

Writes ``src/onecluster/workload/fitted_alibaba_v2023.json`` and prints the figures, which
``docs/workload.md`` quotes.  Run: ``.venv/bin/python benchmarks/fit_workload.py``.
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
import sys
from collections import Counter
from pathlib import Path

from onecluster.workload import read_alibaba

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT.parent / "shared" / "data" / "traces" / "alibaba_v2023_pods.csv"
OUT = ROOT / "src" / "onecluster" / "workload" / "fitted_alibaba_v2023.json"
QUANTILES = 1000


def quantile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolated quantile ``q`` in [0, 1] of already sorted values."""
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def fit(path: Path) -> dict[str, object]:
    jobs = read_alibaba(path)
    cut = jobs[len(jobs) // 100].submit_time
    window = [j for j in jobs if j.submit_time >= cut]
    sizes = Counter(j.gpus for j in window)
    durations = sorted(j.duration_s for j in window)
    logs = [math.log(d) for d in durations]
    arrivals = [j.submit_time for j in window]
    gaps = sorted(b - a for a, b in itertools.pairwise(arrivals))
    n = len(window)
    return {
        "schema": 1,
        "source": "alibaba/clusterdata cluster-trace-gpu-v2023 openb_pod_list_default.csv",
        "jobs": n,
        "window_s": arrivals[-1] - arrivals[0],
        "gpus": {str(k): sizes[k] / n for k in sorted(sizes)},
        "duration": {
            "distribution": "lognormal",
            "mu": statistics.fmean(logs),
            "sigma": statistics.pstdev(logs),
            "mean_s": statistics.fmean(durations),
            "p50_s": quantile(durations, 0.5),
            "p90_s": quantile(durations, 0.9),
            "p99_s": quantile(durations, 0.99),
            "max_s": durations[-1],
        },
        "interarrival": {
            "mean_s": statistics.fmean(gaps),
            "p50_s": quantile(gaps, 0.5),
            "p90_s": quantile(gaps, 0.9),
            "quantiles_s": [round(quantile(gaps, i / QUANTILES), 3) for i in range(QUANTILES + 1)],
        },
        "gpu_seconds_per_job": statistics.fmean(j.gpus * j.duration_s for j in window),
    }


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else TRACE
    if not path.exists():
        print(f"the trace {path} is not here; nothing to fit", file=sys.stderr)
        raise SystemExit(1)
    fitted = fit(path)
    OUT.write_text(json.dumps(fitted, indent=1) + "\n", encoding="utf-8")
    shown = {k: v for k, v in fitted.items() if k != "interarrival"}
    ia = dict(fitted["interarrival"])  # type: ignore[call-overload]
    ia.pop("quantiles_s")
    print(json.dumps({**shown, "interarrival": ia}, indent=1))
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
