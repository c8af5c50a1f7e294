"""Training across sites in the lab (root): co-located DDP, per-step DDP over an emulated
68 ms circuit, and DiLoCo over the same circuit; then kills, cuts and flaps; then the
planner's predictions against what was measured.

Two sites, one worker each (never more worker processes than the host's 2 cores), the
example char-GPT on TinyShakespeare (``../shared/data``; a generated corpus where it is
absent), the same seeds, data and tokens per step in every mode.  The circuit is the lab's
at its default scale: 1 Gbit/s × 0.05 = 50 Mbit/s, 68 ms RTT.  Co-located DDP runs both
workers in one site's namespace over loopback.

    sudo .venv/bin/python benchmarks/bench_training.py [--steps 1000] [--json]

Results as Markdown (or JSON); ``benchmarks/RESULTS.md`` keeps them with this command.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from lab_kit import Bench, running_lab
from onecluster.network import in_netns
from onecluster.planner import PlanInputs, SitePlan, WanHop, predict

PY = sys.executable
SHAKESPEARE = Path(__file__).resolve().parents[2] / "shared/data/text/tinyshakespeare.txt"
RTT_MS, SCALE = 68.0, 0.05
FABRIC = f"""\
fabric: bench-train
sites:
  - {{name: singapore, region: ap-southeast-1, jurisdiction: SG, backend: local,
     pools: [{{gpu_type: H100, count: 1, cost_per_gpu_hour: 1.6}}]}}
  - {{name: tokyo, region: ap-northeast-1, jurisdiction: JP, backend: local,
     pools: [{{gpu_type: H100, count: 1, cost_per_gpu_hour: 3.2}}]}}
circuits:
  - {{name: sin-tyo, between: [singapore, tokyo], capacity_gbps: 1, rtt_ms: {RTT_MS},
     loss: 0.0, distance_km: 6900, risk_group: direct}}
teams:
  - {{name: llm, home_site: singapore, weight: 1, quota: {{H100: 2}}}}
