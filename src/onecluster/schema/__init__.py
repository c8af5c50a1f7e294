"""The REST API's wire format, defined once and used by the server and the SDK."""

from onecluster.schema._agent import (
    AgentSync,
    AgentSyncReply,
    AttemptReport,
    DesiredAttempt,
    LogChunkIn,
)
from onecluster.schema._bounds import MAX_ID, MAX_INT, MAX_LOG_CHARS
from onecluster.schema._cluster import (
    HealthOut,
    PoolOut,
    SiteOut,
    SiteStatsOut,
    StatsOut,
    TeamOut,
)
from onecluster.schema._errors import ErrorDetail, ErrorOut
from onecluster.schema._jobs import GB, JobOut, JobSubmit, LogsOut, PartOut, PriorityName
from onecluster.schema._links import (
    EventOut,
    LinkEndOut,
    LinkOut,
    LinkReport,
    PairCheckOut,
    PeerOut,
    ProbeSample,
    RouteOut,
    RouteTableOut,
)
from onecluster.schema._tokens import Role, TokenCreate, TokenOut

__all__ = [
    "GB",
    "MAX_ID",
    "MAX_INT",
    "MAX_LOG_CHARS",
    "AgentSync",
    "AgentSyncReply",
    "AttemptReport",
    "DesiredAttempt",
    "ErrorDetail",
    "ErrorOut",
    "EventOut",
    "HealthOut",
    "JobOut",
    "JobSubmit",
    "LinkEndOut",
    "LinkOut",
    "LinkReport",
    "LogChunkIn",
    "LogsOut",
    "PairCheckOut",
    "PartOut",
    "PeerOut",
    "PoolOut",
    "PriorityName",
    "ProbeSample",
    "Role",
    "RouteOut",
    "RouteTableOut",
    "SiteOut",
    "SiteStatsOut",
    "StatsOut",
    "TeamOut",
    "TokenCreate",
    "TokenOut",
]
