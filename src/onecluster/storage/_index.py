"""A site's index of what it holds: its replicas, and where each verified chunk lies.

One SQLite file (``<data-dir>/index.sqlite``, WAL) per agent.  A row of ``chunks`` exists
only for a chunk whose bytes were verified against its digest where the row says — by the
scan that read them, or by the receiver that wrote them — so the index is also a receive's
journal: after a crash, what it lists is never fetched again.  It is the agents' business
alone: 40 TB of 1 MiB chunks is 40 million rows, which never reach the control plane.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onecluster.errors import StorageError

__all__ = ["ChunkIndex", "Place", "ReplicaRecord"]

_SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS replicas (
    dataset TEXT NOT NULL,
    root BLOB NOT NULL,
    dir TEXT NOT NULL,
    complete INTEGER NOT NULL,
    in_place INTEGER NOT NULL,
    bytes_present INTEGER NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (dataset, root)
);
CREATE TABLE IF NOT EXISTS chunks (
    dataset TEXT NOT NULL,
    root BLOB NOT NULL,
    digest BLOB NOT NULL,
    path TEXT NOT NULL,
    offset INTEGER NOT NULL,
    size INTEGER NOT NULL,
    PRIMARY KEY (dataset, root, digest)
);
CREATE INDEX IF NOT EXISTS chunks_by_digest ON chunks (digest);
"""
_LOCATE = (
    "SELECT c.digest, r.dir, c.path, c.offset, c.size FROM chunks c JOIN replicas r "
    "ON r.dataset = c.dataset AND r.root = c.root WHERE c.digest IN ({marks})"
)
#: Digests per ``IN (…)`` query (SQLite's default limit on variables is 32,766).
_BATCH = 500


@dataclass(frozen=True, slots=True)
class ReplicaRecord:
    """A version held at this site: in ``dir``, complete or not, read in place (a
    registered directory) or received."""

    dataset: str
    root: bytes
    dir: Path
    complete: bool
    in_place: bool
    bytes_present: int
    updated_at: float


@dataclass(frozen=True, slots=True)
class Place:
    """Where a verified copy of a chunk lies at this site."""

    file: Path
    offset: int
    size: int


class ChunkIndex:
    """The index at ``path``; thread-safe (one connection behind a lock).

    Raises :class:`StorageError` when the file cannot be opened or written.
    """

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version not in (0, _SCHEMA_VERSION):
                msg = f"the data index {path} has format {version}; this agent reads 1"
                raise StorageError(msg, hint="run the agent version that wrote it")
            self._db.executescript(_SCHEMA)
            self._db.execute(f"PRAGMA user_version={_SCHEMA_VERSION}")
        except sqlite3.Error as exc:
            msg = f"cannot open the data index {path}: {exc}"
            raise StorageError(msg) from exc

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- replicas ----------------------------------------------------------------------------

    def put_replica(
        self,
        dataset: str,
        root: bytes,
        directory: Path,
        *,
        complete: bool,
        in_place: bool,
        bytes_present: int,
    ) -> None:
        """Record (or update) the replica of ``(dataset, root)``."""
        self._write(
            "INSERT INTO replicas VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (dataset, root) DO "
            "UPDATE SET dir = excluded.dir, complete = excluded.complete, in_place = "
            "excluded.in_place, bytes_present = excluded.bytes_present, updated_at = "
            "excluded.updated_at",
            [(dataset, root, str(directory), complete, in_place, bytes_present, time.time())],
        )

    def replica(self, dataset: str, root: bytes) -> ReplicaRecord | None:
        rows = self._read("SELECT * FROM replicas WHERE dataset = ? AND root = ?", (dataset, root))
        return _replica(rows[0]) if rows else None

    def replicas(self) -> list[ReplicaRecord]:
        return [_replica(r) for r in self._read("SELECT * FROM replicas ORDER BY dataset", ())]

    def drop_replica(self, dataset: str, root: bytes) -> None:
        """Forget the replica and every chunk row of it (its files are the caller's)."""
        with self._lock, self._transaction():
            self._db.execute("DELETE FROM chunks WHERE dataset = ? AND root = ?", (dataset, root))
            self._db.execute("DELETE FROM replicas WHERE dataset = ? AND root = ?", (dataset, root))

    # -- chunks -----------------------------------------------------------------------------

    def add_chunks(
        self, dataset: str, root: bytes, rows: Iterable[tuple[bytes, str, int, int]]
    ) -> None:
        """Record verified chunks of the replica: ``(digest, path, offset, size)``."""
        self._write(
            "INSERT OR IGNORE INTO chunks VALUES (?, ?, ?, ?, ?, ?)",
            ((dataset, root, d, p, o, s) for d, p, o, s in rows),
        )

    def present(self, dataset: str, root: bytes) -> set[bytes]:
        """The digests recorded for the replica."""
        rows = self._read(
            "SELECT digest FROM chunks WHERE dataset = ? AND root = ?", (dataset, root)
        )
        return {r[0] for r in rows}

    def forget_chunk(self, dataset: str, root: bytes, chunk: bytes) -> None:
        """Drop a row found stale (its bytes no longer match)."""
        self._write(
            "DELETE FROM chunks WHERE dataset = ? AND root = ? AND digest = ?",
            [(dataset, root, chunk)],
        )

    def locate(self, digests: Iterable[bytes]) -> dict[bytes, Place]:
        """A verified copy at this site of each of ``digests`` that has one."""
        found: dict[bytes, Place] = {}
        for batch in _batched(list(digests)):
            marks = ",".join("?" * len(batch))
            sql = _LOCATE.format(marks=marks)  # only placeholders are formatted in
            rows = self._read(sql, tuple(batch))
            for chunk, directory, path, offset, size in rows:
                found.setdefault(chunk, Place(Path(directory) / path, offset, size))
        return found

    # -- plumbing ---------------------------------------------------------------------------

    def _transaction(self) -> _Transaction:
        return _Transaction(self._db)

    def _write(self, sql: str, rows: Iterable[tuple[object, ...]]) -> None:
        try:
            with self._lock, self._transaction():
                self._db.executemany(sql, rows)
        except sqlite3.Error as exc:
            msg = f"cannot write the data index: {exc}"
            raise StorageError(msg) from exc

    def _read(self, sql: str, args: tuple[object, ...]) -> list[tuple[Any, ...]]:
        try:
            with self._lock:
                return list(self._db.execute(sql, args))
        except sqlite3.Error as exc:
            msg = f"cannot read the data index: {exc}"
            raise StorageError(msg) from exc


class _Transaction:
    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: object, value: object, tb: object) -> None:
        self._db.execute("COMMIT" if kind is None else "ROLLBACK")


def _batched(items: list[bytes]) -> Iterator[list[bytes]]:
    for i in range(0, len(items), _BATCH):
        yield items[i : i + _BATCH]


def _replica(row: tuple[Any, ...]) -> ReplicaRecord:
    dataset, root, directory, complete, in_place, bytes_present, updated_at = row
    return ReplicaRecord(
        dataset=str(dataset),
        root=bytes(root),
        dir=Path(str(directory)),
        complete=bool(complete),
        in_place=bool(in_place),
        bytes_present=int(bytes_present),
        updated_at=float(updated_at),
    )
