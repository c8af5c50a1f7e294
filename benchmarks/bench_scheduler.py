"""How fast the scheduler core decides, and how fast the simulator replays.

1. One scheduling pass (``Scheduler.plan``) over 10,000 pending jobs on the three-site
   fabric (1,200 GPUs), with the cluster ~90 % busy and idle (the pass then starts a job on
   every GPU).  Target: < 100 ms.
2. One pass over 100,000 pending jobs on a generated fabric of 20 sites and 10,000 GPUs
   (``big_fabric``: three GPU types, a ring of circuits plus chords, 10 teams with quotas),
   ~90 % busy and idle.  Target: < 1 s.
3. Simulated jobs per second: ``simulate`` of ``--sim-jobs`` generated jobs (default
   20,000) at ``--sim-load`` offered load (default 80 %) on the three-site fabric, per policy.

Pending and running jobs come from the workload generator fitted to the Alibaba trace.
Each measurement runs ``--repeat`` times (default 5; the simulation 3) and the median is
reported.  Prints JSON and a table; asserts nothing about time.
Run: ``.venv/bin/python benchmarks/bench_scheduler.py``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from onecluster.fabric import load_fabric
from onecluster.model import Circuit, Fabric, GpuPool, Site, SitePart, Team
from onecluster.scheduler import (
    Allocation,
    AllocationLedger,
    ClusterView,
    PendingJob,
    PendingQueue,
    PolicyConfig,
    Scheduler,
)
from onecluster.simulate import simulate
from onecluster.workload import at_load, generate

ROOT = Path(__file__).resolve().parent.parent
FABRIC = ROOT / "examples" / "fabrics" / "three-site.yaml"
TYPES = ("H100", "A100", "L40S")


def big_fabric(sites: int = 20, gpus_per_site: int = 500, teams: int = 10) -> Fabric:
    """``sites`` sites of ``gpus_per_site`` GPUs (3 types), a ring of 10G circuits plus 100G
    chords to the site halfway round, and ``teams`` teams with quotas summing to the total."""
    split = (gpus_per_site // 2, gpus_per_site // 4, gpus_per_site - 3 * (gpus_per_site // 4))
    site_list = tuple(
        Site(
            name=f"site-{i:02d}",
            region=f"region-{i:02d}",
            jurisdiction=f"J{i % 5}",
            pools=tuple(GpuPool(gpu_type=t, count=n) for t, n in zip(TYPES, split, strict=True)),
        )
        for i in range(sites)
    )
    circuits = [
        Circuit(
            name=f"ring-{i:02d}",
            a=f"site-{i:02d}",
            b=f"site-{(i + 1) % sites:02d}",
            capacity_gbps=10,
            rtt_ms=5,
        )
        for i in range(sites)
    ]
    circuits += [
        Circuit(
            name=f"chord-{i:02d}",
            a=f"site-{i:02d}",
            b=f"site-{i + sites // 2:02d}",
            capacity_gbps=100,
            rtt_ms=20,
        )
        for i in range(sites // 2)
    ]
    total = {t: n * sites for t, n in zip(TYPES, split, strict=True)}
    team_list = tuple(
        Team(
            name=f"team-{k}",
            home_site=f"site-{(k * sites) // teams:02d}",
            quota={t: n // teams for t, n in total.items()},
        )
        for k in range(teams)
    )
    return Fabric(name="big", sites=site_list, circuits=tuple(circuits), teams=team_list)


def busy_state(
    fabric: Fabric, pending: int, busy: float, seed: int
) -> tuple[AllocationLedger, PendingQueue]:
    """A ledger filling each pool to ``busy`` with 1–8 GPU jobs, and ``pending`` queued jobs."""
    teams = [t.name for t in fabric.teams]
    ledger = AllocationLedger()
    n = 0
    for s in fabric.sites:
        for p in s.pools:
            left = int(p.count * busy)
            while left > 0:
                g = min(8 if n % 3 == 0 else 1, left)
                ledger.add(
                    Allocation(
                        job_id=f"run-{n}",
                        team=teams[n % len(teams)],
                        parts=(SitePart(site=s.name, gpu_type=p.gpu_type, gpus=g),),
                        started_at=0.0,
                        expected_end=600.0 + 60.0 * (n % 100),
                    )
                )
                left -= g
                n += 1
    jobs = generate(pending, seed, teams, max_duration_s=7200)
    queue = PendingQueue.of(
        PendingJob(job_id=f"pend-{i}", spec=j.to_spec(f"pend-{i}"), submitted_at=-j.submit_time)
        for i, j in enumerate(jobs)
    )
    return ledger, queue


def time_pass(
    fabric: Fabric, pending: int, repeat: int, seed: int, busy: float = 0.9
) -> dict[str, object]:
    ledger, queue = busy_state(fabric, pending, busy, seed)
    scheduler = Scheduler(fabric, PolicyConfig(kind="unified"))
    view = ClusterView(running=ledger)
    times = []
    plan = None
    for _ in range(repeat):
        t = time.perf_counter()
        plan = scheduler.plan(view, queue, 0.0)
        times.append(time.perf_counter() - t)
    assert plan is not None
    return {
        "fabric": fabric.name,
        "gpus": fabric.total_gpus,
        "sites": len(fabric.sites),
        "busy": busy,
        "pending": len(queue),
        "running": len(ledger),
        "starts": len(plan.starts),
        "preemptions": len(plan.preemptions),
        "median_ms": round(statistics.median(times) * 1000, 2),
        "min_ms": round(min(times) * 1000, 2),
    }


def time_simulation(jobs: int, repeat: int, seed: int, load: float = 0.8) -> dict[str, object]:
    fabric = load_fabric(FABRIC)
    teams = [t.name for t in fabric.teams]
    homes = {t.name: t.home_site for t in fabric.teams}
    raw = generate(jobs, seed, teams, home_sites=homes, max_duration_s=7200)
    workload, _ = at_load(raw, fabric.total_gpus, load)
    out: dict[str, object] = {"jobs": jobs, "offered_load": load}
    for policy in ("unified", "separate", "fifo"):
        rates = [simulate(fabric, workload, policy).jobs_per_second for _ in range(repeat)]
        out[policy] = round(statistics.median(rates))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--sim-jobs", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--sim-load", type=float, default=0.8, help="offered load of the simulation (default 0.8)"
    )
    args = parser.parse_args()
    small = time_pass(load_fabric(FABRIC), 10_000, args.repeat, args.seed)
    small_idle = time_pass(load_fabric(FABRIC), 10_000, args.repeat, args.seed, busy=0.0)
    large = time_pass(big_fabric(), 100_000, args.repeat, args.seed)
    large_idle = time_pass(big_fabric(), 100_000, args.repeat, args.seed, busy=0.0)
    sim = time_simulation(args.sim_jobs, max(1, min(args.repeat, 3)), args.seed, args.sim_load)
    report = {
        "pass_10k": small,
        "pass_10k_idle": small_idle,
        "pass_100k": large,
        "pass_100k_idle": large_idle,
        "simulation": sim,
    }
    print(json.dumps(report, indent=1))
    print()
    print(f"{'pass':<40} {'median ms':>10} {'target':>8}")
    print(f"{'10,000 pending, 1,200 GPUs, 90% busy':<40} {small['median_ms']:>10} {'100':>8}")
    print(f"{'10,000 pending, 1,200 GPUs, idle':<40} {small_idle['median_ms']:>10} {'100':>8}")
    print(f"{'100,000 pending, 10,000 GPUs, 90% busy':<40} {large['median_ms']:>10} {'1000':>8}")
    print(f"{'100,000 pending, 10,000 GPUs, idle':<40} {large_idle['median_ms']:>10} {'1000':>8}")
    print(
        f"simulated jobs/s ({sim['jobs']} jobs, load {sim['offered_load']}): "
        f"unified {sim['unified']}, "
        f"separate {sim['separate']}, fifo {sim['fifo']}"
    )


if __name__ == "__main__":
    main()
