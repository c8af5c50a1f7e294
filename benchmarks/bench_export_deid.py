"""De-identification throughput, Merkle proofs per second, and recall on a labelled sample.

Measured in one run (no root), on files in the page cache, CPU seconds of this process
(one core): MB of input per CPU second.

- *deid*: ``onecluster.export.deidentify`` with no profile (every detector on every field)
  on CSV, JSON Lines and Parquet files of ``--mb`` MB of typical training records (ids,
  dates, scores, a few sentences; an identifier in one row in twenty), and on a CSV of the
  labelled sample, where every row plants eight identifiers in every variant;
- *baseline*: the same CSV files through a naive scanner: ``csv`` in and out, every field
  NFKC-normalised and stripped of format characters, then one regex per identifier kind run
  on it with no pre-filter (resident IDs and cards checked as ours, IP addresses by their
  regex alone, HMAC tokens) — what "run every regex on every field" costs;
- *floor*: ``csv.reader`` into ``csv.writer`` with SHA-256 and nothing else, the most any
  stdlib-CSV pipeline can do here;
- *proofs*: inclusion and consistency proofs generated from a ``merkle.Tree`` of
  ``--leaves`` 200-byte entries and verified, per second;
- *recall*: planted identifiers that survive in the output of the labelled sample, per kind
  and variant (target 0), and non-PII cells changed (false positives).

    .venv/bin/python benchmarks/bench_export_deid.py [--mb 20] [--labelled 5000] [--json]
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import hmac
import json
import random
import re
import sys
import tempfile
import time
import unicodedata
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from onecluster.export import deidentify, merkle
from onecluster.export._identifiers import luhn_ok, resident_id
from pii_sample import VARIANTS, Sample, false_positives, labelled, survivors, typical

_MB = 1e6
KEY = b"bench-key-" + b"x" * 22


def cpu(fn: Any) -> tuple[float, Any]:
    """(CPU seconds of this process, result) of ``fn()``."""
    start = time.process_time()
    result = fn()
    return time.process_time() - start, result


def write_sample(sample: Sample, folder: Path, stem: str) -> dict[str, Path]:
    paths = {fmt: folder / f"{stem}.{fmt}" for fmt in ("csv", "jsonl", "parquet")}
    with paths["csv"].open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(sample.header)
        writer.writerows(sample.rows)
    with paths["jsonl"].open("w", encoding="utf-8") as f:
        for row in sample.rows:
            f.write(json.dumps(dict(zip(sample.header, row, strict=True)), ensure_ascii=False))
            f.write("\n")
    columns = list(zip(*sample.rows, strict=True))
    table = pa.table({name: list(col) for name, col in zip(sample.header, columns, strict=True)})
    pq.write_table(table, paths["parquet"], row_group_size=65_536)
    return paths


def rows_for(mb: float) -> int:
    probe = typical(2000)
    size = sum(len(",".join(r).encode()) + 1 for r in probe.rows) / 2000
    return int(mb * _MB / size)


# --- the naive baseline -------------------------------------------------------------------

_NAIVE = {
    "cn_resident_id": re.compile(r"(?<![0-9])[0-9]{17}[0-9Xx](?![0-9])"),
    "cn_mobile": re.compile(r"(?<![0-9])(?:\+?86[ -]?)?1[3-9][0-9](?:[ -]?[0-9]){8}(?![0-9])"),
    "bank_card": re.compile(r"(?<![0-9])[0-9](?:[ -]?[0-9]){13,18}(?![0-9])"),
    "email": re.compile(
        r"[A-Za-z0-9._%+\-]+ ?@ ?[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}"
    ),
    "ipv4": re.compile(r"(?<![0-9.])(?:[0-9]{1,3}\.){3}[0-9]{1,3}(?![0-9])"),
    "ipv6": re.compile(r"(?<![0-9A-Fa-f:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{1,4}"),
}


def _naive_field(value: str, tokens: dict[str, str]) -> str:
    text = unicodedata.normalize("NFKC", value)
    text = "".join(c for c in text if unicodedata.category(c) != "Cf")
    for kind, pattern in _NAIVE.items():

        def token(m: re.Match[str], kind: str = kind) -> str:
            found = m.group()
            digits = re.sub(r"[^0-9Xx]", "", found)
            if kind == "cn_resident_id" and not resident_id(digits.upper()):
                return found
            if kind == "bank_card" and not luhn_ok(digits):
                return found
            cached = tokens.get(found)
            if cached is None:
                mac = hmac.digest(KEY, f"{kind}\0{found}".encode(), "sha256")
                cached = tokens[found] = f"{kind}_{mac[:10].hex()}"
            return cached

        text = pattern.sub(token, text)
    return text if text != value else value


def naive_csv(source: Path, target: Path) -> None:
    tokens: dict[str, str] = {}
    digest = hashlib.sha256()
    with source.open(encoding="utf-8", newline="") as f, target.open("w", newline="") as out:
        writer = csv.writer(out)
        for row in csv.reader(f):
            new = [_naive_field(v, tokens) for v in row]
            writer.writerow(new)
    digest.update(target.read_bytes())


def floor_csv(source: Path, target: Path) -> None:
    digest = hashlib.sha256()
    with source.open(encoding="utf-8", newline="") as f, target.open("w", newline="") as out:
        writer = csv.writer(out)
        for row in csv.reader(f):
            writer.writerow(row)
    digest.update(target.read_bytes())


# --- proofs ---------------------------------------------------------------------------------


def proofs(leaves: int, n: int = 20_000) -> dict[str, float]:
    rng = random.Random(14)
    entries = [rng.randbytes(200) for _ in range(leaves)]
    tree = merkle.Tree(entries)
    size, head = tree.size, tree.root()
    indices = [rng.randrange(size) for _ in range(n)]
    sizes = [rng.randrange(1, size) for _ in range(n)]
    out: dict[str, float] = {}
    t, made = cpu(lambda: [tree.inclusion_proof(i) for i in indices])
    out["inclusion_generate_per_s"] = n / t
    checks = [(i, merkle.leaf_hash(entries[i]), p) for i, p in zip(indices, made, strict=True)]
    t, _ = cpu(lambda: [merkle.verify_inclusion(i, size, h, p, head) for i, h, p in checks])
    out["inclusion_verify_per_s"] = n / t
    t, made = cpu(lambda: [tree.consistency_proof(m) for m in sizes])
    out["consistency_generate_per_s"] = n / t
    pairs = [(m, tree.root(m), p) for m, p in zip(sizes, made, strict=True)]
    t, _ = cpu(lambda: [merkle.verify_consistency(m, size, p, r, head) for m, r, p in pairs])
    out["consistency_verify_per_s"] = n / t
    small = entries[:1000]
    t, _ = cpu(lambda: [merkle.inclusion_proof(small, i % 1000) for i in range(200)])
    out["module_inclusion_proof_1k_leaves_per_s"] = 200 / t
    return out


# --- the run ----------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=float, default=20.0, help="MB of typical records")
    parser.add_argument("--labelled", type=int, default=5000, help="rows of the labelled sample")
    parser.add_argument("--leaves", type=int, default=100_000, help="entries in the proof tree")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results: dict[str, Any] = {"deid": {}, "baseline": {}, "floor": {}}
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        rows_typical = rows_for(args.mb)
        data = {
            "typical": write_sample(typical(rows_typical), work, "typical"),
            "labelled": write_sample(sample := labelled(args.labelled), work, "labelled"),
        }
        deidentify(data["labelled"]["csv"], work / "warm.csv", key=KEY)  # tables built once
        for name, paths in data.items():
            as_csv = paths["csv"].stat().st_size / _MB
            rows = len(sample.rows) if name == "labelled" else rows_typical
            for fmt, path in paths.items():
                size = path.stat().st_size / _MB
                t, _ = cpu(lambda p=path, f=fmt: deidentify(p, work / f"out.{f}", key=KEY))
                results["deid"][f"{name}.{fmt}"] = {
                    "mb": size,
                    "mb_per_cpu_s": size / t,
                    "csv_mb_per_cpu_s": as_csv / t,
                    "rows_per_cpu_s": rows / t,
                }
            size = paths["csv"].stat().st_size / _MB
            t, _ = cpu(lambda p=paths["csv"]: naive_csv(p, work / "naive.csv"))
            results["baseline"][f"{name}.csv"] = {"mb": size, "mb_per_cpu_s": size / t}
            t, _ = cpu(lambda p=paths["csv"]: floor_csv(p, work / "floor.csv"))
            results["floor"][f"{name}.csv"] = {"mb": size, "mb_per_cpu_s": size / t}
        # Recall on the labelled CSV, and the naive baseline's on the same file.
        deidentify(data["labelled"]["csv"], work / "recall.csv", key=KEY)
        results["recall"] = _recall(sample, work / "recall.csv")
        naive_csv(data["labelled"]["csv"], work / "naive.csv")
        results["baseline_recall"] = _recall(sample, work / "naive.csv")
    results["proofs"] = proofs(args.leaves)
    results["proofs"]["leaves"] = args.leaves
    if args.json:
        json.dump(results, sys.stdout, indent=2)
        print()
        return
    _print(results)


def _recall(sample: Sample, output: Path) -> dict[str, Any]:
    with output.open(encoding="utf-8", newline="") as f:
        out_rows = list(csv.reader(f))[1:]
    left = survivors(sample.planted, sample.header, out_rows)
    variant_of = {}
    for p in sample.planted:
        if p.column.startswith("pii_"):
            k = ("cn_resident_id", "cn_mobile", "bank_card", "email", "ipv4", "ipv6").index(
                p.column[4:]
            )
            variant_of[(p.row, p.column)] = VARIANTS[(p.row + k) % len(VARIANTS)]
        else:
            variant_of[(p.row, p.column)] = "free_text"
    fp = false_positives(sample.header, sample.rows, out_rows)
    return {
        "planted": len(sample.planted),
        "survived": len(left),
        "survived_by_kind": dict(Counter(p.kind for p in left)),
        "survived_by_variant": dict(Counter(variant_of[(p.row, p.column)] for p in left)),
        "non_pii_cells": len(sample.rows) * len(fp),
        "false_positives": sum(fp.values()),
        "false_positives_by_column": {k: v for k, v in fp.items() if v},
    }


def _print(results: dict[str, Any]) -> None:
    print(
        f"{'input':<18} {'MB':>6} {'MB/s':>6} {'as CSV':>7} {'rows/s':>8} "
        f"{'naive':>6} {'floor':>6}   (per CPU second; 'as CSV': the same rows' CSV size)"
    )
    for name, row in results["deid"].items():
        base = results["baseline"].get(name, {}).get("mb_per_cpu_s")
        floor = results["floor"].get(name, {}).get("mb_per_cpu_s")
        print(
            f"{name:<18} {row['mb']:>6.1f} {row['mb_per_cpu_s']:>6.1f} "
            f"{row['csv_mb_per_cpu_s']:>7.1f} {row['rows_per_cpu_s']:>8,.0f} "
            f"{(base and f'{base:.1f}') or '':>6} {(floor and f'{floor:.1f}') or '':>6}"
        )
    print("\nproofs per second (tree of", results["proofs"]["leaves"], "leaves):")
    for k, v in results["proofs"].items():
        if k != "leaves":
            print(f"  {k:<28} {v:>12,.0f}")
    for label in ("recall", "baseline_recall"):
        r = results[label]
        print(f"\n{label}: {r['survived']} of {r['planted']} planted identifiers survived")
        print(f"  by kind: {r['survived_by_kind']}  by variant: {r['survived_by_variant']}")
        print(
            f"  false positives: {r['false_positives']} of {r['non_pii_cells']} non-PII cells"
            f" {r['false_positives_by_column']}"
        )


if __name__ == "__main__":
    main()
