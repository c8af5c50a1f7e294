"""Trees to scan: a few files of random bytes, links inside, an empty directory."""

from __future__ import annotations

import random
from pathlib import Path

import pytest


def write_tree(top: Path, seed: int = 1, big: int = 3_000_000) -> Path:
    """A small dataset: a big file (several chunks), small ones, a link, an empty folder."""
    rng = random.Random(seed)
    (top / "train").mkdir(parents=True)
    (top / "empty").mkdir()
    (top / "train" / "big.bin").write_bytes(rng.randbytes(big))
    for i in range(20):
        (top / "train" / f"s{i:02}.txt").write_bytes(rng.randbytes(rng.randint(0, 5000)))
    (top / "README").write_text("a dataset\n")
    (top / "train" / "latest").symlink_to("big.bin")
    (top / "README").chmod(0o640)
    return top


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "ds")
