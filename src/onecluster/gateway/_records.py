"""What the gateway writes about a call (one ledger row and one audit row) and reads back."""

from __future__ import annotations

from dataclasses import dataclass, field

from onecluster.gateway._quota import Ask

__all__ = ["BILLED_OUTCOMES", "BillLine", "CallRecord", "Reservation", "clean_text"]

BILLED_OUTCOMES = frozenset({"ok", "client_disconnected", "upstream_cut"})


def clean_text(text: str) -> str:
    """``text`` as every database stores it: no NUL, no lone surrogate (from bad UTF-8)."""
    return text.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")


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

    ``outcome`` is ``ok``, ``client_disconnected`` or ``upstream_cut`` (billed: a ledger
    row), or ``upstream_failed``, ``upstream_timeout``, ``rejected`` (an upstream's 4xx) or a
    refusal code (``rate_limited``, ``forbidden``, ``invalid``…): audit row only.
    ``estimated`` marks usage counted by the gateway because the provider reported none
    (a cut stream).
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
        """Whether an upstream answered (only those calls have a ledger row; a call that
        failed has only its audit row, so it may be retried with the same Idempotency-Key)."""
        return self.attempts > 0 and self.outcome in BILLED_OUTCOMES


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
