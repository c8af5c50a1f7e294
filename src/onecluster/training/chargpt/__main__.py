"""Train the example char-GPT as one worker of a gang (the launcher starts one per GPU of
the site; ``onecluster train`` starts the launcher at every site).  Progress goes to stdout,
one JSON object a line, and to ``--metrics`` when given; its Prometheus ``/metrics`` is
served where ``$ONECLUSTER_TRAINING_PROMETHEUS`` says (the launcher's ``--prometheus``)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, TextIO

import torch
import torch.distributed as dist

from onecluster.errors import PlatformError, UnavailableError, ValidationError
from onecluster.training import CrossSite, SyncConfig, Topology, serve_metrics
from onecluster.training._launcher import EXIT_PERMANENT, setup_job_logging
from onecluster.training.chargpt._data import load_corpus
from onecluster.training.chargpt._model import CharGPT, GPTConfig


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m onecluster.training.chargpt", description=__doc__)
    p.add_argument(
        "--data",
        type=Path,
        default=None,
        help="TinyShakespeare (sha256 checked); default: a generated corpus",
    )
    p.add_argument("--no-check", action="store_true", help="do not check the data's sha256")
    p.add_argument("--steps", type=int, default=600, help="inner steps per worker")
    p.add_argument("--batch", type=int, default=16, help="sequences per worker and step")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--mode", choices=["diloco", "ddp"], default="diloco")
    p.add_argument("--sync-every", type=int, default=50)
    p.add_argument("--bits", type=int, default=8)
    p.add_argument("--fragments", type=int, default=1, help="streaming: fragments synced in turn")
    p.add_argument("--overlap", type=int, default=0, help="streaming: inner steps a round overlaps")
    p.add_argument("--merge-alpha", type=float, default=0.0)
    p.add_argument("--peer-timeout", type=float, default=10.0)
    p.add_argument("--sync-timeout", type=float, default=1800.0)
    p.add_argument("--rendezvous-timeout", type=float, default=600.0)
    p.add_argument("--heal-timeout", type=float, default=1800.0)
    p.add_argument("--eval-every", type=int, default=100, help="0: only at the end")
    p.add_argument("--width", type=int, default=64, help="model width (every site the same)")
    p.add_argument("--metrics", type=Path, default=None, help="also append the JSON lines here")
    return p.parse_args(argv)


class _Out:
    def __init__(self, path: Path | None, where: dict[str, Any]) -> None:
        self.file: TextIO | None = path.open("a") if path else None
        self.where = where
        self.t0 = time.monotonic()

    def __call__(self, event: str, **fields: Any) -> None:
        line = json.dumps(
            {
                "event": event,
                "t": round(time.monotonic() - self.t0, 3),
                "ts": round(time.time(), 3),
                **self.where,
                **fields,
            }
        )
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
        if self.file is not None:
            self.file.write(line + "\n")
            self.file.flush()


def _evaluate(model: CharGPT, corpus: Any, cfg: GPTConfig) -> float:
    gen = torch.Generator().manual_seed(1234)
    model.eval()
    with torch.no_grad():
        losses = [float(model(*corpus.batch(gen, 32, cfg.context, val=True))) for _ in range(8)]
    model.train()
    return sum(losses) / len(losses)


def train(args: argparse.Namespace) -> int:
    torch.set_num_threads(1)  # 2 threads per process ran 5-10x slower on small CPUs
    topo = Topology.from_env(os.environ)
    if topo.local_world > 1:
        dist.init_process_group(
            "gloo",
            init_method=f"tcp://127.0.0.1:{topo.site_port()}",
            rank=topo.local_rank,
            world_size=topo.local_world,
        )
    out = _Out(args.metrics, {"site": topo.site, "worker": topo.local_rank})
    corpus = load_corpus(args.data, check_sha256=not args.no_check)
    cfg = GPTConfig(vocab=corpus.vocab, width=args.width)
    torch.manual_seed(args.seed)
    model = CharGPT(cfg)
    inner = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1, betas=(0.9, 0.95))
    sched = torch.optim.lr_scheduler.LambdaLR(inner, lambda s: min(1.0, (s + 1) / args.warmup))
    config = SyncConfig(
        mode=args.mode,
        sync_every=1 if args.mode == "ddp" else args.sync_every,
        bits=32 if args.mode == "ddp" else args.bits,
        fragments=args.fragments,
        overlap_steps=args.overlap,
        merge_alpha=args.merge_alpha,
        peer_timeout_s=args.peer_timeout,
        sync_timeout_s=args.sync_timeout,
        rendezvous_timeout_s=args.rendezvous_timeout,
        heal_timeout_s=args.heal_timeout,
        heartbeat_s=min(0.5, args.peer_timeout / 4),
    )
    cross = CrossSite(model, inner, config, topo)
    endpoint = serve_metrics(cross, os.environ)
    params = sum(p.numel() for p in model.parameters())
    out(
        "start",
        sites=list(topo.sites),
        params=params,
        corpus=corpus.name,
        mode=config.mode,
        sync_every=config.sync_every,
        bits=config.bits,
        pid=os.getpid(),
        prometheus=endpoint.url if endpoint is not None else None,
    )
    try:
        start = cross.start()
    except UnavailableError as exc:  # no peer to start with: a restart would wait again
        raise ValidationError(exc.message, hint=exc.hint) from exc
    if start is not None:
        out("healed", round=start.number, source=start.healed_from, inner=cross.stats().inner_steps)
    gen = torch.Generator().manual_seed(args.seed * 1000 + 17 * topo.site_rank + topo.local_rank)
    tokens = args.batch * cfg.context
    compute_s = eval_s = 0.0  # evaluations are not training: their time is left out
    began = time.monotonic()
    while cross.stats().inner_steps < args.steps:
        t = time.monotonic()
        x, y = corpus.batch(gen, args.batch, cfg.context)
        loss = model(x, y)
        loss.backward()
        if topo.local_world > 1:
            for p in model.parameters():
                if p.grad is not None:
                    dist.all_reduce(p.grad)
                    p.grad /= topo.local_world
        compute_s += time.monotonic() - t
        done = cross.step(tokens)
        sched.step()
        step = cross.stats().inner_steps
        if done is not None and (
            config.mode == "diloco" or done.healed_from or len(done.participants) < topo.n_sites
        ):
            s = cross.stats()
            out(
                "round",
                step=step,
                round=done.number,
                sites=list(done.participants),
                healed_from=done.healed_from,
                wait_s=round(done.wait_s, 4),
                sync_sent=s.sync_sent,
                sync_received=s.sync_received,
                wan_sent=s.wan_sent,
            )
        if step % 10 == 0:
            out("step", step=step, loss=round(float(loss.detach()), 4))
        if args.eval_every and step % args.eval_every == 0:
            t = time.monotonic()
            train_s = t - began - eval_s
            out(
                "eval",
                step=step,
                val_loss=round(_evaluate(model, corpus, cfg), 4),
                train_s=round(train_s, 3),
            )
            eval_s += time.monotonic() - t
    cross.finish()  # a round still in flight lands before the last evaluation
    wall = time.monotonic() - began - eval_s
    s = cross.stats()
    out(
        "end",
        step=s.inner_steps,
        val_loss=round(_evaluate(model, corpus, cfg), 4),
        rounds=s.rounds,
        heals=s.heals,
        wall_s=round(wall, 3),
        compute_s=round(compute_s, 3),
        sync_wait_s=round(s.sync_wait_s, 3),
        wan_sent=s.wan_sent,
        wan_received=s.wan_received,
        sync_sent=s.sync_sent,
        sync_received=s.sync_received,
        heal_sent=s.heal_sent,
        heal_received=s.heal_received,
    )
    cross.close()
    if endpoint is not None:
        endpoint.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    setup_job_logging("training", os.environ)
    args = _args(argv)
    try:
        return train(args)
    except PlatformError as exc:
        hint = f"\nhint: {exc.hint}" if exc.hint else ""
        sys.stderr.write(f"error: {exc.message}{hint}\n")
        return EXIT_PERMANENT if exc.exit_code == 2 else 1


if __name__ == "__main__":
    sys.exit(main())
