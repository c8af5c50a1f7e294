"""docs/export.md's worked example for auditors, run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "export.md"


def test_the_auditors_worked_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    example = next(b for b in blocks if "verify_consistency" in b)
    exec(compile(example, str(DOC), "exec"), {})
    out = capsys.readouterr().out
    assert out.count("refused:") == 2
    assert "leaf 5 is not in the tree of 7" in out
    assert "the old tree was rewritten" in out
