"""Store fixtures: a migrated SQLite file per test, and PostgreSQL when the project's test
cluster is up (``scripts/postgres.sh`` prints the URL for ``ONECLUSTER_TEST_PG_URL``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from onecluster.store import Store, make_engine, migrate
from onecluster.store._tables import Base


def _fresh_postgres(url: str) -> Store:
    engine = make_engine(url)
    with engine.begin() as conn:
        Base.metadata.drop_all(conn)
        conn.execute(text("DROP TABLE IF EXISTS alembic_version"))
    migrate(engine)
    return Store(engine)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A store on a fresh, migrated database."""
    if request.param == "sqlite":
        s = Store.open(f"sqlite:///{tmp_path / 'state.db'}")
    else:
        url = os.environ.get("ONECLUSTER_TEST_PG_URL")
        if not url:
            pytest.skip("ONECLUSTER_TEST_PG_URL is not set; start one with scripts/postgres.sh")
        s = _fresh_postgres(url)
    yield s
    s.close()
