"""The typed configuration of ``onecluster up``, built by the CLI and passed down."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from onecluster.errors import ValidationError

__all__ = ["MAX_REPLICAS", "UpConfig"]

#: The most server replicas ``up`` starts: each is a process on this one machine, and past
#: a few, more add no availability (they share its host), only load.
MAX_REPLICAS = 5
_DB_HINT = "use postgresql://user@host:port/database (or postgresql+psycopg://…)"


@dataclass(frozen=True, slots=True, kw_only=True)
class UpConfig:
    """Everything ``up`` needs.

    ``port=None`` means 8080 if it is free, else any free port.  ``trace_path`` is the trace
    to replay a slice of; ``None`` means the fitted generator.  ``jobs=None`` sizes the
    workload from ``duration_s``.  ``wait=False`` stops everything right after the summary.
    ``keep_state`` keeps the database and agent directories of an earlier run.  ``python`` is
    the interpreter the children run under.

    ``db_url=None`` puts the one server's database in SQLite under ``state_dir``; a URL (SQLite
    or PostgreSQL) is passed to every server.  ``replicas`` servers are started on that
    database; more than one needs PostgreSQL (SQLite serves one process only).

    Construction raises :class:`ValidationError` for values that cannot work, before anything
    is started: a duration, port or job count out of range, a database URL that cannot be
    parsed or names neither SQLite nor PostgreSQL, ``replicas`` outside 1 to
    :data:`MAX_REPLICAS`, or several replicas without PostgreSQL.
    """

    fabric_path: Path
    state_dir: Path = Path(".state")
    host: str = "127.0.0.1"
    port: int | None = None
    duration_s: float = 90.0
    trace_path: Path | None = None
    jobs: int | None = None
    seed: int = 1
    wait: bool = True
    keep_state: bool = False
    db_url: str | None = None
    replicas: int = 1
    startup_timeout_s: float = 60.0
    stop_grace_s: float = 10.0
    python: str = field(default=sys.executable)

    def __post_init__(self) -> None:
        if not (self.duration_s > 0 and math.isfinite(self.duration_s)):
            msg = f"the replay duration must be greater than 0 seconds (got {self.duration_s})"
            raise ValidationError(msg)
        if self.port is not None and not 1 <= self.port <= 65535:
            msg = f"port {self.port} is not between 1 and 65535"
            raise ValidationError(msg)
        if self.jobs is not None and self.jobs < 1:
            msg = f"the workload needs at least one job (got {self.jobs})"
            raise ValidationError(msg)
        if not self.startup_timeout_s > 0:
            msg = "the startup timeout must be greater than 0 seconds"
            raise ValidationError(msg)
        if not 1 <= self.replicas <= MAX_REPLICAS:
            msg = f"--replicas {self.replicas} is not between 1 and {MAX_REPLICAS}"
            raise ValidationError(msg, hint="one replica, or a few on PostgreSQL")
        backend = database_backend(self.db_url) if self.db_url is not None else "sqlite"
        if self.replicas > 1 and backend != "postgresql":
            where = "SQLite in the state folder" if self.db_url is None else "SQLite"
            msg = f"{self.replicas} server replicas need PostgreSQL; the database is {where}"
            raise ValidationError(
                msg,
                hint="give --db postgresql://… (docs/operations.md), or drop --replicas "
                "for one server on SQLite",
            )

    @property
    def job_count(self) -> int:
        """Jobs to replay: ``jobs``, or about 3.5 per second of replay (8 to 600).

        Enough jobs that gangs stay node-sized (8–32 GPUs) and the queue, borrowing and
        preemption are visible; few enough that a 2-core machine runs them as real processes.
        """
        if self.jobs is not None:
            return self.jobs
        return max(8, min(600, round(self.duration_s * 3.5)))


def database_backend(url: str) -> str:
    """``"sqlite"`` or ``"postgresql"``: the kind of database ``url`` names (parsed, never
    opened).  :class:`ValidationError` for a URL that cannot be parsed or names another kind."""
    try:
        backend = make_url(url).get_backend_name()
    except ArgumentError as exc:
        msg = f"--db {url!r} is not a database URL"
        raise ValidationError(msg, hint=_DB_HINT) from exc
    if backend not in ("sqlite", "postgresql"):
        shown = make_url(url).render_as_string(hide_password=True)
        msg = f"--db {shown!r} names {backend!r}; onecluster supports SQLite and PostgreSQL"
        raise ValidationError(msg, hint=_DB_HINT)
    return backend
