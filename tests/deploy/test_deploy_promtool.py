"""``promtool check rules`` and ``promtool test rules`` on the shipped rules, where the host
has promtool (``scripts/promtool-host.sh`` installs it from Debian's ``prometheus``)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from shipped import RULES_TEST_FILE

from onecluster.deploy import RULES_FILE

PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(
    PROMTOOL is None, reason="no promtool here: scripts/promtool-host.sh installs it (as root)"
)


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run(
        [PROMTOOL, *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_promtool_checks_the_rules() -> None:
    done = promtool("check", "rules", str(RULES_FILE))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_each_alert_fires_on_its_series_and_not_on_healthy_ones() -> None:
    done = promtool("test", "rules", str(RULES_TEST_FILE))
    assert done.returncode == 0, done.stdout + done.stderr


def test_promtool_finds_a_broken_expectation(tmp_path: Path) -> None:
    """The unit tests can fail: the same file with one expectation wrong does."""
    text = RULES_TEST_FILE.read_text(encoding="utf-8")
    broken = text.replace("summary: Circuit sg-sh is down", "summary: Circuit sg-tk is down")
    broken = broken.replace("../../src/", str(RULES_FILE.parents[3]) + "/")
    assert broken != text
    path = tmp_path / "broken.test.yml"
    path.write_text(broken, encoding="utf-8")
    done = promtool("test", "rules", str(path))
    assert done.returncode != 0
    assert "OneclusterCircuitDown" in done.stdout + done.stderr
