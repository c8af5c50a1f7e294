"""Training one model over several sites: the optimizer step of every worker goes through
:class:`CrossSite`, which keeps the sites in step.

- ``diloco``: every site runs ``sync_every`` inner steps of its own optimizer (AdamW),
  then the sites average their pseudo-gradients θ_global − θ_local and apply one outer
  Nesterov step (DiLoCo).  With ``fragments`` > 1 the parameters are cut into fragments
  synced in turn, one every ``sync_every / fragments`` steps (Streaming DiLoCo's schedule).
- ``ddp``: the sites average their gradients every step, before the inner step (for metro
  distances, where the planner says a per-step sync keeps up).

The update of each round is cut over the site's workers: worker *i* carries shard *i* to its
counterparts, then the site's workers gather the shards.  Every site starts from the lowest
site's initial weights; a site that joins late or comes back heals from a live peer's
state at that peer's next sync boundary; a site that is lost is left out of the rounds after
it (see :mod:`._exchange`, :mod:`._mesh`).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from onecluster.errors import IntegrityError, UnavailableError
from onecluster.training._config import SyncConfig
from onecluster.training._exchange import Averaged, Exchange, Heal, is_reply
from onecluster.training._mesh import Lineage, Mesh, Message, rendezvous_error
from onecluster.training._site import SiteGroup, shard_bounds
from onecluster.training._timings import RunTimings
from onecluster.training._topology import Topology

__all__ = ["CrossSite", "Round", "TrainStats"]

_log = logging.getLogger("onecluster.training")


@dataclass(frozen=True)
class Round:
    """What a sync round did: its number, the sites in it, or the site healed from."""

    number: int
    participants: tuple[str, ...]
    healed_from: str | None
    wait_s: float


@dataclass(frozen=True)
class TrainStats:
    """Counters of one worker.  ``wan_*``: every byte to and from other sites;
    ``sync_*``: update and result payloads; ``heal_*``: state payloads; ``sites_lost`` and
    ``sites_rejoined``: how often each peer site was lost, and came back after that."""

    inner_steps: int
    rounds: int
    heals: int
    sync_wait_s: float
    wan_sent: int
    wan_received: int
    sync_sent: int
    sync_received: int
    heal_sent: int
    heal_received: int
    sites_lost: Mapping[str, int] = field(default_factory=dict)
    sites_rejoined: Mapping[str, int] = field(default_factory=dict)


@dataclass
class _Flight:
    """An outer round on its way: fragment ``[lo, hi)``, round ``number``, landed at inner
    step ``land_at``; the exchange's result or error once it is back."""

    lo: int
    hi: int
    number: int
    land_at: int
    began: float
    thread: threading.Thread | None = None
    result: Averaged | Heal | None = None
    error: BaseException | None = None