"""
SITES = ("singapore", "tokyo")
LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def worker_cmd(metrics: Path, args: Sequence[str], *, launcher: bool) -> list[str]:
    data = ["--data", str(SHAKESPEARE)] if SHAKESPEARE.exists() else []
    cmd = [PY, "-m", "onecluster.training.chargpt", *data, "--metrics", str(metrics), *args]
    return [PY, "-m", "onecluster.training", "launch", "--", *cmd] if launcher else cmd


@contextmanager
def gang(
    bench: Bench,
    metrics: Path,
    args: Sequence[str],
    *,
    colocated: bool = False,
    launcher: bool = False,
    port: int = 31744,
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Both sites' workers (or launchers), their stderr in ``metrics``'s directory."""
    procs = []
    for rank, site in enumerate(SITES):
        ns = bench.ns(SITES[0] if colocated else site)
        addresses = "" if colocated else ",".join(f"{s}={bench.ip(s)}" for s in SITES)
        env = {
            **os.environ,
            "ONECLUSTER_GANG_SITES": ",".join(SITES),
            "ONECLUSTER_GANG_RANK": str(rank),
            "ONECLUSTER_GANG_ADDRESSES": addresses,
            "ONECLUSTER_GANG_PORT": str(port),
            "ONECLUSTER_GPUS": "1",
        }
        err = (metrics.parent / f"{metrics.stem}-{site}.log").open("wb")
        procs.append(
            subprocess.Popen(
                in_netns(ns, worker_cmd(metrics, args, launcher=launcher)),
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        )
    try:
        yield procs
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(60)


def events(metrics: Path) -> list[dict[str, Any]]:
    if not metrics.exists():
        return []
    return [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]


def run_mode(
    bench: Bench, name: str, args: Sequence[str], *, colocated: bool = False
) -> dict[str, Any]:
    metrics = bench.work / f"{name}.jsonl"
    log(f"{name}: {' '.join(args)}")
    with gang(bench, metrics, args, colocated=colocated) as procs:
        for p in procs:
            p.wait(1800)
            assert p.returncode == 0, f"{name}: a worker exited with {p.returncode}"
    seen = events(metrics)
    ends = [e for e in seen if e["event"] == "end"]
    evals = sorted(
        (e for e in seen if e["event"] == "eval" and e["site"] == SITES[0]), key=lambda e: e["step"]
    )
    sin = next(e for e in ends if e["site"] == SITES[0])
    return {
        "mode": name,
        "h": next((e["sync_every"] for e in seen if e["event"] == "start"), 1),
        "steps": sin["step"],
        "train_s": max(e["wall_s"] for e in ends),
        "compute_s": sin["compute_s"],
        "local_s": sin["wall_s"] - sin["sync_wait_s"],
        "utilisation": sin["compute_s"] / sin["wall_s"],
        "step_s": sin["wall_s"] / sin["step"],
        "val_loss": sin["val_loss"],
        "curve": [(e["step"], e["train_s"], e["val_loss"]) for e in evals],
        "wan_bytes_per_site": 0 if colocated else sin["wan_sent"] + sin["wan_received"],
        "sync_bytes_per_site": sin["sync_sent"] + sin["sync_received"],
    }


def time_to(curve: list[tuple[int, float, float]], target: float) -> float | None:
    return next((t for _, t, v in curve if v <= target), None)


def log_times(path: Path, pattern: str) -> list[float]:
    """Wall-clock times of the log lines of ``path`` that contain ``pattern``."""
    out = []
    for line in path.read_text(errors="replace").splitlines():
        m = LOG_TIME.match(line)
        if m and pattern in line:
            out.append(datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp())
    return out


def wait(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.05)


def faults(bench: Bench, h: int, peer_timeout: float) -> dict[str, Any]:
    """DiLoCo under a killed worker, a cut longer than the peer timeout, a shorter flap."""
    metrics = bench.work / "faults.jsonl"
    args = [
        "--sync-every",
        str(h),
        "--steps",
        "100000",
        "--eval-every",
        "0",
        "--peer-timeout",
        str(peer_timeout),
    ]
    out: dict[str, Any] = {}
    with gang(bench, metrics, args, launcher=True, port=32768):

        def rounds(site: str, after: float = 0.0) -> list[dict[str, Any]]:
            return [
                e
                for e in events(metrics)
                if e["event"] == "round" and e["site"] == site and e["ts"] > after
            ]

        wait(lambda: len(rounds("tokyo")) >= 3, 120, "three rounds at tokyo")
        # 1. Kill tokyo's worker: its launcher restarts it and it heals from singapore.
        victim = next(
            e["pid"] for e in events(metrics) if e["event"] == "start" and e["site"] == "tokyo"
        )
        tyo_before = [e for e in events(metrics) if e["site"] == "tokyo"]
        kill_at = time.time()
        os.kill(victim, signal.SIGKILL)
        wait(
            lambda: any(e["sites"] == ["singapore"] for e in rounds("singapore", kill_at)),
            60,
            "singapore alone",
        )
        wait(
            lambda: any(
                e["event"] == "healed" and e["ts"] > kill_at
                for e in events(metrics)
                if e["site"] == "tokyo"
            ),
            120,
            "tokyo healed",
        )
        wait(
            lambda: any(len(e["sites"]) == 2 for e in rounds("singapore", kill_at)),
            60,
            "both again",
        )
        healed = next(
            e
            for e in events(metrics)
            if e["event"] == "healed" and e["site"] == "tokyo" and e["ts"] > kill_at
        )
        last_round = max((e["step"] for e in tyo_before if e["event"] == "round"), default=0)
        last_step = max((e["step"] for e in tyo_before if e["event"] == "step"), default=0)
        out["kill"] = {
            "detect_s": min(
                log_times(bench.work / "faults-singapore.log", "site tokyo is lost"),
                default=float("nan"),
            )
            - kill_at,
            "resume_s": next(
                e["ts"] for e in rounds("singapore", kill_at) if e["sites"] == ["singapore"]
            )
            - kill_at,
            "rejoin_s": healed["ts"] - kill_at,
            "steps_lost_at_most": max(last_step, last_round) - last_round + 10,
        }
        log(f"kill: {out['kill']}")
        # 2. A flap shorter than the peer timeout changes nothing.  It comes before the long
        #    cut: two falls of a circuit within a minute trip the routing layer's flap
        #    damping (docs/links.md), which holds the circuit down for tens of seconds.
        flap_at = time.time()
        bench.lab.cut("singapore", "tokyo")
        time.sleep(1.0)
        bench.lab.heal("singapore", "tokyo")
        wait(lambda: len(rounds("singapore", flap_at)) >= 3, 120, "rounds after the flap")
        after = [e for e in events(metrics) if e["ts"] > flap_at]
        out["flap"] = {
            "down_s": 1.0,
            "membership_changes": sum(
                1
                for e in after
                if e["event"] == "round" and (len(e["sites"]) < 2 or e["healed_from"])
            ),
            "lost_logs": len(
                [
                    t
                    for t in log_times(bench.work / "faults-singapore.log", "site tokyo is lost")
                    if t > flap_at
                ]
            ),
        }
        log(f"flap: {out['flap']}")
        # 3. Cut the circuit for the peer timeout + 3 s: each side goes on alone, then one
        #    heals from the other.  First the flap's damping penalty decays below the
        #    hold-down threshold (half-life 30 s), so the cut is judged on its own.
        time.sleep(40)
        cut_at = time.time()
        bench.lab.cut("singapore", "tokyo")
        time.sleep(peer_timeout + 3)  # the outage itself
        heal_at = time.time()
        bench.lab.heal("singapore", "tokyo")
        wait(
            lambda: any(len(e["sites"]) == 2 for e in rounds("singapore", heal_at)),
            120,
            "both after the cut",
        )
        lost = log_times(bench.work / "faults-singapore.log", "site tokyo is lost")
        heals = [
            e
            for e in events(metrics)
            if e["event"] == "round" and e["healed_from"] and e["ts"] > heal_at
        ]
        out["cut"] = {
            "detect_s": min((t for t in lost if t > cut_at), default=float("nan")) - cut_at,
            "rejoin_s": (min(e["ts"] for e in heals) - heal_at) if heals else float("nan"),
            "healed_site": heals[0]["site"] if heals else None,
        }
        log(f"cut: {out['cut']}")

    return out


def planner(params: int, local_step_s: float, h: int) -> dict[str, float]:
    """The planner's step time of each mode over the lab's circuit, fed this run's own
    measured local work per step (what a step costs without any sync)."""
    inputs = PlanInputs(
        model_params=params,
        sites=(SitePlan(name=SITES[0], gpus=1), SitePlan(name=SITES[1], gpus=1)),
        hops=(WanHop(a=SITES[0], b=SITES[1], rtt_ms=RTT_MS, capacity_gbps=1.0 * SCALE),),
        step_time_s=local_step_s,
        gpus_per_node=1,
        nic_gbps=1.0 * SCALE,
        bytes_per_param=4.0,
        h=h,
        bits=8,
        window_bytes=64 * 2**20,
        streams_per_node=1,
    )
    modes = {m["mode"]: m for m in predict(inputs)["modes"]}
    return {
        "ddp_wan": modes["ddp-hierarchical"]["step_s"],
        "diloco": modes["diloco"]["step_s"],
        "diloco_stream": modes["diloco-streaming"]["step_s"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--wan-ddp-steps", type=int, default=600)
    parser.add_argument("--sync-every", type=int, default=50)
    parser.add_argument(
        "--long-sync-every",
        type=int,
        default=125,
        help="a second DiLoCo run with this H (125 × 4 = 500× fewer bytes)",
    )
    # Above the lab's route restore: a cut of 0.5 s or more withdraws the circuit's route,
    # which comes back after 5 s of good probes and a route-table sync (docs/links.md); a
    # 1 s cut measured 8.1-8.4 s of silence.  So a short flap is a flap for the training too.
    parser.add_argument("--peer-timeout", type=float, default=12.0)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("this benchmark needs root (network namespaces)")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    base = Path(tempfile.mkdtemp(prefix="bench-training-"))
    fabric = base / "two-site.yaml"
    fabric.write_text(FABRIC)
    common = ["--eval-every", "50", "--peer-timeout", str(args.peer_timeout)]
    runs: list[dict[str, Any]] = []
    with running_lab(fabric, scale=SCALE, mtu=1500, base=base) as bench:
        for seed in range(1, args.seeds + 1):
            s = ["--seed", str(seed), "--steps", str(args.steps), *common]
            runs.append(run_mode(bench, f"colo-s{seed}", ["--mode", "ddp", *s], colocated=True))
            runs.append(
                run_mode(
                    bench,
                    f"diloco-s{seed}",
                    ["--sync-every", str(args.sync_every), "--bits", "8", *s],
                )
            )
        wide = ["--seed", "1", "--steps", str(args.steps), *common]
        runs.append(
            run_mode(
                bench,
                f"diloco-h{args.long_sync_every}-s1",
                ["--sync-every", str(args.long_sync_every), "--bits", "8", *wide],
            )
        )
        runs.append(
            run_mode(
                bench,
                "diloco-stream-s1",
                [
                    "--sync-every",
                    str(args.sync_every),
                    "--bits",
                    "8",
                    "--fragments",
                    "5",
                    "--overlap",
                    str(args.sync_every // 10),
                    "--merge-alpha",
                    "0.5",
                    *wide,
                ],
            )
        )
        runs.append(
            run_mode(
                bench,
                "ddp-wan-s1",
                ["--mode", "ddp", "--seed", "1", "--steps", str(args.wan_ddp_steps), *common],
            )
        )
        fault = faults(bench, args.sync_every, args.peer_timeout)
        kept = base / "runs"
        kept.mkdir()
        for f in [*bench.work.glob("*.jsonl"), *bench.work.glob("*.log")]:
            shutil.copy(f, kept / f.name)
        log(f"every worker's events and log are kept in {kept}")
    params = 112577
    colo = [r for r in runs if r["mode"].startswith("colo")]
    target = max(r["curve"][len(r["curve"]) * 3 // 5][2] for r in colo)  # 60 % into the run
    for r in runs:
        r["time_to_target_s"] = time_to(r["curve"], target)
        # The planner against this run: its own local work per step (forward, backward,
        # optimizer, bookkeeping: wall time less sync waits) plus the modelled sync.
        if not r["mode"].startswith("colo"):
            h = 1 if r["mode"].startswith("ddp") else int(r["h"])
            mode = "ddp_wan" if h == 1 else "diloco_stream" if "stream" in r["mode"] else "diloco"
            r["predicted_step_s"] = planner(params, r["local_s"] / r["steps"], h)[mode]
    result = {
        "target_val_loss": target,
        "runs": runs,
        "faults": fault,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"target validation loss {target:.3f} (the co-located runs' worst at 60 % of the run)")
    print()
    print(
        "| run | steps | train s | step ms | utilisation | val loss (end) | time to target s "
        "| WAN MB per site | sync MB per site |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in runs:
        ttt = r["time_to_target_s"]
        print(
            f"| {r['mode']} | {r['steps']} | {r['train_s']:.1f} | {1000 * r['step_s']:.1f} "
            f"| {r['utilisation']:.2f} | {r['val_loss']:.3f} | "
            f"{'—' if ttt is None else f'{ttt:.1f}'} | {r['wan_bytes_per_site'] / 1e6:.2f} "
            f"| {r['sync_bytes_per_site'] / 1e6:.2f} |"
        )
    print()
    by = {r["mode"]: r for r in runs}
    colo_ttt = [by[f"colo-s{s}"]["time_to_target_s"] for s in range(1, args.seeds + 1)]
    dil_ttt = [by[f"diloco-s{s}"]["time_to_target_s"] for s in range(1, args.seeds + 1)]
    if None not in colo_ttt and None not in dil_ttt:
        ratio = (sum(dil_ttt) / len(dil_ttt)) / (sum(colo_ttt) / len(colo_ttt))  # type: ignore[arg-type]
        print(f"time to target, DiLoCo / co-located: {ratio:.3f} (goal ≤ 1.02)")
    wan = by["ddp-wan-s1"]
    per_step_ddp = wan["sync_bytes_per_site"] / wan["steps"]
    for r in runs:
        if r["mode"].startswith("diloco"):
            per_step = r["sync_bytes_per_site"] / r["steps"]
            print(
                f"WAN bytes per step, per-step DDP / {r['mode']}: {per_step_ddp / per_step:.0f}× "
                f"(goal ≥ 500×; H × 32/8 = {4 * int(r['h'])})"
            )
    for r in runs:
        if "predicted_step_s" in r:
            err = r["predicted_step_s"] / r["step_s"] - 1
            print(
                f"planner, {r['mode']}: predicted {1000 * r['predicted_step_s']:.1f} ms/step, "
                f"measured {1000 * r['step_s']:.1f} ms/step ({100 * err:+.1f} %; goal within 15 %)"
            )
    print()
    print(f"faults: {json.dumps(fault)}")


if __name__ == "__main__":
    main()
