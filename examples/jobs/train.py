"""A stand-in training job for trying onecluster: it reads the GPUs and the identity that the
agent gives every attempt, "trains" for a number of steps, and saves a checkpoint in its own
scratch directory.

    onecluster submit --team llm --gpus 8 --duration 10m --workdir examples/jobs \\
        -- python3 train.py --steps 20

It runs in the directory given with ``--workdir`` (here, this one), so ``train.py`` is found.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="training steps (default 20)")
    parser.add_argument("--step-seconds", type=float, default=0.1, help="time per step")
    args = parser.parse_args()
    gpus = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    site = os.environ.get("ONECLUSTER_SITE", "?")
    job = os.environ.get("ONECLUSTER_JOB_ID", "?")
    print(f"job {job} at site {site} on GPUs [{gpus}] in {Path.cwd()}", flush=True)
    loss = 4.0
    for step in range(1, args.steps + 1):
        time.sleep(args.step_seconds)
        loss = 4.0 * math.exp(-step / max(args.steps / 3, 1)) + 0.5
        if step % 5 == 0 or step == args.steps:
            print(f"step {step}/{args.steps} loss {loss:.3f}", flush=True)
    scratch = Path(os.environ.get("ONECLUSTER_SCRATCH", "."))
    (scratch / "checkpoint.json").write_text(json.dumps({"steps": args.steps, "loss": loss}))
    print(f"checkpoint saved in {scratch}", flush=True)


if __name__ == "__main__":
    main()
