"""The two databases the gateway's store runs on, behind one small connection type.

* **SQLite** (a file path): every gateway process of one host opens the same file; a write
  transaction is ``BEGIN IMMEDIATE``, so SQLite's write lock serialises them.  Fast enough to
  run on the event loop (tens of µs a transaction).
* **PostgreSQL** (``postgresql://…``): gateway processes on several hosts share it; a write
  transaction takes one transaction-scoped advisory lock, which serialises them the same
  way.  Round trips make it slow for the event loop, so the batcher calls it from a thread.

The store writes its SQL once, in the dialect both accept (``ON CONFLICT`` upserts, ``?``
marks, rewritten to ``%s`` for psycopg).  DDL differs only where the types must:
``{BLOB}`` and ``{SEQ}`` (an auto-incrementing key) and ``{NOROWID}``.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from onecluster.errors import UnavailableError, ValidationError

__all__ = ["Database", "connect"]

_LOCK_KEY = 7_460_001  # the gateway's advisory lock on PostgreSQL

_DDL = {
    "sqlite": {
        "{BLOB}": "BLOB",
        "{SEQ}": "INTEGER PRIMARY KEY AUTOINCREMENT",
        "{NOROWID}": " WITHOUT ROWID",
    },
    "postgresql": {
        "{BLOB}": "BYTEA",
        "{SEQ}": "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
        "{NOROWID}": "",
    },
}


class Database:
    """One connection; not for two threads at once."""

    def __init__(self, kind: str, raw: Any, where: str) -> None:
        self.kind = kind
        self.where = where
        self._raw = raw

    @property
    def blocking(self) -> bool:
        """True when a transaction takes network round trips (keep it off the event loop)."""
        return self.kind == "postgresql"

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.kind == "postgresql" else sql

    def ddl(self, text: str) -> str:
        """``text`` with this database's types."""
        for mark, value in _DDL[self.kind].items():
            text = text.replace(mark, value)
        return text

    def execute(self, sql: str, params: Sequence[object] = ()) -> Any:
        """Run one statement; the cursor (``fetchone``, ``fetchall``, ``rowcount``)."""
        return self._raw.execute(self._sql(sql), tuple(params))

    def executemany(self, sql: str, rows: Sequence[Sequence[object]]) -> None:
        """Run one statement for each of ``rows``."""
        if self.kind == "postgresql":
            with self._raw.cursor() as cursor:
                cursor.executemany(self._sql(sql), rows)
        else:
            self._raw.executemany(sql, rows)

    @contextmanager
    def write(self) -> Iterator[Database]:
        """A transaction that holds the gateway's write lock; rolled back on any error."""
        try:
            if self.kind == "postgresql":
                self._raw.execute("BEGIN")
                self._raw.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
            else:
                self._raw.execute("BEGIN IMMEDIATE")
            yield self
        except BaseException:
            # Also when BEGIN or the lock failed (a statement timeout): the connection must
            # leave the aborted transaction, or every later one fails.
            with contextlib.suppress(Exception):
                self._raw.execute("ROLLBACK")
            raise
        self._raw.execute("COMMIT")

    def close(self) -> None:
        """Close the connection."""
        self._raw.close()


def connect(db: str | Path) -> Database:
    """A connection to ``db``: a SQLite file path, or a ``postgresql://`` URL."""
    text = str(db)
    if text.startswith(("postgresql://", "postgresql+psycopg://", "postgres://")):
        return _postgres(text.replace("postgresql+psycopg://", "postgresql://", 1))
    if "://" in text:
        msg = f"--db {text!r}: a gateway database is a SQLite file or a postgresql:// URL"
        raise ValidationError(msg)
    path = Path(text)
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    raw.execute("PRAGMA busy_timeout = 30000")
    raw.execute("PRAGMA journal_mode = WAL")
    raw.execute("PRAGMA synchronous = NORMAL")
    return Database("sqlite", raw, str(path))


def _postgres(url: str) -> Database:
    try:
        import psycopg  # noqa: PLC0415  (an optional extra: onecluster[postgres])
    except ImportError:
        msg = "a PostgreSQL gateway database needs psycopg"
        raise ValidationError(msg, hint="pip install 'onecluster[postgres]'") from None
    try:
        raw = psycopg.connect(url, autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as exc:
        host = url.rsplit("@", 1)[-1]
        msg = f"the gateway database at {host} cannot be reached ({type(exc).__name__})"
        raise UnavailableError(msg) from None
    return Database("postgresql", raw, url.rsplit("@", 1)[-1])
