"""The link board's carry: kept with the alerts it follows from, in one fenced transaction,
on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import inspect, text

from onecluster.errors import NotLeaderError
from onecluster.store import Store, fenced, make_engine, migrate


def test_nothing_is_kept_until_a_leader_writes_a_carry(store: Store) -> None:
    assert store.kept_links() is None
    store.keep_links([], None, now=1.0)  # nothing to write: no transaction
    assert store.kept_links() is None


def test_the_carry_is_kept_with_its_alerts_and_replaced_by_the_next(store: Store) -> None:
    store.keep_links([("link_down", "circuit x is down")], '{"first": 1}', now=1.0)
    kept = store.kept_links()
    assert kept is not None and kept.body == '{"first": 1}' and kept.age_s >= 0.0
    store.keep_links([], '{"second": 2}', now=2.0)
    store.keep_links([("link_up", "circuit x is measured up")], None, now=3.0)
    kept = store.kept_links()
    assert kept is not None and kept.body == '{"second": 2}'
    assert [e.kind for e in store.events(kind_prefix="link_")] == ["link_down", "link_up"]


def test_a_deposed_leader_keeps_neither_its_carry_nor_its_alerts(store: Store) -> None:
    old = store.lead("a", url=None, lease_s=0.2, now=1.0)
    with fenced(old.term, "a"):
        store.keep_links([], '{"by": "a"}', now=1.0)
    while not store.leader().vacant:
        pass
    store.lead("b", url=None, lease_s=30.0, now=2.0)
    with fenced(old.term, "a"), pytest.raises(NotLeaderError):
        store.keep_links([("link_down", "late")], '{"by": "a", "late": true}', now=3.0)
    kept = store.kept_links()
    assert kept is not None and kept.body == '{"by": "a"}'
    assert store.events(kind_prefix="link_") == []


def test_migration_0010_adds_the_table_with_its_empty_row(tmp_path: Path) -> None:
    from alembic import command
    from alembic.config import Config

    from onecluster.store import _engine

    engine = make_engine(f"sqlite:///{tmp_path / 'old.db'}")
    config = Config()
    config.set_main_option("script_location", str(_engine._MIGRATIONS))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0009")
    assert "link_carry" not in inspect(engine).get_table_names()
    migrate(engine)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT id, body FROM link_carry")).one() == (1, "")
    engine.dispose()
