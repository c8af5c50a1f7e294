"""The planner against the notes' reference numbers, and how long one plan takes.

Prints, for ``fabric.md`` §4.6's illustrative planner outputs (70B, 1,024 H100, 2 × 512 GPUs,
16×400G DCI) and ``training.md`` §2.2's DiLoCo bandwidth table, the planner's figure beside
the reference and their ratio (§4.6 prints the 50 km one-call latency term, 0.5 ms, rounded
to 0.001 s: its ratio of about 0.5 is that rounding), then the time of one ``plan`` (all four
modes, verdict, critic's numbers) on every example fabric.  These are worked numbers, not
measurements: the comparison with measured runs is the training benchmark's, which calls
``onecluster.planner.predict`` with its measured inputs (``docs/planner.md``).

Run: ``.venv/bin/python benchmarks/bench_planner.py`` (well under a second).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from onecluster.fabric import load_fabric
from onecluster.planner import (
    PlanInputs,
    SitePlan,
    WanHop,
    ddp_hierarchical,
    diloco,
    plan,
    ring_from_fabric,
)

FABRICS = Path(__file__).resolve().parents[1] / "examples" / "fabrics"


def _reference(rtt_ms: float, **changes: object) -> PlanInputs:
    hop = WanHop(a="east", b="west", rtt_ms=rtt_ms, capacity_gbps=6400)
    sites = (SitePlan("east", 512), SitePlan("west", 512))
    return PlanInputs(model_params=70e9, sites=sites, hops=(hop,), **changes)


def references() -> list[dict[str, object]]:
    """Planner vs reference, one row per figure."""
    rows: list[dict[str, object]] = []
    for label, rtt, buckets, bw, lat, exposed in (
        ("50 km, 1 call", 0.49, 1, 0.175, 0.001, 0.04),
        ("50 km, 175 buckets", 0.49, 175, 0.175, 0.093, 0.06),
        ("68 ms, 1 call", 68.0, 1, 0.55, 0.068, 0.14),
        ("68 ms, 175 buckets", 68.0, 175, 0.55, 11.9, 2.86),
    ):
        m = ddp_hierarchical(_reference(rtt, buckets=buckets))
        for what, got, want in (
            ("bandwidth term s", m.bandwidth_s, bw),
            ("latency term s", m.latency_s, lat),
            ("exposed share", m.penalty, exposed),
        ):
            rows.append(
                {
                    "case": f"fabric.md §4.6 {label}",
                    "figure": what,
                    "planner": got,
                    "reference": want,
                }
            )
    for bits, average, burst in ((32, 5.2, 103), (16, 2.6, 52), (8, 1.3, 26), (4, 0.64, 13)):
        m = diloco(_reference(68.0, bits=bits))
        rows.append(
            {
                "case": f"training.md §2.2 {bits}-bit",
                "figure": "average Gbit/s/site",
                "planner": m.average_gbps_per_site,
                "reference": average,
            }
        )
        rows.append(
            {
                "case": f"training.md §2.2 {bits}-bit",
                "figure": "burst Gbit/s/site",
                "planner": m.needed_gbps_per_site,
                "reference": burst,
            }
        )
    return rows


def timings(repeat: int = 200) -> dict[str, float]:
    """Mean seconds of one plan over every site of each example fabric."""
    out = {}
    for path in sorted(FABRICS.glob("*.yaml")):
        fabric = load_fabric(path)
        order, hops = ring_from_fabric(fabric, list(fabric.site_names))
        inputs = PlanInputs(
            model_params=70e9, sites=tuple(SitePlan(n, 64) for n in order), hops=hops
        )
        began = time.perf_counter()
        for _ in range(repeat):
            plan(inputs)
        out[path.stem] = (time.perf_counter() - began) / repeat
    return out


def main() -> None:
    rows, times = references(), timings()
    print(json.dumps({"references": rows, "plan_seconds": times}, indent=2))
    print(f"\n{'case':34} {'figure':22} {'planner':>10} {'reference':>10} {'ratio':>6}")
    for r in rows:
        got, want = float(r["planner"]), float(r["reference"])
        print(f"{r['case']:34} {r['figure']:22} {got:10.4g} {want:10.4g} {got / want:6.2f}")
    for name, seconds in times.items():
        print(f"plan on {name}: {seconds * 1e6:.0f} µs")


if __name__ == "__main__":
    main()
