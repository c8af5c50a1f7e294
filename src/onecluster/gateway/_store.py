"""The gateway's state in one SQLite file: keys, sealed provider keys, quota counters, the
calls in flight, the ledger and the audit.

Every gateway process of a site opens the same file (WAL mode); each batch of quota work is
one ``BEGIN IMMEDIATE`` transaction, so SQLite's write lock makes admission decisions of all
processes one serial history: a limit is never multiplied by the number of processes.  The
schema is versioned (``gw_meta.schema_version``) and migrated forward on open.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

import orjson

from onecluster.errors import (
    ConflictError,
    NotFoundError,
    PlatformError,
    UnavailableError,
    ValidationError,
)
from onecluster.gateway._config import KeyLimits
from onecluster.gateway._keys import IssuedKey, KeyRecord, hash_key, new_key
from onecluster.gateway._quota import (
    Admitted,
    Ask,
    Counter,
    Decision,
    Limits,
    Period,
    ScopeState,
    bucket_of,
    decide,
    settlement,
)
from onecluster.gateway._records import BillLine, CallRecord, Reservation
from onecluster.gateway._sql import Database, connect

__all__ = ["GatewayStore", "OpResult", "ReserveOp", "SettleOp"]

SCHEMA_VERSION = 1

_MIGRATIONS: dict[int, str] = {
    1: """
    CREATE TABLE gw_keys (
        key_id TEXT PRIMARY KEY, team TEXT NOT NULL, name TEXT NOT NULL,
        hash TEXT NOT NULL UNIQUE, created_at DOUBLE PRECISION NOT NULL,
        revoked_at DOUBLE PRECISION, limits TEXT NOT NULL);
    CREATE TABLE gw_provider_keys (
        upstream TEXT PRIMARY KEY, sealed {BLOB} NOT NULL, updated_at DOUBLE PRECISION NOT NULL);
    CREATE TABLE gw_counters (
        scope TEXT NOT NULL, period TEXT NOT NULL, bucket BIGINT NOT NULL,
        requests BIGINT NOT NULL DEFAULT 0, tokens BIGINT NOT NULL DEFAULT 0,
        reserved_tokens BIGINT NOT NULL DEFAULT 0, spend BIGINT NOT NULL DEFAULT 0,
        reserved_spend BIGINT NOT NULL DEFAULT 0,
        PRIMARY KEY (scope, period, bucket)){NOROWID};
    CREATE TABLE gw_inflight (
        request_id TEXT PRIMARY KEY, started_at DOUBLE PRECISION NOT NULL,
        scopes TEXT NOT NULL, minute BIGINT NOT NULL, day BIGINT NOT NULL,
        month BIGINT NOT NULL, tokens BIGINT NOT NULL, spend BIGINT NOT NULL);
    CREATE TABLE gw_ledger (
        request_id TEXT PRIMARY KEY, at DOUBLE PRECISION NOT NULL, month BIGINT NOT NULL,
        team TEXT NOT NULL, key_id TEXT NOT NULL, model TEXT NOT NULL,
        upstream TEXT NOT NULL, egress TEXT NOT NULL, prompt_tokens BIGINT NOT NULL,
        completion_tokens BIGINT NOT NULL, cost BIGINT NOT NULL,
        estimated BIGINT NOT NULL, outcome TEXT NOT NULL);
    CREATE INDEX gw_ledger_month ON gw_ledger (month, team);
    CREATE TABLE gw_audit (
        seq {SEQ}, request_id TEXT NOT NULL, at DOUBLE PRECISION NOT NULL,
        team TEXT NOT NULL, key_id TEXT NOT NULL, model TEXT NOT NULL, endpoint TEXT NOT NULL,
        stream BIGINT NOT NULL, region TEXT NOT NULL, upstream TEXT NOT NULL,
        egress TEXT NOT NULL, http_status BIGINT NOT NULL, outcome TEXT NOT NULL,
        prompt_tokens BIGINT NOT NULL, completion_tokens BIGINT NOT NULL,
        cost BIGINT NOT NULL, estimated BIGINT NOT NULL, latency_ms DOUBLE PRECISION NOT NULL,
        overhead_ms DOUBLE PRECISION NOT NULL, attempts BIGINT NOT NULL, error TEXT NOT NULL,
        prompt TEXT, response TEXT);
    CREATE INDEX gw_audit_at ON gw_audit (at);
    """,
}

_UPSERT = """
INSERT INTO gw_counters (scope, period, bucket, requests, tokens, reserved_tokens, spend,
                         reserved_spend)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (scope, period, bucket) DO UPDATE SET
    requests = gw_counters.requests + excluded.requests,
    tokens = gw_counters.tokens + excluded.tokens,
    reserved_tokens = gw_counters.reserved_tokens + excluded.reserved_tokens,
    spend = gw_counters.spend + excluded.spend,
    reserved_spend = gw_counters.reserved_spend + excluded.reserved_spend
