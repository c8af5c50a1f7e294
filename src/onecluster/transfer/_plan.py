"""Transfer planning as pure functions: chunking parameters, the paths a push uses, how many
streams each path runs, and how missing chunks are batched into requests.

**Paths.**  A push uses every circuit between its two sites at once (one path each, to the
source's address on that circuit), and — beyond the anchors — the two-hop paths through
every third site at the same time, so that it approaches the fabric's max-flow between the
two sites.  Circuits that are down are left out; when every direct one is down, the relayed
paths carry the push alone.  Each path has a rate cap, the **etiquette**: a direct circuit
may be filled to ``bulk_share`` of its capacity, a relayed leg to ``relay_share`` (it is the
third site's own circuit, and its traffic comes first).  A fabric whose agents announce no
circuit addresses (one host, ``onecluster up``) gets one path: the source's data endpoint,
routed by the kernel.

**Streams.**  Enough TCP streams per path that their windows together cover twice the
path's bandwidth-delay product (BBR needs about one; CUBIC under loss many more), at least
two so that one stalled stream never halts a path, and at most eight (more only inflates
the queue: ``../shared/notes/transfer.md`` §5).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from onecluster.model import Circuit, Fabric
from onecluster.transfer._manifest import ChunkRef

__all__ = [
    "CHUNK_AVG",
    "CHUNK_MAX",
    "CHUNK_MIN",
    "Etiquette",
    "Hop",
    "PathPlan",
    "batches",
    "plan_paths",
    "streams_for",
]

#: FastCDC's parameters (format 1): chunks of 256 KiB to 4 MiB, about 1.25 MiB on average
#: (FastCDC's average is ``avg + min``).  Part of a version's identity: changing them is a new
#: manifest format.
CHUNK_MIN = 256 * 1024
CHUNK_AVG = 1024 * 1024
CHUNK_MAX = 4 * 1024 * 1024

#: Bounds on the streams of one path.
MIN_STREAMS, MAX_STREAMS = 2, 8


@dataclass(frozen=True, slots=True)
class Hop:
    """An agent's data endpoint."""

    address: str
    port: int


@dataclass(frozen=True, slots=True)
class Etiquette:
    """How much of a circuit a bulk transfer may take: ``bulk_share`` of a direct circuit,
    ``relay_share`` of each circuit of a relayed path (``None``: no cap at all)."""

    bulk_share: float | None = 1.0
    relay_share: float | None = 0.5

    def __post_init__(self) -> None:
        for name in ("bulk_share", "relay_share"):
            share = getattr(self, name)
            if share is not None and not 0 < share <= 1:
                msg = f"{name} must be a fraction in (0, 1], got {share}"
                raise ValueError(msg)


@dataclass(frozen=True, slots=True)
class PathPlan:
    """One way from the destination to the source: connect to ``hops[0]``; every further hop
    is where the one before relays to.  ``rate_bps`` caps what the source sends on it."""

    name: str
    hops: tuple[Hop, ...]
    circuits: tuple[str, ...]
    rtt_s: float
    rate_bps: float | None
    relay: str | None = None


def plan_paths(
    fabric: Fabric,
    src: str,
    dst: str,
    *,
    down: frozenset[str],
    ends: Mapping[tuple[str, str], str],
    data: Mapping[str, Hop],
    etiquette: Etiquette = Etiquette(),
) -> list[PathPlan]:
    """The paths a push from ``src`` to ``dst`` uses now.

    ``ends`` maps ``(site, circuit)`` to the site's address on that circuit (announced by its
    agent); ``data`` maps a site to its data endpoint (its port is the one every address of
    the site serves).  Empty when the source cannot be reached at all.
    """
    source = data.get(src)
    if source is None:
        return []
    paths: list[PathPlan] = []
    for circuit in fabric.circuits_between(src, dst):
        address = ends.get((src, circuit.name))
        if circuit.name in down or address is None:
            continue
        paths.append(
            PathPlan(
                name=circuit.name,
                hops=(Hop(address, source.port),),
                circuits=(circuit.name,),
                rtt_s=circuit.rtt_ms / 1000,
                rate_bps=_cap(circuit.total_gbps, etiquette.bulk_share),
            )
        )
    for relay in fabric.site_names:
        if relay in (src, dst) or relay not in data:
            continue
        near = _best(fabric, dst, relay, down, ends, at=relay)
        far = _best(fabric, relay, src, down, ends, at=src)
        if near is None or far is None:
            continue
        (c1, a1), (c2, a2) = near, far
        rates = [_cap(c.total_gbps, etiquette.relay_share) for c in (c1, c2)]
        paths.append(
            PathPlan(
                name=f"{c1.name}+{c2.name}",
                hops=(Hop(a1, data[relay].port), Hop(a2, source.port)),
                circuits=(c1.name, c2.name),
                rtt_s=(c1.rtt_ms + c2.rtt_ms) / 1000,
                rate_bps=None if None in rates else min(r for r in rates if r is not None),
                relay=relay,
            )
        )
    if not any(ends.get((src, c.name)) for c in fabric.circuits_of(src)):
        # No circuit addresses at all (one host): the kernel routes to the data endpoint.
        rtts = [c.rtt_ms for c in fabric.circuits_between(src, dst)]
        paths.append(PathPlan("default", (source,), (), min(rtts, default=0.0) / 1000, None))
    return paths


def _best(
    fabric: Fabric,
    x: str,
    y: str,
    down: frozenset[str],
    ends: Mapping[tuple[str, str], str],
    *,
    at: str,
) -> tuple[Circuit, str] | None:
    """The biggest circuit between ``x`` and ``y`` that is up and whose end at ``at`` has an
    address, with that address."""
    best: tuple[Circuit, str] | None = None
    for circuit in fabric.circuits_between(x, y):
        address = ends.get((at, circuit.name))
        if circuit.name in down or address is None:
            continue
        if best is None or circuit.total_gbps > best[0].total_gbps:
            best = (circuit, address)
    return best


def _cap(gbps: float, share: float | None) -> float | None:
    return None if share is None else gbps * 1e9 * share


def streams_for(rate_bps: float | None, rtt_s: float, window_bytes: int) -> int:
    """Streams for a path of ``rate_bps`` and ``rtt_s`` when one stream's window can grow to
    ``window_bytes``: enough to cover twice the bandwidth-delay product, within bounds."""
    if rate_bps is None or window_bytes <= 0:
        return MIN_STREAMS * 2
    bdp = rate_bps / 8 * max(rtt_s, 0.001)
    return max(MIN_STREAMS, min(MAX_STREAMS, math.ceil(2 * bdp / window_bytes)))


def batches(
    chunks: Iterable[ChunkRef], *, max_bytes: int = 8 * 1024 * 1024, max_count: int = 1024
) -> Iterator[list[ChunkRef]]:
    """``chunks`` in requests of at most ``max_bytes`` (or one bigger chunk) and ``max_count``
    chunks: many small files travel in one request, never one round trip each."""
    batch: list[ChunkRef] = []
    size = 0
    for chunk in chunks:
        if batch and (size + chunk.size > max_bytes or len(batch) >= max_count):
            yield batch
            batch, size = [], 0
        batch.append(chunk)
        size += chunk.size
    if batch:
        yield batch
