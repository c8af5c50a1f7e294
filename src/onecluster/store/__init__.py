"""Persistent state: SQLAlchemy 2 tables, Alembic migrations and the :class:`Store` repository."""

from onecluster.store._engine import make_engine, migrate
from onecluster.store._lifecycle import AttemptFacts, Settlement, settle
from onecluster.store._records import (
    AgentReport,
    Assignment,
    EventRecord,
    LogChunk,
    PlacedPart,
    PreemptOrder,
    SiteRecord,
    StartOrder,
    SyncReport,
    TokenRecord,
)
from onecluster.store._store import Store
from onecluster.store._sync import DEFAULT_LEASE_S

__all__ = [
    "DEFAULT_LEASE_S",
    "AgentReport",
    "Assignment",
    "AttemptFacts",
    "EventRecord",
    "LogChunk",
    "PlacedPart",
    "PreemptOrder",
    "Settlement",
    "SiteRecord",
    "StartOrder",
    "Store",
    "SyncReport",
    "TokenRecord",
    "make_engine",
    "migrate",
    "settle",
]
