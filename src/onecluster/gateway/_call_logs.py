"""The log line of a call that went wrong upstream, for the NOC.

A call no upstream answered (502 ``upstream_failed``, 504 ``upstream_timeout``) and a stream
cut mid-way are logged at WARNING; an upstream's refusal of the request itself (its 4xx) at
INFO, since the caller, not the upstream, must change something.  Each line carries the
request id, the call's id in the ledger and audit, the team, model, upstream and egress
node, the status, the outcome, the elapsed time and the attempts; a cut stream also how many
chunks reached the client and the completion tokens billed.  Never a key (the team's or a
provider's) and never a prompt or an answer: the fields come from the :class:`CallRecord`'s
counts and names only, and the error text is scrubbed of provider keys.
"""

from __future__ import annotations

import logging

from onecluster.gateway._records import CallRecord

__all__ = ["log_upstream_trouble"]

_log = logging.getLogger("onecluster.gateway.calls")


def log_upstream_trouble(
    record: CallRecord, *, request_id: str, error: str, chunks: int | None = None
) -> None:
    """Log ``record``'s call, which failed upstream or was cut (``chunks`` sent: a stream).

    ``error`` must already be scrubbed (:func:`onecluster.gateway._providers.scrub`).
    """
    fields: dict[str, object] = {
        "request_id": request_id,
        "call_id": record.request_id,
        "team": record.team,
        "model": record.model,
        "endpoint": record.endpoint,
        "upstream": record.upstream,
        "egress": record.egress,
        "status": record.http_status,
        "outcome": record.outcome,
        "elapsed_ms": round(record.latency_ms, 1),
        "attempts": record.attempts,
    }
    if chunks is not None:
        fields["chunks"] = chunks
        fields["completion_tokens"] = record.completion_tokens
        fields["estimated"] = record.estimated
        what = f"stream of {record.model} cut after {chunks} chunk(s)"
    else:
        what = f"call to {record.model} failed ({record.http_status} {record.outcome})"
    level = logging.INFO if record.outcome == "rejected" else logging.WARNING
    _log.log(
        level,
        "%s at upstream %s for team %s after %.0f ms: %s",
        what,
        record.upstream or "-",
        record.team,
        record.latency_ms,
        error,
        extra=fields,
    )
