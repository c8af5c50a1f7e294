"""What the gateway writes about a call (one ledger row and one audit row) and reads back."""

from __future__ import annotations

from dataclasses import dataclass, field

from onecluster.gateway._quota import Ask

__all__ = ["BillLine", "CallRecord", "Reservation"]


@dataclass(frozen=True, slots=True)
class Reservation:
    """An admitted call's hold on its scopes' windows, released when it is settled."""

    request_id: str
    scopes: tuple[str, ...]
    minute: int
    day: int
    month: int
    ask: Ask


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One call, as the ledger bills it and the audit keeps it.

    ``outcome`` is ``ok``, ``client_disconnected``, ``upstream_cut``, ``upstream_failed``,
    ``upstream_timeout``, ``rejected`` (an upstream 4xx) or a refusal code (``rate_limited``,
    ``forbidden``, ``invalid``…; those have no ledger row).  ``estimated`` marks usage
    counted by the gateway because the provider reported none (a cut stream).
    """

    request_id: str
    at: float
    team: str
    key_id: str
    model: str
    endpoint: str
    stream: bool
    http_status: int
    outcome: str
    region: str = ""
    upstream: str = ""
    egress: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: int = 0
    estimated: bool = False
    latency_ms: float = 0.0
    overhead_ms: float = 0.0
    attempts: int = 0
    error: str = ""
    prompt: str | None = field(default=None, repr=False)
    response: str | None = field(default=None, repr=False)

    @property
    def billed(self) -> bool:
        """Whether the call reached an upstream (only those have a ledger row)."""
        return self.attempts > 0


@dataclass(frozen=True, slots=True)
class BillLine:
    """One team's (and model's) usage in a month, summed from the ledger."""

    team: str
    model: str
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost: int
    estimated_calls: int
