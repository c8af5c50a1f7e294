"""The migrations build exactly the tables the ORM declares, and are safe to rerun."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, text

from onecluster.errors import ValidationError
from onecluster.store import Store, make_engine, migrate
from onecluster.store._tables import Base


def test_migrations_match_the_orm_tables(store: Store) -> None:
    with store.engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        assert compare_metadata(context, Base.metadata) == []


def test_migrate_twice_is_a_no_op_and_records_the_version(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'a.db'}")
    migrate(engine)
    migrate(engine)
    with engine.connect() as conn:
        version = conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one()
    assert version == "0011"
    assert {
        "jobs",
        "attempts",
        "tokens",
        "agents",
        "job_logs",
        "events",
        "datasets",
        "dataset_versions",
        "replicas",
        "scans",
        "transfers",
        "leadership",
        "servers",
        "queue_epoch",
        "fabrics",
        "drains",
        "fabric_epoch",
        "link_carry",
        "register_head",
        "register_entries",
        "register_checkpoints",
    } <= set(inspect(engine).get_table_names())
    engine.dispose()


def test_a_first_version_database_upgrades_in_place_keeping_its_rows(tmp_path: Path) -> None:
    from alembic import command
    from alembic.config import Config

    from onecluster.store import _engine

    engine = make_engine(f"sqlite:///{tmp_path / 'old.db'}")
    config = Config()
    config.set_main_option("script_location", str(_engine._MIGRATIONS))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0001")
        connection.execute(
            text(
                "INSERT INTO agents (site, agent_id, backend, last_heartbeat, capacity, down) "
                "VALUES ('tokyo', 'a1', 'slurm', 1.0, '{}', 0)"
            )
        )
    migrate(engine)
    with engine.connect() as conn:
        row = conn.execute(text("SELECT site, backend, problem FROM agents")).one()
    assert tuple(row) == ("tokyo", "slurm", None)
    engine.dispose()


def test_jobs_and_attempts_from_before_checkpoints_declare_none_and_were_not_preempted(
    tmp_path: Path,
) -> None:
    from alembic import command
    from alembic.config import Config

    from onecluster.store import _engine

    engine = make_engine(f"sqlite:///{tmp_path / 'old.db'}")
    config = Config()
    config.set_main_option("script_location", str(_engine._MIGRATIONS))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0006")
        connection.execute(
            text(
                "INSERT INTO jobs (id, name, team, state, gpus, gpu_types, duration_s, "
                "dataset_bytes, priority, preemptible, command, max_sites, submitted_at, "
                "queued_at, attempts, preemptions, borrowed, parts, log_size) VALUES ('j-1', "
                "'job', 'llm', 'pending', 8, '[]', 60.0, 0, 50, 1, '[\"true\"]', 1, 1.0, 1.0, "
                "1, 1, 0, '[]', 0)"
            )
        )
        connection.execute(
            text(
                "INSERT INTO attempts (id, job_id, run, site, gpu_type, gpus, parts, state, "
                "started_at, finished_at, borrowed, preemptible, waited_s, cost_per_gpu_hour, "
                "cost, log_size) VALUES ('j-1.1.0', 'j-1', 1, 'tokyo', 'H100', 8, '[]', "
                "'exited', 1.0, 61.0, 0, 1, 0.0, 2.0, 0.0, 0)"
            )
        )
    migrate(engine)
    store = Store(engine)
    job = store.job("j-1")
    assert (job.checkpoint_interval_s, job.checkpoint_on_sigterm) == (None, False)
    assert job.spec().kept_after(60.0) == 0.0
    [attempt] = store.attempts("j-1")
    assert (attempt.id, attempt.preempted) == ("j-1.1.0", False)
    store.close()


def test_sqlite_runs_in_wal_mode_with_a_busy_timeout(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'b.db'}")
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar_one() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar_one() == 30000
    engine.dispose()


def test_an_unsupported_database_url_is_refused() -> None:
    with pytest.raises(ValidationError, match="supports SQLite and PostgreSQL"):
        make_engine("mysql://localhost/db")
