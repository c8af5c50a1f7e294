"""From a fabric to the planner's WAN ring: which circuits join the chosen sites, in what order.

The cross-site collectives are modelled as a ring over the sites (each site sends to the next
one).  With two sites the ring is their one hop, used in both directions; with more, the
ring's order is the one over direct circuits whose slowest hop is fastest.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from onecluster.errors import ValidationError
from onecluster.model import Fabric
from onecluster.planner._inputs import PlanInputs, WanHop

__all__ = ["MAX_RING_SITES", "fabric_notes", "hop_between", "ring_from_fabric"]

#: Sites the ring search orders by trying every order (7! = 5,040 orders at most).
MAX_RING_SITES = 8


def hop_between(fabric: Fabric, x: str, y: str) -> WanHop | None:
    """Every circuit directly joining ``x`` and ``y`` as one hop, or ``None`` if there is none.

    Capacities add (traffic spreads over the circuits); the RTT and distance are the
    longest circuit's, because a collective ends with its slowest flow.
    """
    circuits = fabric.circuits_between(x, y)
    if not circuits:
        return None
    return WanHop(
        a=x,
        b=y,
        rtt_ms=max(c.rtt_ms for c in circuits),
        capacity_gbps=sum(c.total_gbps for c in circuits),
        distance_km=max(c.distance_km for c in circuits),
        circuits=tuple(c.name for c in circuits),
    )


def ring_from_fabric(
    fabric: Fabric, names: Sequence[str]
) -> tuple[tuple[str, ...], tuple[WanHop, ...]]:
    """The chosen sites in ring order and the hops between consecutive ones.

    Raises :class:`ValidationError` for an unknown or repeated site, fewer than two sites,
    a site with no circuit to any other chosen site, or sites no ring of direct circuits
    joins.
    """
    for name in names:
        if not fabric.has_site(name):
            msg = f"fabric {fabric.name} has no site {name!r}"
            raise ValidationError(msg, hint=f"known sites: {', '.join(fabric.site_names)}")
    if len(set(names)) != len(names):
        msg = f"a site is named twice: {', '.join(names)}"
        raise ValidationError(msg)
    if len(names) < 2:
        msg = f"a plan spreads a job over at least two sites (got {', '.join(names) or 'none'})"
        raise ValidationError(msg, hint=f"choose from: {', '.join(fabric.site_names)}")
    hops = {
        frozenset((x, y)): hop
        for x, y in itertools.combinations(names, 2)
        if (hop := hop_between(fabric, x, y)) is not None
    }
    for name in names:
        if not any(name in pair for pair in hops):
            others = ", ".join(n for n in names if n != name)
            msg = f"site {name} has no circuit to any other chosen site ({others})"
            raise ValidationError(
                msg, hint="the planner models direct circuits only: choose sites they join"
            )
    if len(names) == 2:
        return tuple(names), (hops[frozenset(names)],)
    if len(names) > MAX_RING_SITES:
        msg = f"the planner orders at most {MAX_RING_SITES} sites into a ring (got {len(names)})"
        raise ValidationError(msg)
    best: tuple[tuple[float, float], tuple[str, ...]] | None = None
    for rest in itertools.permutations(names[1:]):
        order = (names[0], *rest)
        pairs = [frozenset((x, order[(j + 1) % len(order)])) for j, x in enumerate(order)]
        ring = [hops.get(pair) for pair in pairs]
        if any(h is None for h in ring):
            continue
        score = (
            min(h.capacity_gbps for h in ring if h is not None),
            -max(h.rtt_ms for h in ring if h is not None),
        )
        if best is None or score > best[0]:
            best = (score, order)
    if best is None:
        msg = f"no ring of direct circuits joins the sites {', '.join(names)}"
        raise ValidationError(msg, hint="drop a site, or add circuits so each has two neighbours")
    order = best[1]
    ring_hops = []
    for j, here in enumerate(order):
        there = order[(j + 1) % len(order)]
        hop = hops[frozenset((here, there))]
        ring_hops.append(
            WanHop(
                a=here,
                b=there,
                rtt_ms=hop.rtt_ms,
                capacity_gbps=hop.capacity_gbps,
                distance_km=hop.distance_km,
                circuits=hop.circuits,
            )
        )
    return order, tuple(ring_hops)


def fabric_notes(fabric: Fabric, inputs: PlanInputs) -> list[str]:
    """Where the plan asks for more GPUs of its type than a site's pool holds (a what-if is
    allowed; the note says so)."""
    notes = []
    for s in inputs.sites:
        if not fabric.has_site(s.name):
            continue
        pool = fabric.site(s.name).pool(inputs.gpu_type)
        held = pool.count if pool is not None else 0
        if held < s.gpus:
            notes.append(
                f"site {s.name} holds {held} {inputs.gpu_type} GPUs in fabric {fabric.name}; "
                f"the plan assumes {s.gpus}"
            )
    return notes
