"""Unified vs separate vs FIFO scheduling on the three-site fabric (1,200 GPUs).

Workloads:

* **alibaba** (when ``../shared/data/traces/alibaba_v2023_pods.csv`` is present): the GPU
  pods of the Alibaba v2023 trace (``onecluster.workload.read_alibaba``).  The first 1 % of
  arrivals are dropped (a few dozen services created months before the rest); durations are
  clipped to 2 h (the trace's p90) so the run is not one long tail; the trace's GPU models map
  to the fabric's types as ``GPU_MAP`` below (the default pod list has no ``gpu_spec``, so
  in practice every pod accepts any type).  Team = ``("llm", "vision", "speech")[crc32(pod
  name) % 3]`` (about a third each), home site = that team's home in the fabric (Shanghai,
  Singapore, Tokyo).
* **generated** (always): ``--jobs`` jobs from the generator fitted to the same trace,
  teams drawn uniformly, same clip.
* **shaped** (always): ``--shaped-jobs`` (82,000) jobs with the shape of a production trace
  (``onecluster.workload.shaped``: heavy-tailed durations up to 1,285 h, 93 % one-GPU jobs,
  one team submitting half, bursts, 15 teams with home sites that the fabric does not
  declare, so each gets a *derived* guarantee).  Nothing is clipped.

Goals (issue 16), checked on every workload: mean wait unified ÷ separate ≤ 0.5; every team
with ≥ 100 jobs waits ≤ 1.1 × its separate mean wait + 60 s; utilisation over the arrival
window no lower than separate's; and (``--replay-jobs``) 100,000 shaped jobs replay in
under 60 s.

Time scaling: arrivals are compressed so that the *offered load* — the jobs' GPU-seconds
÷ (arrival span × 1,200 GPUs) — is ``--load`` (default 0.8).  An even team split over
sites of 512/384/304 GPUs overloads Tokyo under ``separate`` (each site must serve a third
of the load) while ``unified`` spreads it: that is the pooling effect being measured.

Prints one JSON document and a table.  Run: ``.venv/bin/python benchmarks/bench_policies.py``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from onecluster.fabric import load_fabric
from onecluster.model import Fabric
from onecluster.simulate import SimResult, compare_teams, simulate
from onecluster.workload import (
    TraceJob,
    at_load,
    generate,
    offered_load,
    read_alibaba,
    select_jobs,
    shaped,
)

ROOT = Path(__file__).resolve().parent.parent
FABRIC = ROOT / "examples" / "fabrics" / "three-site.yaml"
TRACE = ROOT.parent / "shared" / "data" / "traces" / "alibaba_v2023_pods.csv"
POLICIES = ("unified", "separate", "fifo")
CLIP_S = 7200.0
#: Trace GPU models → three-site GPU types (G2/G3 are undisclosed Alibaba codes).
GPU_MAP = {
    "P100": "L40S",
    "T4": "L40S",
    "A10": "L40S",
    "V100M16": "A100",
    "V100M32": "A100",
    "G2": "H100",
    "G3": "H800",
}


def alibaba_jobs(fabric: Fabric) -> tuple[TraceJob, ...]:
    teams = tuple(t.name for t in fabric.teams)
    homes = {t.name: t.home_site for t in fabric.teams}
    jobs = read_alibaba(
        TRACE, teams=teams, home_sites=homes, gpu_map=GPU_MAP, max_duration_s=CLIP_S
    )
    return select_jobs(jobs, skip=len(jobs) // 100, rebase=True)


def run(fabric: Fabric, name: str, jobs: Sequence[TraceJob], load: float) -> dict[str, object]:
    scaled, scale = at_load(jobs, fabric.total_gpus, load)
    results: dict[str, SimResult] = {p: simulate(fabric, scaled, p) for p in POLICIES}
    unified, separate = results["unified"], results["separate"]
    teams = compare_teams(unified, separate)
    ratio = unified.mean_wait_s / separate.mean_wait_s if separate.mean_wait_s > 0 else 0.0
    return {
        "workload": name,
        "jobs": len(scaled),
        "time_scale": round(scale, 6),
        "offered_load": round(offered_load(scaled, fabric.total_gpus), 4),
        "policies": {p: r.to_json() for p, r in results.items()},
        "teams": [t.to_json() for t in teams],
        "goals": {
            "wait_ratio": round(ratio, 4),
            "wait_ratio_met": ratio <= 0.5,
            "losing_teams": [t.team for t in teams if t.loses],
            "utilization_met": unified.window_utilization >= separate.window_utilization,
        },
    }


def table(report: dict[str, object]) -> str:
    lines = [
        f"{report['workload']}: {report['jobs']} jobs, arrivals ×{report['time_scale']:.3g}, "
        f"offered load {report['offered_load']:.0%}",
        f"{'policy':<9} {'util':>6} {'steady':>6} {'mean wait':>10} {'p95 wait':>10} "
        f"{'mean JCT':>10} {'preempt':>8} {'lost GPU-h':>10} {'reclaim max':>11} {'wall s':>7}",
    ]
    policies = report["policies"]
    assert isinstance(policies, dict)
    for p, r in policies.items():
        lines.append(
            f"{p:<9} {r['gpu_utilization']:>6.1%} {r['window_utilization']:>6.1%} "
            f"{r['mean_wait_s']:>10.0f} "
            f"{r['p95_wait_s']:>10.0f} {r['mean_jct_s']:>10.0f} {r['preemptions']:>8} "
            f"{r['lost_gpu_s'] / 3600:>10.0f} {r['reclaim_max_s']:>11.0f} {r['sim_wall_s']:>7.2f}"
        )
    lines.append(f"goals: {json.dumps(report['goals'])}")
    lines.append(
        f"{'team':<8} {'jobs':>6} {'wait uni':>9} {'wait sep':>9} {'JCT uni':>9} "
        f"{'JCT sep':>9} {'GPU-h uni':>10} {'GPU-h sep':>10} {'preempt':>7} loses"
    )
    teams = report["teams"]
    assert isinstance(teams, list)
    for t in teams:
        lines.append(
            f"{t['team']:<8} {t['jobs']:>6} {t['wait_s']:>9.0f} {t['wait_base_s']:>9.0f} "
            f"{t['jct_s']:>9.0f} {t['jct_base_s']:>9.0f} {t['gpu_h']:>10.0f} "
            f"{t['gpu_h_base']:>10.0f} {t['preemptions']:>7} {'LOSES' if t['loses'] else ''}"
        )
    return "\n".join(lines)


def replay_speed(fabric: Fabric, n: int, seed: int, load: float) -> dict[str, object]:
    """Wall time of one unified replay of ``n`` shaped jobs (the 100,000-job goal)."""
    jobs, _ = at_load(shaped(n, seed, fabric.site_names), fabric.total_gpus, load)
    result = simulate(fabric, jobs, "unified")
    return {"jobs": n, "sim_wall_s": round(result.sim_wall_s, 2), "met": result.sim_wall_s < 60}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load", type=float, default=0.8, help="offered load (default 0.8)")
    parser.add_argument("--jobs", type=int, default=20_000, help="generated jobs (default 20000)")
    parser.add_argument("--shaped-jobs", type=int, default=82_000, help="shaped jobs (82000)")
    parser.add_argument("--shaped-load", type=float, default=0.78, help="their load (0.78)")
    parser.add_argument("--replay-jobs", type=int, default=100_000, help="0: skip the timing")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    fabric = load_fabric(FABRIC)
    reports = []
    if TRACE.exists():
        reports.append(run(fabric, "alibaba-v2023", alibaba_jobs(fabric), args.load))
    else:
        print(f"(the Alibaba trace is not at {TRACE}: generated workloads only)")
    teams = [t.name for t in fabric.teams]
    homes = {t.name: t.home_site for t in fabric.teams}
    generated = generate(args.jobs, args.seed, teams, home_sites=homes, max_duration_s=CLIP_S)
    reports.append(run(fabric, "generated", generated, args.load))
    if args.shaped_jobs:
        production = shaped(args.shaped_jobs, args.seed, fabric.site_names)
        reports.append(run(fabric, "shaped", production, args.shaped_load))
    speed = (
        replay_speed(fabric, args.replay_jobs, args.seed, args.shaped_load)
        if (args.replay_jobs)
        else None
    )
    document = {"fabric": fabric.name, "gpus": fabric.total_gpus, "runs": reports, "replay": speed}
    print(json.dumps(document, indent=1))
    for r in reports:
        print()
        print(table(r))
    if speed is not None:
        print(f"\nreplay of {speed['jobs']} shaped jobs (unified): {speed['sim_wall_s']} s")


if __name__ == "__main__":
    main()
