"""This process's own log: lines as text or JSON, the process's role and site and the
request id on each (not the output of jobs, which agents ship: ``onecluster logs``).

Standard library only, so that every process — the control plane, agents, the gateway, the
training launcher inside a job — sets up its log the same way (``docs/operations.md``,
"Logs").
"""

from onecluster.logs._format import ContextFields, JsonFormatter, LogFormat, TextFormatter
from onecluster.logs._request_id import (
    REQUEST_ID_HEADER,
    accepted_request_id,
    current_request_id,
    new_request_id,
    request_id_bound,
)
from onecluster.logs._setup import LOG_LEVELS, setup_logging

__all__ = [
    "LOG_LEVELS",
    "REQUEST_ID_HEADER",
    "ContextFields",
    "JsonFormatter",
    "LogFormat",
    "TextFormatter",
    "accepted_request_id",
    "current_request_id",
    "new_request_id",
    "request_id_bound",
    "setup_logging",
]
