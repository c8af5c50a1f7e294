"""The gateway service object: configuration, store, keys, providers and metrics wired
together, and the background work that keeps the key cache and the counters fresh."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TypeVar

from onecluster.clock import Clock, SystemClock
from onecluster.errors import ForbiddenError, NotFoundError, ValidationError
from onecluster.gateway._auth import KeyCache
from onecluster.gateway._batcher import Batcher
from onecluster.gateway._config import GatewayConfig, ModelEntry, TeamPolicy, Tier, to_nano
from onecluster.gateway._keys import KeyRecord, SecretBox
from onecluster.gateway._metrics import GatewayMetrics
from onecluster.gateway._providers import EgressPool, OpenAICompatible, Provider
from onecluster.gateway._quota import Limits
from onecluster.gateway._store import GatewayStore
from onecluster.gateway._tokens import TokenEstimator
from onecluster.gateway._wire import Endpoint

__all__ = ["Caller", "Gateway", "GatewaySettings"]

_log = logging.getLogger(__name__)
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class GatewaySettings:
    """How one gateway process runs (the configuration file says *what* it serves)."""

    db: str | Path
    """The gateway's database: a SQLite file (shared by the processes of one host) or a
    ``postgresql://`` URL (shared by processes on several hosts)."""
    secret_path: Path
    tokenizers_dir: Path | None = None
    key_refresh_s: float = 1.0
    stale_after_s: float = 3600.0
    """A reservation older than this is a crashed process's and is released."""


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated key, its team's policy and tier, and the scopes it counts against."""

    key: KeyRecord
    team: TeamPolicy
    tier: Tier
    scopes: tuple[tuple[str, Limits], ...] = field(repr=False)

    def check_model(self, model: ModelEntry) -> None:
        """:class:`ForbiddenError` (403) unless the tier and the key allow ``model``."""
        if not self.tier.allows(model.name):
            msg = f"team {self.team.name}'s tier {self.tier.name} does not allow {model.name}"
            raise ForbiddenError(msg, hint="GET /v1/models lists the models you may call")
        allowed = self.key.limits.models
        if allowed is not None and model.name not in allowed:
            msg = f"key {self.key.key_id} may call only {', '.join(allowed)}"
            raise ForbiddenError(msg)


class Gateway:
    """Everything a request needs; built by :meth:`open`, closed by :meth:`close`."""

    def __init__(
        self,
        config: GatewayConfig,
        settings: GatewaySettings,
        store: GatewayStore,
        providers: dict[str, Provider],
        pool: EgressPool,
        *,
        clock: Clock,
    ) -> None:
        self.config = config
        self.settings = settings
        self.store = store
        self.providers = providers
        self.clock = clock
        # On PostgreSQL the batches get a connection (and a thread) of their own.
        self._batch_store = GatewayStore(settings.db) if store.blocking else store
        self.batcher = Batcher(self._batch_store)
        self.keys = KeyCache(store)
        self.metrics = GatewayMetrics()
        self.estimator = TokenEstimator.load(settings.tokenizers_dir)
        self._pool = pool
        self._tasks: list[asyncio.Task[None]] = []
        self._team_limits = {t.name: _tier_limits(t) for t in config.tiers}

    @classmethod
    def open(
        cls, config: GatewayConfig, settings: GatewaySettings, *, clock: Clock | None = None
    ) -> Gateway:
        """Open the store, unseal the provider keys and build one adapter per upstream.

        An upstream whose key was never set gets no adapter: calls routed to it fail over
        to the model's next deployment, and the last one answers 502 saying so.
        """
        store = GatewayStore(settings.db)
        box = SecretBox.open(settings.secret_path)
        sealed = store.provider_keys()
        pool = EgressPool(config.egress)
        providers: dict[str, Provider] = {}
        for upstream in config.upstreams:
            if upstream.name in sealed:
                providers[upstream.name] = OpenAICompatible(
                    upstream, box.unseal(sealed[upstream.name]), pool
                )
            else:
                _log.warning("upstream %s has no provider key; set one", upstream.name)
        return cls(config, settings, store, providers, pool, clock=clock or SystemClock())

    async def start(self) -> None:
        """Start the background refresh of keys and the release of stale reservations."""
        self._tasks.append(asyncio.create_task(self._refresh_keys(), name="gateway-keys"))
        self._tasks.append(asyncio.create_task(self._janitor(), name="gateway-janitor"))

    async def close(self) -> None:
        """Stop the background work, close the upstream pools and the store."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        await self.batcher.close()
        await self._pool.close()
        if self._batch_store is not self.store:
            self._batch_store.close()
        self.store.close()

    async def _refresh_keys(self) -> None:
        while True:
            await asyncio.sleep(self.settings.key_refresh_s)
            try:
                await self._off_loop(self.keys.refresh)
            except Exception:  # noqa: BLE001  (a background loop must survive one bad turn)
                _log.exception("the key cache could not be refreshed; keeping the last one")

    async def _janitor(self) -> None:
        while True:
            await asyncio.sleep(60)
            try:
                now = self.clock.now()
                stale = now - self.settings.stale_after_s
                released = await self._off_loop(partial(self.store.release_stale, stale))
                if released:
                    _log.warning("released %d reservations of calls that never ended", released)
                await self._off_loop(partial(self.store.prune_counters, now))
            except Exception:  # noqa: BLE001  (idem)
                _log.exception("the janitor failed; it tries again in a minute")

    async def _off_loop(self, work: Callable[[], _T]) -> _T:
        """Run store ``work`` in a thread on PostgreSQL, inline on SQLite (µs)."""
        if self.store.blocking:
            return await asyncio.to_thread(work)
        return work()

    def caller(self, authorization: str | None) -> Caller:
        """The caller behind ``authorization``: 401 for a bad key, 403 for an unknown team."""
        key = self.keys.caller(authorization)
        team = self.config.team(key.team)
        if team is None:
            msg = f"team {key.team} is not on this gateway"
            raise ForbiddenError(msg, hint="an admin adds the team to the gateway configuration")
        tier = self.config.tier(team.tier)
        scopes: tuple[tuple[str, Limits], ...] = (
            (f"team:{team.name}", self._team_limits[tier.name]),
        )
        if not key.limits.is_empty:
            scopes += ((f"key:{key.key_id}", _key_limits(key)),)
        return Caller(key, team, tier, scopes)

    def model(self, name: str, endpoint: Endpoint) -> ModelEntry:
        """The catalogue entry ``name`` serving ``endpoint``: 404 unknown, 400 wrong kind."""
        entry = self.config.model(name)
        if entry is None:
            msg = f"the model {name!r} is not in the gateway's catalogue"
            raise NotFoundError(msg, hint="GET /v1/models lists the models you may call")
        if entry.kind != endpoint.kind:
            msg = f"{name} is a {entry.kind} model; it does not serve /v1/{endpoint.value}"
            raise ValidationError(msg)
        return entry

    def provider_secrets(self) -> tuple[str, ...]:
        """Every provider key (for scrubbing upstream messages)."""
        return tuple(s for p in self.providers.values() for s in p.secrets())


def _tier_limits(tier: Tier) -> Limits:
    return Limits(tier.rpm, tier.tpm, to_nano(tier.daily_spend), to_nano(tier.monthly_spend))


def _key_limits(key: KeyRecord) -> Limits:
    lim = key.limits
    return Limits(
        lim.rpm,
        lim.tpm,
        None if lim.daily_spend is None else to_nano(lim.daily_spend),
        None if lim.monthly_spend is None else to_nano(lim.monthly_spend),
    )
