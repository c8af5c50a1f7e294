"""Where a training worker sits in its gang: its site, its rank inside the site, and how to
reach its counterparts at the other sites (pure; no torch).

The server hands every attempt of a gang the same ``ONECLUSTER_GANG_*`` variables
(``docs/contracts.md``); the site launcher adds the worker's ``LOCAL_RANK`` and
``LOCAL_WORLD_SIZE``.  Worker *i* of site *s* takes cross-site connections on
``base_port + 16·s + i``; inside a site the workers meet on ``base_port + 240 + s``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from onecluster.errors import ValidationError

__all__ = ["MAX_SITES", "MAX_WORKERS_PER_SITE", "Topology"]

#: Ports are laid out for at most this many sites and workers per site (16 × 16 = 256).
MAX_SITES = 15
MAX_WORKERS_PER_SITE = 16
_LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class Topology:
    """The gang as one worker sees it.

    ``sites`` are in rank order (the job's part order); ``addresses`` maps a site to the
    address other sites reach it at (a site without one is on this host: loopback).
    """

    sites: tuple[str, ...]
    site_rank: int
    addresses: Mapping[str, str]
    base_port: int
    local_rank: int = 0
    local_world: int = 1

    def __post_init__(self) -> None:
        if not self.sites:
            raise ValidationError("a gang needs at least one site")
        if len(set(self.sites)) != len(self.sites):
            raise ValidationError(f"a site appears twice in the gang: {', '.join(self.sites)}")
        if len(self.sites) > MAX_SITES:
            raise ValidationError(f"a gang spans at most {MAX_SITES} sites, not {len(self.sites)}")
        if not 0 <= self.site_rank < len(self.sites):
            raise ValidationError(f"site rank {self.site_rank} is not in 0..{len(self.sites) - 1}")
        if not 1 <= self.local_world <= MAX_WORKERS_PER_SITE:
            raise ValidationError(
                f"a site runs 1..{MAX_WORKERS_PER_SITE} workers, not {self.local_world}"
            )
        if not 0 <= self.local_rank < self.local_world:
            raise ValidationError(
                f"local rank {self.local_rank} is not in 0..{self.local_world - 1}"
            )
        if not 1024 <= self.base_port <= 65535 - 256:
            raise ValidationError(f"base port {self.base_port} leaves no room for the gang's ports")

    @property
    def site(self) -> str:
        return self.sites[self.site_rank]

    @property
    def n_sites(self) -> int:
        return len(self.sites)

    def address(self, site_rank: int) -> str:
        """Where site ``site_rank`` takes connections from the other sites."""
        return self.addresses.get(self.sites[site_rank], _LOOPBACK)

    def port(self, site_rank: int, local_rank: int | None = None) -> int:
        """The cross-site port of worker ``local_rank`` (default: this worker's) at a site."""
        rank = self.local_rank if local_rank is None else local_rank
        return self.base_port + 16 * site_rank + rank

    def site_port(self) -> int:
        """Where this site's workers meet each other (``MASTER_PORT``)."""
        return self.base_port + 240 + self.site_rank

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Topology:
        """The topology the server and the launcher gave this process; a
        :class:`ValidationError` naming the variable when one is missing or malformed.

        Without ``ONECLUSTER_GANG_SITES`` the worker is a one-site run of its own."""
        sites_text = env.get("ONECLUSTER_GANG_SITES", "").strip()
        if not sites_text:
            site = env.get("ONECLUSTER_SITE", "local")
            sites_text = site
            env = {**env, "ONECLUSTER_GANG_RANK": "0"}
        sites = tuple(s.strip() for s in sites_text.split(",") if s.strip())
        addresses: dict[str, str] = {}
        for item in env.get("ONECLUSTER_GANG_ADDRESSES", "").split(","):
            if not item.strip():
                continue
            site, sep, address = item.partition("=")
            if not sep or not address.strip():
                msg = f"ONECLUSTER_GANG_ADDRESSES has {item!r}; each entry is SITE=ADDRESS"
                raise ValidationError(msg)
            addresses[site.strip()] = address.strip()
        return cls(
            sites=sites,
            site_rank=_int(env, "ONECLUSTER_GANG_RANK", None),
            addresses=addresses,
            base_port=_int(env, "ONECLUSTER_GANG_PORT", 29400),
            local_rank=_int(env, "LOCAL_RANK", 0),
            local_world=_int(env, "LOCAL_WORLD_SIZE", 1),
        )


def _int(env: Mapping[str, str], name: str, default: int | None) -> int:
    text = env.get(name)
    if text is None or not text.strip():
        if default is None:
            raise ValidationError(f"{name} is not set; the site launcher sets it for its workers")
        return default
    try:
        return int(text)
    except ValueError:
        raise ValidationError(f"{name} is {text!r}, not a whole number") from None
