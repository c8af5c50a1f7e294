"""Helpers for the tests of real processes (here and in ``tests/launch``)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest


def wait_for(check: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    """Poll ``check`` until it is true; fail the test, naming ``what``, after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout} s")
        time.sleep(0.02)
