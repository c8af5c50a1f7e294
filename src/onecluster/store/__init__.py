"""Persistent state: SQLAlchemy 2 tables, Alembic migrations and the :class:`Store` repository."""

from onecluster.store._data import DataStore
from onecluster.store._data_records import (
    ACTIVE_SCAN_STATES,
    ACTIVE_TRANSFER_STATES,
    DataEndpoint,
    DatasetLocality,
    DatasetRecord,
    DataSync,
    DataWork,
    PathSample,
    PushResult,
    ReplicaHeld,
    ReplicaRecord,
    ScanProgress,
    ScanRecord,
    TransferProgress,
    TransferRecord,
    VersionRecord,
)
from onecluster.store._engine import make_engine, migrate
from onecluster.store._export_records import (
    ACTIVE_EXPORT_STATES,
    ApprovalRecord,
    ExportRecord,
    NewApproval,
    NewExport,
)
from onecluster.store._exports import Exports
from onecluster.store._fabrics import DrainRecord, FabricEpoch, FabricRecord, NewFabric
from onecluster.store._leadership import LeaderRecord, QueueNews, ServerRecord, new_holder_id
from onecluster.store._lifecycle import AttemptFacts, Settlement, settle
from onecluster.store._link_carry import KeptLinks
from onecluster.store._records import (
    AgentReport,
    Assignment,
    EventRecord,
    GangMember,
    LogChunk,
    PlacedPart,
    PreemptOrder,
    SiteRecord,
    StartOrder,
    SyncReport,
    TokenRecord,
)
from onecluster.store._staging import Staging, StagingAttempt
from onecluster.store._store import Store
from onecluster.store._sync import DEFAULT_LEASE_S
from onecluster.store._transactions import fenced
from onecluster.store._transitions import STAGE_CHECK

__all__ = [
    "ACTIVE_EXPORT_STATES",
    "ACTIVE_SCAN_STATES",
    "ACTIVE_TRANSFER_STATES",
    "DEFAULT_LEASE_S",
    "STAGE_CHECK",
    "AgentReport",
    "ApprovalRecord",
    "Assignment",
    "AttemptFacts",
    "DataEndpoint",
    "DataStore",
    "DataSync",
    "DataWork",
    "DatasetLocality",
    "DatasetRecord",
    "DrainRecord",
    "EventRecord",
    "ExportRecord",
    "Exports",
    "FabricEpoch",
    "FabricRecord",
    "GangMember",
    "KeptLinks",
    "LeaderRecord",
    "LogChunk",
    "NewApproval",
    "NewExport",
    "NewFabric",
    "PathSample",
    "PlacedPart",
    "PreemptOrder",
    "PushResult",
    "QueueNews",
    "ReplicaHeld",
    "ReplicaRecord",
    "ScanProgress",
    "ScanRecord",
    "ServerRecord",
    "Settlement",
    "SiteRecord",
    "Staging",
    "StagingAttempt",
    "StartOrder",
    "Store",
    "SyncReport",
    "TokenRecord",
    "TransferProgress",
    "TransferRecord",
    "VersionRecord",
    "fenced",
    "make_engine",
    "migrate",
    "new_holder_id",
    "settle",
]
