"""The export register: durable appends per second with group commit against one fsync per
entry, and proofs per second on a register of ``--entries`` entries.

Every append counted here returned only once its entry was fsync'd and covered by a signed,
fsync'd checkpoint (``Register.append``'s contract).  Measured in one run, wall-clock:

- *group commit*: ``--threads`` appenders, each appending ``--per-thread`` entries of about
  200 bytes (an export intent) to one register, ``group_wait_s`` at its default (2 ms);
- *one appender*: the same register API with one thread and ``group_wait_s=0``: every entry
  its own batch (three fsyncs and one signature per entry);
- *framed fsync per line*: the floor of "one fsync per entry" — a bare file, one 200-byte
  line written and fsync'd at a time, no hashing, no signature (audit.md §2.2 measured the
  same shape at ≈2.5k/s);
- *proofs*: on a register of ``--entries`` entries, inclusion proofs (``Register.
  inclusion_proof``) and consistency proofs generated for random seqs and sizes, and
  verified with ``onecluster.export.merkle``, per second; and ``verify`` of the whole
  directory, and ``Register.open`` (which checks it all), in entries per second.

    .venv/bin/python benchmarks/bench_register.py [--threads 256] [--per-thread 200]
        [--entries 100000] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from onecluster.export import merkle
from onecluster.register import Register, verify


def _entry(n: int) -> dict[str, Any]:
    return {
        "type": "intent",
        "export": f"exp-{n:08d}",
        "dataset": "clinical-notes",
        "version": "v3",
        "content_hash": f"{n:064x}",
        "bytes": 123_456_789,
        "destination": "sg-1",
    }


def appenders(directory: Path, threads: int, per_thread: int, group_wait_s: float) -> dict:
    """Durable appends per second by ``threads`` appenders to a fresh register."""
    with Register.open(directory, group_wait_s=group_wait_s) as reg:
        barrier = threading.Barrier(threads + 1)

        def run(t: int) -> None:
            barrier.wait()
            for i in range(per_thread):
                reg.append(_entry(t * per_thread + i))

        workers = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
        for worker in workers:
            worker.start()
        barrier.wait()
        start = time.perf_counter()
        for worker in workers:
            worker.join()
        elapsed = time.perf_counter() - start
        total = threads * per_thread
        assert reg.size == total
    batches = len((directory / "checkpoints.jsonl").read_bytes().splitlines()) - 1
    return {
        "threads": threads,
        "entries": total,
        "seconds": elapsed,
        "appends_per_s": total / elapsed,
        "batches": batches,
        "mean_batch": total / batches,
    }


def framed_fsync(path: Path, count: int) -> dict:
    """One 200-byte line written and fsync'd at a time: the floor of one fsync per entry."""
    line = json.dumps(_entry(0), separators=(",", ":")).encode() + b"\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        start = time.perf_counter()
        for _ in range(count):
            os.write(fd, line)
            os.fsync(fd)
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
    return {"entries": count, "seconds": elapsed, "appends_per_s": count / elapsed}


def _rate(fn: Any, count: int) -> float:
    start = time.perf_counter()
    for _ in range(count):
        fn()
    return count / (time.perf_counter() - start)


def proofs(directory: Path, entries: int, threads: int) -> dict:
    """Fill a register to ``entries`` (group commit), then time proofs, verify and open."""
    per_thread = -(-entries // threads)
    fill = appenders(directory, threads, per_thread, 0.002)
    rng = random.Random(7)
    with Register.open(directory) as reg:
        size, head = reg.size, reg.head()
        leaves = [merkle.leaf_hash(reg.entry_bytes(s)) for s in range(0, size, 97)]
        seqs = [rng.randrange(0, size // 97) * 97 for _ in range(20_000)]
        made = [(s, reg.inclusion_proof(s)) for s in seqs[:2000]]
        it = iter(seqs * 2)
        inclusion = _rate(lambda: reg.inclusion_proof(next(it)), 20_000)
        vit = iter(made * 10)

        def check_inclusion() -> None:
            s, proof = next(vit)
            merkle.verify_inclusion(s, size, leaves[s // 97], proof, head.root)

        inclusion_verify = _rate(check_inclusion, 20_000)
        sizes = [rng.randrange(1, size) for _ in range(20_000)]
        cit = iter(sizes)
        consistency = _rate(lambda: reg.consistency_proof(next(cit)), 20_000)
        # heads of earlier sizes, from the register's own tree (what a signed older head holds)
        tree = merkle.Tree()
        for s in range(size):
            tree.append(reg.entry_bytes(s))
        olds = [(m, tree.root(m), reg.consistency_proof(m)) for m in sizes[:2000]]
        oit = iter(olds * 10)

        def check_consistency() -> None:
            m, root, proof = next(oit)
            merkle.verify_consistency(m, size, proof, root, head.root)

        consistency_verify = _rate(check_consistency, 20_000)
    start = time.perf_counter()
    report = verify(directory)
    verify_s = time.perf_counter() - start
    start = time.perf_counter()
    Register.open(directory).close()
    open_s = time.perf_counter() - start
    return {
        "entries": report.entries_checked,
        "fill": fill,
        "inclusion_per_s": inclusion,
        "inclusion_verify_per_s": inclusion_verify,
        "consistency_per_s": consistency,
        "consistency_verify_per_s": consistency_verify,
        "verify_entries_per_s": report.entries_checked / verify_s,
        "open_entries_per_s": report.entries_checked / open_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=256, help="concurrent appenders")
    parser.add_argument("--per-thread", type=int, default=200, help="appends per appender")
    parser.add_argument("--single", type=int, default=2000, help="appends in the baselines")
    parser.add_argument("--entries", type=int, default=100_000, help="entries for the proofs")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=Path.cwd()) as folder:
        work = Path(folder)
        results = {
            "group_commit": appenders(work / "group", args.threads, args.per_thread, 0.002),
            "one_appender": appenders(work / "single", 1, args.single, 0.0),
            "framed_fsync": framed_fsync(work / "framed.log", args.single),
            "proofs": proofs(work / "proofs", args.entries, args.threads),
        }
    if args.json:
        print(json.dumps(results, indent=2))
        return
    g, s, f = results["group_commit"], results["one_appender"], results["framed_fsync"]
    print(
        f"group commit, {g['threads']} appenders: {g['appends_per_s']:,.0f} durable appends/s "
        f"({g['entries']:,} in {g['batches']:,} batches, {g['mean_batch']:.0f} a batch)"
    )
    print(f"one appender, a batch per entry:  {s['appends_per_s']:,.0f} appends/s")
    print(f"framed line, one fsync per entry: {f['appends_per_s']:,.0f} appends/s")
    p = results["proofs"]
    print(f"register of {p['entries']:,} entries (filled at {p['fill']['appends_per_s']:,.0f}/s):")
    for key in ("inclusion", "inclusion_verify", "consistency", "consistency_verify"):
        print(f"  {key.replace('_', ' ')}: {p[key + '_per_s']:,.0f}/s")
    print(f"  verify: {p['verify_entries_per_s']:,.0f} entries/s; "
          f"open: {p['open_entries_per_s']:,.0f} entries/s")  # fmt: skip


if __name__ == "__main__":
    main()
