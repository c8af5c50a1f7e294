"""Suite-wide settings and fixtures.

Under CI (``CI`` set), Hypothesis runs derandomized: the same examples every run, so a
submission's CI result does not depend on luck.  Locally it explores new examples each run
(and keeps failures in its database), which is where new bugs are found.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator

import pytest
from hypothesis import settings
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture
def pg_database() -> Iterator[str]:
    """The URL of a fresh, empty database in the PostgreSQL cluster that
    ``ONECLUSTER_TEST_PG_URL`` names, dropped afterwards (other tests share the cluster and
    empty its default database); skips where the variable is not set."""
    url = os.environ.get("ONECLUSTER_TEST_PG_URL")
    if not url:
        pytest.skip("ONECLUSTER_TEST_PG_URL is not set; start one with scripts/postgres.sh")
    name = f"oc_test_{secrets.token_hex(6)}"
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(url).set(database=name).render_as_string(hide_password=False)
    finally:
        with engine.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        engine.dispose()


@pytest.fixture(autouse=True)
def _logging_as_it_was() -> Iterator[None]:
    """The root logger's handlers and level restored after each test: a test that sets a
    process's logging up in-process (the CLI's commands call ``setup_logging``) must not
    leave pytest's own capture removed, or a handler on a stream the test closed."""
    import logging

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
    for handler in handlers:
        if handler not in root.handlers:
            root.addHandler(handler)
    root.setLevel(level)
