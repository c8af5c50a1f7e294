"""Guarantees: the GPUs each team gets back from borrowers whenever it asks.

A team's quota is its guarantee.  A team with a home site but no quota (the usual case for a
team that appears only in a replayed trace) gets a *derived* guarantee, so that joining the
one queue never costs it the capacity it had alone: its home site's GPUs of each type, less
the quotas that teams homed there declare, shared by weight among the teams homed there that
declare none.  Declared quotas hold at any site, so derived shares are scaled down where
needed for every guarantee of a type to fit in the fabric's GPUs of that type at once.
Shares are whole GPUs (largest remainder, ties to the team named first), so derived
guarantees never add up to more than the site has.  A derived guarantee holds at the
home site only (a declared quota holds at any site with GPUs of its type): a team gets back
what it had alone, not a claim on another site's teams.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from onecluster.model import Fabric, Team

__all__ = ["Guarantee", "guarantees"]


@dataclass(frozen=True, slots=True)
class Guarantee:
    """GPUs of each type a team gets back from borrowers; ``site``: only there (derived)."""

    gpus: Mapping[str, int]
    site: str | None = None

    def at(self, site: str, gpu_type: str) -> int:
        """GPUs of ``gpu_type`` guaranteed at ``site``."""
        if self.site is not None and site != self.site:
            return 0
        return self.gpus.get(gpu_type, 0)


def guarantees(fabric: Fabric) -> Mapping[str, Guarantee]:
    """Team → its :class:`Guarantee`, for every team of ``fabric``.

    Declared quotas hold anywhere; teams with ``quota=None`` get the derived share of their
    home site, there.
    """
    out: dict[str, dict[str, int]] = {}
    homeless: dict[str, list[Team]] = defaultdict(list)
    for team in fabric.teams:
        if team.quota is None:
            homeless[team.home_site].append(team)
        else:
            out[team.name] = dict(team.quota)
    # Declared quotas hold at any site, so derived shares come out of what they leave of each
    # type fabric-wide: a site's part is scaled down until every guarantee fits at once.
    room = _derivable(fabric, homeless)
    for site_name, teams in homeless.items():
        site = fabric.site(site_name)
        for team in teams:
            out[team.name] = {}
        weight = sum(t.weight for t in teams)
        for pool in site.pools:
            left = room[(site_name, pool.gpu_type)]
            exact = [left * t.weight / weight for t in teams]
            shares = [math.floor(x) for x in exact]
            spare = left - sum(shares)
            by_remainder = sorted(range(len(teams)), key=lambda i: -(exact[i] - shares[i]))
            for i in by_remainder[:spare]:
                shares[i] += 1
            for team, n in zip(teams, shares, strict=True):
                out[team.name][pool.gpu_type] = n
    derived = {t.name for t in fabric.teams if t.quota is None}
    return MappingProxyType(
        {
            t.name: Guarantee(
                MappingProxyType(out[t.name]), t.home_site if t.name in derived else None
            )
            for t in fabric.teams
        }
    )


def _derivable(fabric: Fabric, homeless: Mapping[str, list[Team]]) -> dict[tuple[str, str], int]:
    """(site, GPU type) → GPUs there that derived guarantees may share: the pool less the
    quotas declared by teams homed at the site, scaled so that, per type, declared quotas
    plus derived shares never exceed the fabric's GPUs of that type."""
    base: dict[tuple[str, str], int] = {}
    capacity: dict[str, int] = defaultdict(int)
    declared: dict[str, int] = defaultdict(int)
    for site in fabric.sites:
        for pool in site.pools:
            capacity[pool.gpu_type] += pool.count
    for team in fabric.teams:
        for gpu_type, n in (team.quota or {}).items():
            declared[gpu_type] += n
    for site_name in homeless:
        site = fabric.site(site_name)
        for pool in site.pools:
            at_home = sum(
                (t.quota or {}).get(pool.gpu_type, 0)
                for t in fabric.teams
                if t.home_site == site_name
            )
            base[(site_name, pool.gpu_type)] = max(pool.count - at_home, 0)
    wanted: dict[str, int] = defaultdict(int)
    for (_, gpu_type), n in base.items():
        wanted[gpu_type] += n
    room = {}
    for key, n in base.items():
        gpu_type = key[1]
        left = max(capacity[gpu_type] - declared[gpu_type], 0)
        room[key] = n if wanted[gpu_type] <= left else math.floor(n * left / wanted[gpu_type])
    return room