class CrossSite:
    """Keeps ``model`` in step across the sites of ``topology`` (see the module docstring).

    Call :meth:`start` once (rendezvous, initial weights), then :meth:`step` in place of
    ``optimizer.step()`` after each backward pass, and :meth:`close` at the end.
    :attr:`timings` holds the durations of its steps and rounds (histograms).
    """

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        config: SyncConfig,
        topology: Topology,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.model = model
        self.optimizer = optimizer
        self.config = config
        self.topology = topology
        self._clock = clock
        self._params = [p for p in model.parameters() if p.requires_grad]
        shapes = [(name, tuple(p.shape)) for name, p in model.named_parameters() if p.requires_grad]
        self.digest = config.digest(shapes)
        self.mesh = Mesh(topology, config, self.digest, clock=clock)
        self.exchange = Exchange(self.mesh, config, clock=clock)
        self.site = SiteGroup(topology.local_rank, topology.local_world)
        numel = sum(p.numel() for p in self._params)
        self._global = self._flat().clone()
        self._momentum = torch.zeros(numel)
        self._shared = torch.zeros(0)  # the last round's gathered average
        self._flight: _Flight | None = None
        frags = config.fragments if config.mode == "diloco" else 1
        self._fragments = shard_bounds(0, numel, frags)
        self._inner = 0
        self._rounds = 0
        self._heals = 0
        self._wait_s = 0.0
        self.timings = RunTimings()
        self._step_began: float | None = None  # when the step under way began

    # -- the public surface -----------------------------------------------------------------

    def start(self) -> Round | None:
        """Meet the other sites and take the run's weights: the lowest site's initial ones, or
        a live peer's state when the run is already under way.  :class:`UnavailableError`
        when the other sites do not all connect within ``rendezvous_timeout_s``."""
        self.mesh.start()
        topo = self.topology
        deadline = self._clock() + self.config.rendezvous_timeout_s
        others = set(range(topo.n_sites)) - {topo.site_rank}

        def met() -> bool:
            live = set(self.mesh.live_ranks())
            return others <= live or self._under_way() is not None

        while not met():
            if self._clock() >= deadline:
                raise rendezvous_error(
                    topo,
                    sorted(others - set(self.mesh.live_ranks())),
                    self.config.rendezvous_timeout_s,
                )
            self.mesh.take(lambda m: False, min(deadline, self._clock() + 0.5), met)
        source = self._under_way()
        why = "the run is under way: this site joins it"
        if source is None and self.mesh.live_ranks()[0] != topo.site_rank:
            source = self.mesh.live_ranks()[0]
            why = "the run starts from the lowest site's weights"
        source = self.site.first(-1 if source is None else source)
        if source < 0:  # the lowest site at a fresh start: its weights are the run's
            self.mesh.set_lineage(Lineage())  # a member: said before any state is served
            self._serve_start()
            self._step_began = self._clock()
            return None
        healed = self._heal(source, why)
        self._step_began = self._clock()
        return healed

    def step(self, tokens: float) -> Round | None:
        """One inner step of this worker (``tokens``: what its batch held): in ``ddp`` mode the
        gradients are averaged across sites first; in ``diloco`` mode a round follows every
        ``sync_every / fragments`` steps.  The round's :class:`Round`, if one happened."""
        done = self._step(tokens)
        now = self._clock()
        if self._step_began is not None:
            self.timings.step.observe(now - self._step_began)
        self._step_began = now
        return done

    def _step(self, tokens: float) -> Round | None:
        if self.config.mode == "ddp":
            grads = torch.cat(
                [
                    (p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
                    for p in self._params
                ]
            )
            self._launch(0, len(grads), grads, tokens)
            done = self._land_ddp()
            if done.healed_from is None:
                self._unflatten(self._shared, into_grads=True)
            else:
                self.optimizer.zero_grad(set_to_none=True)
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            self._inner += 1
            self._global = self._flat().clone()
            self._serve_joins()
            return done

        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self._inner += 1
        landed = None
        if self._flight is not None and self._inner >= self._flight.land_at:
            landed = self._land()
        every = self.config.sync_every // self.config.fragments
        if self._inner % every:
            return landed
        frag = (self._inner // every - 1) % len(self._fragments)
        lo, hi = self._fragments[frag]
        delta = self._global[lo:hi] - self._flat()[lo:hi]
        self._launch(lo, hi, delta, tokens * every)
        if self.config.overlap_steps == 0:
            return self._land()
        return landed

    def finish(self) -> Round | None:
        """Land the round still in flight (streaming with overlap), if any: call it before
        the last evaluation or checkpoint."""
        return self._land() if self._flight is not None else None

    def stats(self) -> TrainStats:
        mesh = self.mesh.stats()
        return TrainStats(
            self._inner,
            self._rounds,
            self._heals,
            self._wait_s,
            mesh.sent,
            mesh.received,
            mesh.sync_sent,
            mesh.sync_received,
            mesh.heal_sent,
            mesh.heal_received,
            mesh.lost,
            mesh.rejoined,
        )

    def close(self) -> None:
        self.mesh.close()

    # -- rounds -----------------------------------------------------------------------------

    def _launch(self, lo: int, hi: int, delta: torch.Tensor, tokens: float) -> None:
        """Start the outer round of fragment ``[lo, hi)``: in this thread when it does not
        overlap compute, else in a thread of its own, landed ``overlap_steps`` steps later
        (only the cross-site exchange runs there: the site's collectives stay in order on
        the training thread)."""
        bounds = shard_bounds(0, hi - lo, self.topology.local_world)
        a, b = bounds[self.topology.local_rank]
        flight = _Flight(
            lo, hi, self._rounds, self._inner + self.config.overlap_steps, self._clock()
        )
        shard = delta[a:b].contiguous()
        site_tokens = tokens * self.topology.local_world

        def run() -> None:
            began = self._clock()
            try:
                flight.result = self.exchange.average(flight.number, shard, site_tokens)
            except BaseException as exc:  # noqa: BLE001 - raised again when it lands
                flight.error = exc
            if isinstance(flight.result, Averaged):
                self.timings.outer_sync.observe(self._clock() - began)

        self._flight = flight
        if self.config.overlap_steps == 0:
            run()
        else:
            flight.thread = threading.Thread(target=run, name="oc-outer-round", daemon=True)
            flight.thread.start()

    def _land(self) -> Round:
        """Wait for the round in flight and apply it (or heal)."""
        flight = self._flight
        assert flight is not None
        self._flight = None
        # Blocking: the exchange ran at launch.  Overlapped: only the wait for it counts.
        waited = flight.began if flight.thread is None else self._clock()
        if flight.thread is not None:
            flight.thread.join()
        if flight.error is not None:
            raise flight.error
        assert flight.result is not None
        done = self._round(flight.lo, flight.hi, flight.result, flight.number, waited)
        self._wait_s += self._clock() - waited
        if done.healed_from is None:
            self._outer(flight.lo, flight.hi, self._shared)
        self._serve_joins()
        return done

    def _land_ddp(self) -> Round:
        """Land a per-step round: the gathered average stays in ``self._shared``."""
        flight = self._flight
        assert flight is not None and flight.thread is None
        self._flight = None
        if flight.error is not None:
            raise flight.error
        assert flight.result is not None
        done = self._round(flight.lo, flight.hi, flight.result, flight.number, flight.began)
        self._wait_s += self._clock() - flight.began
        return done

    def _round(
        self, lo: int, hi: int, result: Averaged | Heal, round_no: int, began: float
    ) -> Round:
        """The site's side of a round whose exchange gave ``result`` for this worker's shard
        of ``[lo, hi)``: heal if any worker of the site must, else gather the shards into
        ``self._shared`` and advance the lineage."""
        bounds = shard_bounds(0, hi - lo, self.topology.local_world)
        heal = self.site.any(isinstance(result, Heal))
        if heal:
            source = result.source if isinstance(result, Heal) else -1
            source = self.site.first(source if source >= 0 else self.exchange.leader())
            why = result.why if isinstance(result, Heal) else "another worker of the site"
            return self._heal(source, why)
        assert isinstance(result, Averaged)
        self._shared = self.site.gather(result.vector, bounds)
        self._rounds += 1
        self._advance(result)
        names = tuple(self.topology.sites[r] for r in result.participants)
        if len(result.participants) < self.topology.n_sites:
            _log.info(
                "round %d: %d of %d sites (%s)",
                round_no,
                len(names),
                self.topology.n_sites,
                ", ".join(names),
            )
        return Round(round_no, names, None, self._clock() - began)

    def _advance(self, result: Averaged) -> None:
        old = self.mesh.lineage
        history = (old.id, *old.history)[:4]
        new_id = f"{self._rounds}:{result.digest}"
        self.mesh.set_lineage(
            Lineage(new_id, history, old.weight + result.tokens, self._rounds, since=old.since)
        )

    def _outer(self, lo: int, hi: int, delta: torch.Tensor) -> None:
        """The outer Nesterov step on ``[lo, hi)`` with the averaged pseudo-gradient."""
        mu, lr = self.config.outer_momentum, self.config.outer_lr
        m = self._momentum[lo:hi]
        m.mul_(mu).add_(delta)
        self._global[lo:hi].sub_(delta + mu * m, alpha=lr)
        local = self._flat()
        alpha = self.config.merge_alpha  # streaming: the local steps since launch count too
        local[lo:hi] = alpha * local[lo:hi] + (1 - alpha) * self._global[lo:hi]
        self._unflatten(local)

    # -- healing ----------------------------------------------------------------------------

    def _under_way(self) -> int | None:
        """The live peer with the most merged work, if the run is past its start."""
        best: tuple[float, int, int] | None = None
        for rank in self.mesh.live_ranks():
            peer = self.mesh.peer(rank)
            if peer is not None and not peer.joining and (peer.step > 0 or peer.weight > 0):
                key = (peer.weight, -rank, rank)
                best = key if best is None or key > best else best
        return None if best is None else best[2]

    def _heal(self, source: int, why: str) -> Round:
        """Take a live peer's state at its next sync boundary (another peer's if it is lost)."""
        topo = self.topology
        began = self._clock()
        old = self.mesh.lineage
        self.mesh.set_lineage(
            Lineage(old.id, old.history, old.weight, old.step, joining=True, since=old.since)
        )
        self.mesh.take_heal_from()  # this heal answers any reason to heal met so far
        _log.info("healing from site %s: %s", topo.sites[source], why)
        deadline = began + self.config.heal_timeout_s
        numel = self._global.numel()
        bounds = shard_bounds(0, numel, topo.local_world)
        a, b = bounds[topo.local_rank]
        self.mesh.drain(functools.partial(_kind_is, "state"))  # a reply to an older join
        while True:
            if not self.mesh.send(source, {"kind": "join", "lo": a, "hi": b}):
                message = None
            else:
                message = self.mesh.take(
                    functools.partial(is_reply, "state", source, None),
                    deadline,
                    give_up=functools.partial(self._lost, source),
                )
            if message is not None:
                break
            if self._clock() >= deadline:
                raise UnavailableError(
                    f"no state from site {topo.sites[source]} in "
                    f"{self.config.heal_timeout_s:g} s to heal from",
                )
            other = self._under_way()
            live = [r for r in self.mesh.live_ranks() if r != topo.site_rank]
            source = other if other is not None else (live[0] if live else source)
            self.mesh.take(lambda m: False, min(deadline, self._clock() + 0.2))
        _, header, body = message
        size = b - a
        opt = header.get("optimizer") or {}
        keys = [str(k) for k in opt.get("keys", [])]
        scalars = {str(k): float(v) for k, v in opt.get("scalars", {}).items()}
        if len(body) != 4 * size * (2 + len(keys)):
            raise IntegrityError(
                f"the state of site {topo.sites[source]} has {len(body)} bytes, not "
                f"{4 * size * (2 + len(keys))}"
            )
        data = torch.frombuffer(bytearray(body), dtype=torch.float32).clone()
        if not bool(torch.isfinite(data).all()):
            raise IntegrityError(f"the state of site {topo.sites[source]} is not finite")
        pieces = [
            self.site.gather(data[i * size : (i + 1) * size], bounds) for i in range(2 + len(keys))
        ]
        self._global, self._momentum = pieces[0], pieces[1]
        self._unflatten(self._global.clone())
        self._load_optimizer_state(keys, scalars, pieces[2:])
        lineage = Lineage.from_json(header["lineage"])
        self.mesh.set_lineage(
            Lineage(lineage.id, lineage.history, lineage.weight, lineage.step, since=lineage.step)
        )
        self._rounds = lineage.step
        self._inner = int(header["inner"])
        self._heals += 1
        _log.info(
            "healed from site %s at round %d (%.1f s)",
            topo.sites[source],
            self._rounds,
            self._clock() - began,
        )
        return Round(self._rounds, (), topo.sites[source], self._clock() - began)

    def _lost(self, rank: int) -> bool:
        return not self.mesh.alive(rank)

    def _serve_joins(self) -> None:
        """Send this worker's state shard to every peer that asked to heal."""
        for rank, header, _ in self.mesh.drain(lambda m: m[1]["kind"] == "join"):
            self._send_state(rank, header)

    def _serve_start(self) -> None:
        """The lowest site at a fresh start: wait for every live site's join and answer it."""
        deadline = self._clock() + self.config.rendezvous_timeout_s
        waiting = set(self.mesh.live_ranks()) - {self.topology.site_rank}
        while waiting and self._clock() < deadline:
            message = self.mesh.take(
                lambda m: m[1]["kind"] == "join",
                deadline,
                give_up=lambda: not waiting & set(self.mesh.live_ranks()),
            )
            if message is None:
                break
            self._send_state(message[0], message[1])
            waiting.discard(message[0])

    def _send_state(self, rank: int, header: dict[str, object]) -> None:
        lo, hi = header.get("lo"), header.get("hi")
        numel = self._global.numel()
        if not (isinstance(lo, int) and isinstance(hi, int) and 0 <= lo <= hi <= numel):
            _log.warning("ignored a malformed join from site %s", self.topology.sites[rank])
            return
        keys, scalars, vectors = self._optimizer_state()
        parts = [self._global[lo:hi], self._momentum[lo:hi], *(v[lo:hi] for v in vectors)]
        body = torch.cat(parts).numpy().tobytes()
        reply = {
            "kind": "state",
            "lineage": self.mesh.lineage.to_json(),
            "inner": self._inner,
            "optimizer": {"keys": keys, "scalars": scalars},
        }
        if self.mesh.send(rank, reply, body):
            self.mesh.mark_joined(rank, self.mesh.lineage)

    def _optimizer_state(self) -> tuple[list[str], dict[str, float], list[torch.Tensor]]:
        """In ``ddp`` mode, the inner optimizer's per-parameter tensors (AdamW's moments),
        each flattened over the parameters, and its scalars (the step): a healed site must
        continue with the same optimizer, or its weights drift from its peers'.  DiLoCo
        sends none: its outer step re-aligns the sites every round (decision 150)."""
        if self.config.mode != "ddp" or not self._params:
            return [], {}, []
        first = self.optimizer.state.get(self._params[0], {})
        keys = sorted(
            k
            for k, v in first.items()
            if isinstance(v, torch.Tensor) and v.numel() == self._params[0].numel()
        )
        scalars = {
            k: float(v)
            for k, v in first.items()
            if isinstance(v, (int, float)) or (isinstance(v, torch.Tensor) and v.numel() == 1)
        }
        if any(k not in self.optimizer.state.get(p, {}) for p in self._params for k in keys):
            return [], {}, []  # a parameter without state yet: nothing consistent to send
        vectors = [
            torch.cat([self.optimizer.state[p][k].detach().reshape(-1) for p in self._params]).to(
                torch.float32
            )
            for k in keys
        ]
        return keys, scalars, vectors

    def _load_optimizer_state(
        self, keys: list[str], scalars: dict[str, float], vectors: list[torch.Tensor]
    ) -> None:
        """Take the source's inner optimizer state; without one, the moments restart."""
        self.optimizer.state.clear()
        if not keys:
            return
        offset = 0
        for p in self._params:
            n = p.numel()
            state: dict[str, Any] = {k: torch.tensor(v) for k, v in scalars.items()}
            for k, vec in zip(keys, vectors, strict=True):
                state[k] = vec[offset : offset + n].view_as(p).to(p.dtype).clone()
            self.optimizer.state[p] = state
            offset += n

    # -- flat views -------------------------------------------------------------------------

    def _flat(self) -> torch.Tensor:
        return torch.cat([p.detach().reshape(-1) for p in self._params]).to(torch.float32)

    def _unflatten(self, flat: torch.Tensor, *, into_grads: bool = False) -> None:
        offset = 0
        with torch.no_grad():
            for p in self._params:
                n = p.numel()
                piece = flat[offset : offset + n].view_as(p).to(p.dtype)
                if into_grads:
                    p.grad = piece.clone()
                else:
                    p.copy_(piece)
                offset += n


def _kind_is(kind: str, message: Message) -> bool:
    return bool(message[1]["kind"] == kind)
