"""Engines and migrations: SQLite (WAL) by default, PostgreSQL by URL.

SQLite gets WAL, a generous ``busy_timeout`` and ``BEGIN IMMEDIATE`` transactions, so that
concurrent writers queue up instead of failing with "database is locked" halfway through a
read-then-write transaction.  The schema is brought to the newest version with Alembic,
run in-process: no ``alembic.ini`` is needed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, OperationalError
from sqlalchemy.pool import ConnectionPoolEntry

from onecluster.errors import UnavailableError, ValidationError

__all__ = ["READ_ONLY_OPTION", "make_engine", "migrate"]

#: Execution option marking an engine whose transactions only read.
READ_ONLY_OPTION = "onecluster_read_only"

_MIGRATIONS = Path(__file__).parent / "migrations"
_BUSY_TIMEOUT_MS = 30_000


def make_engine(url: str) -> Engine:
    """An engine for ``url`` (``sqlite:///path`` or ``postgresql+psycopg://…``).

    Nothing is created: raises :class:`ValidationError` for a URL that is not one of those
    two kinds, and for a SQLite file whose folder does not exist (a typo in a path must not
    leave a tree of new folders behind; the server creates its own state folder).
    """
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        msg = f"database URL {url!r} cannot be parsed"
        raise ValidationError(msg, hint="use sqlite:///path or postgresql+psycopg://…") from exc
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            _require_folder(Path(parsed.database))
        engine = create_engine(
            parsed,
            connect_args={"check_same_thread": False, "timeout": _BUSY_TIMEOUT_MS / 1000},
            pool_size=8,
            max_overflow=16,
        )
        _tune_sqlite(engine)
        return engine
    if backend == "postgresql":
        return create_engine(parsed, pool_size=16, max_overflow=16, pool_pre_ping=True)
    msg = f"database URL {url!r} names {backend!r}; onecluster supports SQLite and PostgreSQL"
    raise ValidationError(msg, hint="use sqlite:///path or postgresql+psycopg://…")


def _require_folder(database: Path) -> None:
    folder = database.parent
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        msg = f"the SQLite database {database} cannot be created: {folder} {what}"
        raise ValidationError(
            msg, hint="create the folder first, or pass --db with one that exists"
        )


def _tune_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
        # Let SQLAlchemy's "begin" event, not the sqlite3 module, open transactions.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        # Writers take the write lock up front: a deferred transaction that reads and then
        # writes fails at once (SQLITE_BUSY) when another writer got in between.  Readers
        # (``READ_ONLY`` engines) read a WAL snapshot and never wait.
        if connection.get_execution_options().get(READ_ONLY_OPTION):
            connection.exec_driver_sql("BEGIN")
        else:
            connection.exec_driver_sql("BEGIN IMMEDIATE")


def migrate(engine: Engine) -> None:
    """Bring the schema of ``engine``'s database to the newest version (``upgrade head``).

    Idempotent.  Raises :class:`UnavailableError` when the database cannot be reached.
    """
    config = Config()
    config.set_main_option("script_location", str(_MIGRATIONS))
    try:
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "head")
    except OperationalError as exc:
        msg = f"the database at {engine.url.render_as_string()} cannot be reached: {exc.orig}"
        raise UnavailableError(msg, hint="check the database URL and that it is running") from exc
