"""Link routes: circuit state and measurements, the route table, planning checks, events."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from onecluster.schema import MAX_INT, EventOut, LinkOut, PairCheckOut, RouteTableOut
from onecluster.server._deps import Caller, Control
from onecluster.topology import check_pairs

__all__ = ["router"]

router = APIRouter(prefix="/api/v1", tags=["links"])


@router.get("/links")
def links(control: Control, _caller: Caller) -> list[LinkOut]:
    """Every circuit: its state and what the probes of both ends measure."""
    return control.links.links(control.clock.now())


@router.get("/routes")
def routes(
    control: Control, _caller: Caller, site: Annotated[str | None, Query(max_length=128)] = None
) -> RouteTableOut:
    """The route table (of one site with ``site``): next hop, primary and backup paths."""
    if site is not None:
        control.require_site(site)
    return control.links.routes(site)


@router.get("/links/check")
def check(control: Control, _caller: Caller, measured: bool = True) -> list[PairCheckOut]:
    """Every site pair's primary and backup RTT against the latency objectives; with
    ``measured`` (the default) the circuits' measured minimum RTTs replace the fabric's."""
    rtts = control.links.measured_rtt_ms(control.clock.now()) if measured else {}
    return [
        PairCheckOut.of(p, measured=bool(rtts)) for p in check_pairs(control.fabric, rtt_ms=rtts)
    ]


@router.get("/events")
def events(
    control: Control,
    _caller: Caller,
    kind: Annotated[
        str | None, Query(max_length=32, description="only kinds starting with this")
    ] = None,
    after: Annotated[
        int | None, Query(ge=0, le=MAX_INT, description="only events after this id")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[EventOut]:
    """Events, oldest first: the newest ``limit``, or the first ``limit`` after ``after``.

    Gap-free: events are committed in id order, so asking again with the last id received
    as ``after`` returns every event committed since, each once, in id order."""
    return [
        EventOut(id=e.id, time=e.time, kind=e.kind, job_id=e.job_id, message=e.message)
        for e in control.store.events(kind_prefix=kind, after=after, limit=limit)
    ]