"""

_AUDIT = """
INSERT INTO gw_audit (request_id, at, team, key_id, model, endpoint, stream, region, upstream,
    egress, http_status, outcome, prompt_tokens, completion_tokens, cost, estimated,
    latency_ms, overhead_ms, attempts, error, prompt, response)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""


@dataclass(frozen=True, slots=True)
class ReserveOp:
    """Admit a call against ``scopes`` (each with its limits) or refuse it."""

    request_id: str
    scopes: tuple[tuple[str, Limits], ...]
    ask: Ask
    now: float
    idempotent: bool = False
    """The id came from the client's Idempotency-Key (so it may repeat a billed call)."""


@dataclass(frozen=True, slots=True)
class SettleOp:
    """Replace ``reservation`` (if any) by actual use and write the call's rows."""

    record: CallRecord
    reservation: Reservation | None


OpResult = Decision | Reservation | ConflictError | UnavailableError | bool


class GatewayStore:
    """One connection to the gateway's database; not shared between threads."""

    def __init__(self, db: str | Path) -> None:
        self._db = connect(db)
        self.where = self._db.where
        self._migrate()

    @property
    def blocking(self) -> bool:
        """True on PostgreSQL: its transactions belong off the event loop."""
        return self._db.blocking

    def close(self) -> None:
        """Close the connection."""
        self._db.close()

    def _write(self) -> AbstractContextManager[Database]:
        return self._db.write()

    def _migrate(self) -> None:
        with self._write() as db:
            db.execute("CREATE TABLE IF NOT EXISTS gw_meta (key TEXT PRIMARY KEY, value TEXT)")
            row = db.execute("SELECT value FROM gw_meta WHERE key = 'schema_version'").fetchone()
            version = int(row[0]) if row else 0
            if version > SCHEMA_VERSION:
                msg = f"{self.where} has gateway schema {version}; this onecluster knows "
                msg += f"{SCHEMA_VERSION} at most"
                raise ValidationError(msg, hint="upgrade onecluster")
            for step in range(version + 1, SCHEMA_VERSION + 1):
                for statement in db.ddl(_MIGRATIONS[step]).split(";"):
                    if statement.strip():
                        db.execute(statement)
            db.execute(
                "INSERT INTO gw_meta VALUES ('schema_version', ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(SCHEMA_VERSION),),
            )

    # ----- keys ---------------------------------------------------------------------------

    def issue_key(self, team: str, name: str, limits: KeyLimits, now: float) -> IssuedKey:
        """A new key for ``team``; its secret is returned here and never again."""
        key_id, secret = new_key()
        with self._write() as db:
            db.execute(
                "INSERT INTO gw_keys VALUES (?, ?, ?, ?, ?, NULL, ?)",
                (key_id, team, name, hash_key(secret), now, limits.model_dump_json()),
            )
        return IssuedKey(KeyRecord(key_id, team, name, now, None, limits), secret)

    def revoke_key(self, key_id: str, now: float) -> KeyRecord:
        """Revoke ``key_id``; :class:`NotFoundError` if there is no such key."""
        with self._write() as db:
            found = db.execute("SELECT revoked_at FROM gw_keys WHERE key_id = ?", (key_id,))
            row = found.fetchone()
            if row is None:
                msg = f"there is no gateway key {key_id}"
                raise NotFoundError(msg, hint="`onecluster gateway keys list` shows them")
            if row[0] is not None:
                msg = f"key {key_id} was already revoked"
                raise ConflictError(msg)
            db.execute("UPDATE gw_keys SET revoked_at = ? WHERE key_id = ?", (now, key_id))
        row = self._db.execute(
            "SELECT key_id, team, name, created_at, revoked_at, limits FROM gw_keys "
            "WHERE key_id = ?",
            (key_id,),
        ).fetchone()
        return _key_record(row)

    def team_keys(self, team: str | None = None) -> list[KeyRecord]:
        """Every key (of ``team``), oldest first."""
        where, params = ("WHERE team = ?", (team,)) if team is not None else ("", ())
        rows = self._db.execute(
            "SELECT key_id, team, name, created_at, revoked_at, limits FROM gw_keys "  # noqa: S608  (no user text)
            f"{where} ORDER BY created_at",
            params,
        ).fetchall()
        return [_key_record(r) for r in rows]

    def key_by_hash(self, digest: str) -> KeyRecord | None:
        """The key whose SHA-256 is ``digest`` (revoked or not)."""
        row = self._db.execute(
            "SELECT key_id, team, name, created_at, revoked_at, limits FROM gw_keys WHERE hash = ?",
            (digest,),
        ).fetchone()
        return _key_record(row) if row else None

    def key_hashes(self) -> dict[str, KeyRecord]:
        """Every key by its hash (the gateway's in-memory cache is refreshed from this)."""
        rows = self._db.execute(
            "SELECT key_id, team, name, created_at, revoked_at, limits, hash FROM gw_keys"
        ).fetchall()
        return {r[6]: _key_record(r[:6]) for r in rows}

    # ----- provider keys ------------------------------------------------------------------

    def set_provider_key(self, upstream: str, sealed: bytes, now: float) -> None:
        """Store ``upstream``'s sealed key (replacing any)."""
        with self._write() as db:
            db.execute(
                "INSERT INTO gw_provider_keys VALUES (?, ?, ?) ON CONFLICT (upstream) "
                "DO UPDATE SET sealed = excluded.sealed, updated_at = excluded.updated_at",
                (upstream, sealed, now),
            )

    def provider_keys(self) -> dict[str, bytes]:
        """Every upstream's sealed key."""
        rows = self._db.execute("SELECT upstream, sealed FROM gw_provider_keys").fetchall()
        return {r[0]: bytes(r[1]) for r in rows}

    # ----- quota, ledger and audit --------------------------------------------------------

    def apply(self, ops: Sequence[ReserveOp | SettleOp]) -> list[OpResult]:
        """Run ``ops`` in order in one transaction.

        A :class:`ReserveOp` yields its :class:`Reservation` (admitted), the refusal, or a
        :class:`ConflictError` (its Idempotency-Key is in flight or billed); a
        :class:`SettleOp` yields ``False`` when its request id was already in the ledger
        (a retry: nothing billed twice).
        """
        try:
            with self._write() as db:
                return [_apply_one(db, op) for op in ops]
        except PlatformError:
            raise
        except Exception:
            if len(ops) == 1:
                raise
        # One operation spoilt the batch: run each alone, so only it fails.
        results: list[OpResult] = []
        for op in ops:
            try:
                with self._write() as db:
                    results.append(_apply_one(db, op))
            except Exception as exc:  # noqa: BLE001  (the failure is that op's result)
                results.append(UnavailableError(f"the gateway's database refused it ({exc})"))
        return results

    def release_stale(self, older_than: float) -> int:
        """Release reservations of calls started before ``older_than`` (a crashed process's)."""
        with self._write() as db:
            rows = db.execute(
                "SELECT request_id, scopes, minute, day, month, tokens, spend FROM gw_inflight "
                "WHERE started_at < ?",
                (older_than,),
            ).fetchall()
            for request_id, scopes, minute, day, month, tokens, spend in rows:
                held = Reservation(
                    request_id, tuple(orjson.loads(scopes)), minute, day, month, Ask(tokens, spend)
                )
                _release(db, held, 0, 0)
                db.execute("DELETE FROM gw_inflight WHERE request_id = ?", (request_id,))
        return len(rows)

    def prune_counters(self, now: float) -> None:
        """Drop minute windows older than the previous one."""
        with self._write() as db:
            db.execute(
                "DELETE FROM gw_counters WHERE period = 'minute' AND bucket < ?",
                (bucket_of(Period.MINUTE, now) - 1,),
            )

    def counters(self, scope: str, now: float) -> dict[Period, Counter]:
        """``scope``'s current windows (for status pages and tests)."""
        return _read(self._db, (scope,), now)[scope]

    def bill(self, month: int) -> list[BillLine]:
        """Usage per team and model in ``month`` (``year * 12 + month - 1``), from the ledger."""
        rows = self._db.execute(
            "SELECT team, model, COUNT(*), CAST(SUM(prompt_tokens) AS BIGINT), "
            "CAST(SUM(completion_tokens) AS BIGINT), CAST(SUM(cost) AS BIGINT), "
            "CAST(SUM(estimated) AS BIGINT) FROM gw_ledger WHERE month = ? "
            "GROUP BY team, model ORDER BY team, model",
            (month,),
        ).fetchall()
        return [BillLine(*r) for r in rows]

    def audit_rows(self, request_id: str | None = None) -> list[dict[str, object]]:
        """Audit rows (of one call), oldest first, as column → value."""
        if request_id is None:
            cursor = self._db.execute("SELECT * FROM gw_audit ORDER BY seq")
        else:
            cursor = self._db.execute(
                "SELECT * FROM gw_audit WHERE request_id = ? ORDER BY seq", (request_id,)
            )
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def ledger_rows(self) -> list[dict[str, object]]:
        """Every ledger row, oldest first, as column → value."""
        cursor = self._db.execute("SELECT * FROM gw_ledger ORDER BY at")
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _key_record(row: Sequence[object]) -> KeyRecord:
    key_id, team, name, created_at, revoked_at, limits = row
    return KeyRecord(
        str(key_id),
        str(team),
        str(name),
        float(created_at),  # type: ignore[arg-type]
        None if revoked_at is None else float(revoked_at),  # type: ignore[arg-type]
        KeyLimits.model_validate_json(str(limits)),
    )


