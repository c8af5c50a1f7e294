"""Link bodies: probe reports from agents, link state, the route table, planning checks and
events."""

from __future__ import annotations

import ipaddress
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, Field

from onecluster.model import CircuitState, EndView
from onecluster.schema._bounds import REPORT, Count
from onecluster.topology import PairCheck

__all__ = [
    "Endpoint",
    "EventOut",
    "IPv4",
    "LinkEndOut",
    "LinkOut",
    "LinkReport",
    "PairCheckOut",
    "PeerOut",
    "ProbeSample",
    "RouteOut",
    "RouteTableOut",
]

_Ms = Field(default=None, ge=0, allow_inf_nan=False)


def _ipv4(value: str) -> str:
    ipaddress.IPv4Address(value)  # ValueError: pydantic reports it as the field's error
    return value


def _endpoint(value: str) -> str:
    host, _, port = value.rpartition(":")
    _ipv4(host)
    if not (port.isascii() and port.isdigit() and port[0] != "0" and int(port) <= 65535):
        msg = f"{value!r} is not ADDRESS:PORT with a port from 1 to 65535"
        raise ValueError(msg)
    return value


_OCTET = r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
#: A dotted-quad IPv4 address (routes and probes carry nothing else to the kernel).
IPv4 = Annotated[
    str, Field(max_length=15, json_schema_extra={"format": "ipv4"}), AfterValidator(_ipv4)
]
#: ``ADDRESS:PORT`` of a probe socket.
Endpoint = Annotated[
    str,
    Field(
        max_length=21,
        json_schema_extra={"pattern": rf"^{_OCTET}(\.{_OCTET}){{3}}:[1-9][0-9]{{0,4}}$"},
    ),
    AfterValidator(_endpoint),
]


class ProbeSample(BaseModel):
    """One finished probe: its sequence number, when it was sent on the agent's monotonic
    clock (the sync's ``probe_clock_s`` relates it to the server's time) and its RTT
    (``None``: lost)."""

    model_config = REPORT

    seq: Count
    sent_s: float = Field(allow_inf_nan=False)
    rtt_ms: float | None = Field(default=None, ge=0, allow_inf_nan=False)


class LinkReport(BaseModel):
    """What an agent measured on one circuit of its site (window figures in milliseconds)
    and the probes finished since its last acknowledged report, oldest first."""

    model_config = REPORT

    circuit: str = Field(min_length=1, max_length=63)
    endpoint: Endpoint = Field(description="ADDRESS:PORT of this site's probe socket")
    sent: Count = 0
    lost: Count = 0
    loss: float = Field(default=0.0, ge=0, le=1, allow_inf_nan=False)
    rtt_min_ms: float | None = _Ms
    rtt_p50_ms: float | None = _Ms
    rtt_p99_ms: float | None = _Ms
    pdv_p50_ms: float | None = _Ms
    pdv_p99_ms: float | None = _Ms
    jitter_ms: float | None = _Ms
    samples: list[ProbeSample] = Field(default_factory=list, max_length=2000)


class PeerOut(BaseModel):
    """The far end of one of the site's circuits: where to send its probes."""

    circuit: str
    site: str
    endpoint: Endpoint


class RouteOut(BaseModel):
    """How ``src`` reaches ``dst`` now: the next hop, the primary path, the disjoint backup.

    ``next_circuit`` is ``None`` when ``dst`` cannot be reached at all; ``dst_address`` is the
    destination site's service address (``None`` until its agent has announced one).
    """

    src: str
    dst: str
    next_circuit: str | None
    next_site: str | None
    sites: list[str]
    circuits: list[str]
    rtt_ms: float | None
    backup_sites: list[str]
    backup_circuits: list[str]
    backup_rtt_ms: float | None
    dst_address: IPv4 | None = None


class RouteTableOut(BaseModel):
    """The route table (of one site in a sync reply, of every site from ``/routes``).

    ``version`` grows by one whenever any path changes; ``down`` lists the circuits routed
    around.
    """

    version: int
    changed_at: float | None
    down: list[str]
    routes: list[RouteOut]


class LinkEndOut(BaseModel):
    """One end's view of a circuit: what its agent's probes measured (milliseconds)."""

    site: str
    state: EndView
    endpoint: str | None
    reported_at: float | None
    sent: int
    lost: int
    loss: float
    rtt_min_ms: float | None
    rtt_p50_ms: float | None
    rtt_p99_ms: float | None
    pdv_p50_ms: float | None
    pdv_p99_ms: float | None
    jitter_ms: float | None


class LinkOut(BaseModel):
    """A circuit: its state (the worst of its two ends' fresh views), since when, and both
    ends' measurements next to what the fabric declares."""

    circuit: str
    a: str
    b: str
    state: CircuitState
    since: float | None
    rtt_ms: float
    loss: float
    capacity_gbps: float
    risk_group: str
    ends: list[LinkEndOut]


class PairCheckOut(BaseModel):
    """``links check``: one site pair, its routes' RTTs and the objective's verdict."""

    a: str
    b: str
    primary_sites: list[str]
    primary_rtt_ms: float | None
    backup_sites: list[str]
    backup_rtt_ms: float | None
    max_rtt_ms: float | None
    verdict: Literal["ok", "primary-only", "violated", "unreachable"]
    reason: str
    measured: bool

    @classmethod
    def of(cls, check: PairCheck, *, measured: bool) -> PairCheckOut:
        """The wire form of a planning check (``measured``: from probes' RTTs)."""
        return cls(
            a=check.a,
            b=check.b,
            primary_sites=list(check.primary_sites),
            primary_rtt_ms=check.primary_rtt_ms,
            backup_sites=list(check.backup_sites),
            backup_rtt_ms=check.backup_rtt_ms,
            max_rtt_ms=check.objective.max_rtt_ms if check.objective else None,
            verdict=check.verdict,
            reason=check.objective.reason if check.objective else "",
            measured=measured,
        )


class EventOut(BaseModel):
    """Something that happened (circuit down, route changed, site down, job preempted …)."""

    id: int
    time: float
    kind: str
    job_id: str | None
    message: str
