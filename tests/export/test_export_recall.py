"""Recall on the labelled sample (``benchmarks/pii_sample.py``): every planted identifier,
in every variant, is gone from the output of all three formats, and the non-PII columns
built to look like identifiers are left alone."""

from __future__ import annotations

import csv
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from onecluster.export import deidentify

SAMPLE = Path(__file__).resolve().parents[2] / "benchmarks" / "pii_sample.py"
KEY = b"recall-test-key-0123456789abcdef"


def _sample_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pii_sample", SAMPLE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


S = _sample_module()


@pytest.fixture(scope="module")
def sample() -> object:
    return S.labelled(600, seed=14)


def _write(sample: object, folder: Path, fmt: str) -> Path:
    header, rows = sample.header, sample.rows  # type: ignore[attr-defined]
    path = folder / f"in.{fmt}"
    if fmt == "csv":
        with path.open("w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(header)
            writer.writerows(rows)
    elif fmt == "jsonl":
        with path.open("w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(dict(zip(header, row, strict=True)), ensure_ascii=False) + "\n")
    else:
        columns = list(zip(*rows, strict=True))
        pq.write_table(pa.table(dict(zip(header, map(list, columns), strict=True))), path)
    return path


def _read(path: Path, header: list[str]) -> list[list[str]]:
    if path.suffix == ".csv":
        with path.open(encoding="utf-8", newline="") as f:
            return list(csv.reader(f))[1:]
    if path.suffix == ".jsonl":
        records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    else:
        records = pq.read_table(path).to_pylist()
    return [[str(r[name]) for name in header] for r in records]


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_no_planted_identifier_survives_and_non_pii_is_left_alone(
    tmp_path: Path, sample: object, fmt: str
) -> None:
    source = _write(sample, tmp_path, fmt)
    report = deidentify(source, tmp_path / f"out.{fmt}", key=KEY)
    out = _read(tmp_path / f"out.{fmt}", sample.header)  # type: ignore[attr-defined]
    left = S.survivors(sample.planted, sample.header, out)  # type: ignore[attr-defined]
    assert left == [], f"{len(left)} survived, e.g. {left[:3]}"
    wrong = S.false_positives(sample.header, sample.rows, out)  # type: ignore[attr-defined]
    # The one known kind of false positive: a tracking number that is 86 and a mobile number.
    assert sum(wrong.values()) <= 2, wrong
    planted = len(sample.planted)  # type: ignore[attr-defined]
    assert sum(c.found for c in report.detectors.values()) >= planted
    residents = {p.canonical for p in sample.planted if p.kind == "cn_resident_id"}  # type: ignore[attr-defined]
    assert report.individuals == len(residents)


def test_every_kind_meets_every_variant_in_the_sample(sample: object) -> None:
    seen = {
        (p.kind, S.VARIANTS[(p.row + S.KINDS.index(p.kind)) % len(S.VARIANTS)])
        for p in sample.planted  # type: ignore[attr-defined]
        if p.column.startswith("pii_")
    }
    assert seen == {(k, v) for k in S.KINDS for v in S.VARIANTS}


def test_the_output_holds_nothing_a_second_pass_would_find(tmp_path: Path, sample: object) -> None:
    source = _write(sample, tmp_path, "csv")
    deidentify(source, tmp_path / "once.csv", key=KEY)
    again = deidentify(tmp_path / "once.csv", tmp_path / "twice.csv", key=KEY)
    assert sum(c.found for c in again.detectors.values()) <= 2  # the tracking numbers again
    assert again.individuals == 0