def _apply_one(db: Database, op: ReserveOp | SettleOp) -> OpResult:
    return _reserve(db, op) if isinstance(op, ReserveOp) else _settle(db, op)


def _read(db: Database, scopes: Sequence[str], now: float) -> dict[str, dict[Period, Counter]]:
    minute = bucket_of(Period.MINUTE, now)
    day = bucket_of(Period.DAY, now)
    month = bucket_of(Period.MONTH, now)
    found: dict[str, dict[Period, Counter]] = {
        s: {Period.MINUTE: Counter(), Period.DAY: Counter(), Period.MONTH: Counter()}
        for s in scopes
    }
    marks = ",".join("?" * len(scopes))
    rows = db.execute(
        "SELECT scope, period, requests, tokens, reserved_tokens, spend, reserved_spend "  # noqa: S608  (only '?' marks are interpolated)
        f"FROM gw_counters WHERE scope IN ({marks}) AND ((period = 'minute' AND bucket = ?) "
        "OR (period = 'day' AND bucket = ?) OR (period = 'month' AND bucket = ?))",
        (*scopes, minute, day, month),
    ).fetchall()
    for scope, period, *values in rows:
        found[scope][Period(period)] = Counter(*values)
    return found


def _reserve(db: Database, op: ReserveOp) -> Decision | Reservation | ConflictError:
    billed = "SELECT 1 FROM gw_ledger WHERE request_id = ?"
    if op.idempotent and db.execute(billed, (op.request_id,)).fetchone():
        msg = "a call with this Idempotency-Key was already answered and billed"
        return ConflictError(msg, hint="use a new Idempotency-Key for a new call")
    names = tuple(s for s, _ in op.scopes)
    windows = _read(db, names, op.now)
    states = [
        ScopeState(
            s, limits, windows[s][Period.MINUTE], windows[s][Period.DAY], windows[s][Period.MONTH]
        )
        for s, limits in op.scopes
    ]
    decision = decide(states, op.ask, op.now)
    if not isinstance(decision, Admitted):
        return decision
    held = Reservation(
        op.request_id,
        names,
        bucket_of(Period.MINUTE, op.now),
        bucket_of(Period.DAY, op.now),
        bucket_of(Period.MONTH, op.now),
        op.ask,
    )
    inserted = db.execute(
        "INSERT INTO gw_inflight VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        (
            op.request_id,
            op.now,
            orjson.dumps(list(names)).decode(),
            held.minute,
            held.day,
            held.month,
            op.ask.tokens,
            op.ask.spend,
        ),
    )
    if inserted.rowcount == 0:
        msg = "a call with this Idempotency-Key is still in flight"
        return ConflictError(msg, hint="wait for it, or use a new Idempotency-Key")
    rows = []
    for scope in names:
        rows.append((scope, "minute", held.minute, 1, 0, op.ask.tokens, 0, 0))
        rows.append((scope, "day", held.day, 1, 0, 0, 0, op.ask.spend))
        rows.append((scope, "month", held.month, 1, 0, 0, 0, op.ask.spend))
    db.executemany(_UPSERT, rows)
    return held


def _release(
    db: Database,
    held: Reservation,
    tokens: int,
    spend: int,
    *,
    reserved: bool = True,
    answered: bool = True,
) -> None:
    """Count ``tokens`` and ``spend`` in ``held``'s windows and drop its reservation (unless
    ``reserved`` is false: the janitor has released it already); a call no upstream
    ``answered`` gives its request back (:func:`settlement`).  The janitor's release of a
    crashed process's call keeps the request: whether it was answered is not known."""
    minute, money = settlement(
        held.ask if reserved else Ask(0, 0), tokens, spend, answered=answered
    )
    rows = []
    for scope in held.scopes:
        rows.append(
            (scope, "minute", held.minute, minute.requests, minute.tokens,
             minute.reserved_tokens, 0, 0)
        )  # fmt: skip
        for period, bucket in (("day", held.day), ("month", held.month)):
            rows.append(
                (scope, period, bucket, money.requests, 0, 0, money.spend, money.reserved_spend)
            )
    db.executemany(_UPSERT, rows)


def _settle(db: Database, op: SettleOp) -> bool:
    rec = op.record
    held = op.reservation
    fresh = True
    if rec.billed:
        cursor = db.execute(
            "INSERT INTO gw_ledger VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            (
                rec.request_id,
                rec.at,
                held.month if held else bucket_of(Period.MONTH, rec.at),  # the counters' month
                rec.team,
                rec.key_id,
                rec.model,
                rec.upstream,
                rec.egress,
                rec.prompt_tokens,
                rec.completion_tokens,
                rec.cost,
                int(rec.estimated),
                rec.outcome,
            ),
        )
        fresh = cursor.rowcount == 1
    if held is not None:
        # A call the janitor took for a crashed process's has no reservation left to drop.
        gone = db.execute("DELETE FROM gw_inflight WHERE request_id = ?", (rec.request_id,))
        tokens = rec.prompt_tokens + rec.completion_tokens
        _release(
            db,
            held,
            tokens if fresh else 0,
            rec.cost if fresh else 0,
            reserved=gone.rowcount == 1,
            answered=rec.billed,
        )
    db.execute(
        _AUDIT,
        (
            rec.request_id,
            rec.at,
            rec.team,
            rec.key_id,
            rec.model,
            rec.endpoint,
            int(rec.stream),
            rec.region,
            rec.upstream,
            rec.egress,
            rec.http_status,
            rec.outcome,
            rec.prompt_tokens,
            rec.completion_tokens,
            rec.cost,
            int(rec.estimated),
            rec.latency_ms,
            rec.overhead_ms,
            rec.attempts,
            rec.error,
            rec.prompt,
            rec.response,
        ),
    )
    return fresh
