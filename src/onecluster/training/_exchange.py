"""One round of cross-site averaging over a worker's mesh: each shard of the update has a
leader site that collects it, averages it in fp32 and sends back the one result every site
applies.

A round's vector is cut into one shard per site of the gang; site *j* leads shard *j* while
it is a member (live, not joining), else a member chosen by the shard's number.  A site
sends its part of every shard led elsewhere, leads its own, then waits for the other
results; if a leader is lost first, the shard goes to its next leader.  A leader waits for
every member's part (up to ``sync_timeout_s``; a member lost meanwhile is not waited for),
refuses a part that does not decode or is not finite (the sender gets an error, nobody
averages it in), and tells a sender whose part belongs to an earlier round or another
lineage to heal instead.  So every site applies the same bytes, or heals: sites never
silently diverge.

Rounds are numbered from 0 and only ever go up.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from onecluster.errors import IntegrityError, UnavailableError
from onecluster.training._codec import decode, encode
from onecluster.training._config import SyncConfig
from onecluster.training._mesh import Lineage, Mesh, Message
from onecluster.training._site import shard_bounds

__all__ = ["Averaged", "Exchange", "Heal", "is_reply"]

_log = logging.getLogger("onecluster.training")


@dataclass(frozen=True)
class Averaged:
    """A round's result: the average every site applies, who was in it, and its digest."""

    vector: torch.Tensor
    participants: tuple[int, ...]
    tokens: float
    digest: str


@dataclass(frozen=True)
class Heal:
    """This site cannot take part in the round: it must heal from site ``source``."""

    source: int
    why: str


class Exchange:
    """Averaging rounds over ``mesh`` under ``config``."""

    def __init__(
        self, mesh: Mesh, config: SyncConfig, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.mesh = mesh
        self.config = config
        self._clock = clock
        #: The results this site sent as a shard's leader, by (round, shard), with the line
        #: they were on: a part that comes late gets the same result (recent rounds only).
        self._sent: dict[tuple[int, int], tuple[str, dict[str, Any], bytes]] = {}

    def members(self, round_no: int | None = None) -> list[int]:
        """The live sites that are not joining, by rank (this one always); for a round, only
        those that take part in it: a site healed to round *k* takes part from *k* on, so a
        membership change never lands in the middle of a round (a site that merely finished
        the round first is still in it)."""
        me = self.mesh.topology.site_rank
        out = []
        for rank in self.mesh.live_ranks():
            peer = self.mesh.peer(rank)
            if rank == me or (
                peer is not None
                and not peer.joining
                and (round_no is None or peer.since <= round_no)
            ):
                out.append(rank)
        return out

    def leader(self) -> int:
        """The lowest-ranked member: whom a site heals from when told to by its round."""
        return self.members()[0]

    def leader_of(self, shard: int, round_no: int) -> int:
        """Who averages shard ``shard`` of round ``round_no``: site ``shard`` while it is a
        member, else a member chosen by the shard's number (so the work stays spread)."""
        members = self.members(round_no)
        return shard if shard in members else members[shard % len(members)]

    def average(self, round_no: int, vector: torch.Tensor, tokens: float) -> Averaged | Heal:
        """Average ``vector`` (1-D fp32, this site's update, from ``tokens`` tokens) with the
        other sites' updates of round ``round_no``.

        The vector is cut into one shard per site of the gang and site *j* averages shard
        *j* (a reduce-scatter, then the results go back: an all-gather), so that every
        circuit carries traffic both ways at once and no site does all the averaging."""
        me = self.mesh.topology.site_rank
        bounds = shard_bounds(0, vector.numel(), self.mesh.topology.n_sites)
        lineage = self.mesh.lineage
        deadline = self._clock() + self.config.sync_timeout_s
        done: dict[int, Averaged] = {}
        sent: dict[int, int] = {}  # shard → the leader it went to
        payloads: dict[int, bytes] = {}
        while len(done) < len(bounds):
            self.mesh.check()
            source = self.mesh.take_heal_from()
            if source is not None:
                return Heal(source, "a site with more merged work came back")
            mine = []
            for shard, (lo, hi) in enumerate(bounds):
                leader = self.leader_of(shard, round_no)
                if shard in done:
                    continue
                if leader == me:
                    mine.append(shard)
                elif sent.get(shard) != leader:
                    if shard not in payloads:
                        payloads[shard] = encode(vector[lo:hi], self.config.bits, self.config.block)
                    header = {
                        "kind": "contrib",
                        "round": round_no,
                        "shard": shard,
                        "tokens": tokens,
                        "numel": hi - lo,
                        "lineage": lineage.id,
                        "weight": lineage.weight,
                    }
                    if self.mesh.send(leader, header, payloads[shard]):
                        sent[shard] = leader
            for shard in mine:
                lo, hi = bounds[shard]
                led = self._lead(round_no, shard, vector[lo:hi], tokens, lineage, deadline)
                if isinstance(led, Heal):
                    return led
                done[shard] = led
                sent.pop(shard, None)
            waiting = {shard: leader for shard, leader in sent.items() if shard not in done}
            if not waiting:
                continue
            reply = self.mesh.take(
                functools.partial(_is_result, round_no, waiting),
                deadline,
                give_up=functools.partial(self._moved, waiting, round_no),
            )
            if reply is None:
                if self._clock() >= deadline:
                    names = ", ".join(sorted({self._name(r) for r in waiting.values()}))
                    raise UnavailableError(
                        f"no result of sync round {round_no} from site {names} in "
                        f"{self.config.sync_timeout_s:g} s",
                        hint="the site is alive but stuck; see its log",
                    )
                continue  # a leader was lost: its shards go to the next one
            leader, answer, body = reply
            if answer.get("heal"):
                return Heal(leader, str(answer.get("why", "the leader is on another line")))
            if answer.get("rejected"):
                raise IntegrityError(
                    f"site {self._name(leader)} refused this site's update of round "
                    f"{round_no}: {answer['rejected']}"
                )
            shard = int(answer.get("shard", -1))
            lo, hi = bounds[shard]
            done[shard] = self._result(answer, body, hi - lo)
        return _joined([done[shard] for shard in range(len(bounds))])

    def _moved(self, waiting: dict[int, int], round_no: int) -> bool:
        """Whether a shard's leader is lost or no longer its leader."""
        return any(
            not self.mesh.alive(leader) or self.leader_of(shard, round_no) != leader
            for shard, leader in waiting.items()
        )

    def _result(self, header: dict[str, object], body: bytes, numel: int) -> Averaged:
        vector = decode(body, numel, self.config.bits, self.config.block)
        participants = header.get("participants")
        tokens = header.get("tokens")
        if not isinstance(participants, list) or not isinstance(tokens, (int, float)):
            raise IntegrityError("a sync result has no participants or tokens")
        return Averaged(
            vector,
            tuple(int(p) for p in participants),
            float(tokens),
            hashlib.sha256(body).hexdigest()[:16],
        )

    def _lead(  # noqa: PLR0917 - one round's facts
        self,
        round_no: int,
        shard: int,
        vector: torch.Tensor,
        tokens: float,
        lineage: Lineage,
        deadline: float,
    ) -> Averaged | Heal:
        mesh = self.mesh
        me = mesh.topology.site_rank
        got: dict[int, tuple[torch.Tensor, float]] = {me: (vector.to(torch.float32), tokens)}
        refused: dict[int, str] = {}

        def pending() -> set[int]:
            members = self.members(round_no)
            return {r for r in members if r != me and r not in got and r not in refused}

        while True:
            waiting = pending()
            if not waiting:
                break
            message = mesh.take(
                functools.partial(_is_contrib, round_no, shard),
                deadline,
                give_up=functools.partial(_changed, pending, frozenset(waiting)),
            )
            source = mesh.take_heal_from()
            if source is not None:  # a heavier line came back while we waited
                return Heal(source, "a site with more merged work came back")
            if message is None:
                if self._clock() >= deadline:
                    _log.warning(
                        "sync round %d goes on without %s: no update in %g s",
                        round_no,
                        ", ".join(map(self._name, sorted(pending()))),
                        self.config.sync_timeout_s,
                    )
                    break
                continue
            heal = self._take_contrib(
                message,
                round_no=round_no,
                lineage=lineage,
                numel=vector.numel(),
                got=got,
                refused=refused,
            )
            if heal is not None:
                return heal
        total = sum(t for _, t in got.values())
        mean = torch.zeros_like(vector, dtype=torch.float32)
        for vec, t in got.values():
            mean.add_(vec, alpha=t / total if total > 0 else 1 / len(got))
        body = encode(mean, self.config.bits, self.config.block)
        participants = sorted(got)
        reply = {
            "kind": "result",
            "round": round_no,
            "shard": shard,
            "participants": participants,
            "tokens": total,
        }
        for rank in participants:
            if rank != me:
                mesh.send(rank, reply, body)
        self._sent[(round_no, shard)] = (lineage.id, reply, body)
        for key in [k for k in self._sent if k[0] < round_no - 1]:
            del self._sent[key]
        for rank, why in refused.items():
            mesh.send(rank, {"kind": "result", "round": round_no, "shard": shard, "rejected": why})
        return self._result(reply, body, vector.numel())

    def _take_contrib(
        self,
        message: Message,
        *,
        round_no: int,
        lineage: Lineage,
        numel: int,
        got: dict[int, tuple[torch.Tensor, float]],
        refused: dict[int, str],
    ) -> Heal | None:
        """Take one site's part into ``got`` (or ``refused``).  A part of another round or
        line: the site whose line merged less work heals from the other (equal work: the
        higher rank heals) — the sender is told to, or this site must (returned)."""
        rank, header, body = message
        theirs = int(header.get("round", -1))
        late = self._sent.get((theirs, int(header.get("shard", -1))))
        if late is not None and late[0] == header.get("lineage"):
            # Its part came after the shard was averaged without it: it still applies the
            # very result the others applied (not counted in it), and nobody waits.
            self.mesh.send(rank, late[1], late[2])
            return None
        if theirs != round_no or header.get("lineage") != lineage.id:
            why = (
                f"its update is for round {theirs}, this one is at {round_no}"
                if theirs != round_no
                else "it is on another line of outer steps"
            )
            weight = float(header.get("weight", 0.0))
            me = self.mesh.topology.site_rank
            if (weight, -rank) > (lineage.weight, -me):
                return Heal(rank, f"site {self._name(rank)} merged more work ({why})")
            _log.warning("site %s must heal: %s", self._name(rank), why)
            heal = {
                "kind": "result",
                "round": theirs,
                "shard": header.get("shard"),
                "heal": True,
                "why": why,
            }
            self.mesh.send(rank, heal)
            return None
        try:
            if int(header.get("numel", -1)) != numel:
                raise IntegrityError(f"it has {header.get('numel')} values, not {numel}")
            tokens = float(header.get("tokens", 0))
            if not 0 <= tokens < float("inf"):
                raise IntegrityError(f"it claims {tokens} tokens")
            got[rank] = (decode(body, numel, self.config.bits, self.config.block), tokens)
            return None
        except IntegrityError as exc:
            refused[rank] = exc.message
            _log.error(
                "refused the update of site %s in round %d: %s",
                self._name(rank),
                round_no,
                exc.message,
            )
            return None

    def _lost(self, rank: int) -> bool:
        return not self.mesh.alive(rank)

    def _name(self, rank: int) -> str:
        return self.mesh.topology.sites[rank]


def is_reply(kind: str, rank: int, round_no: int | None, message: Message) -> bool:
    """Whether ``message`` is a ``kind`` frame from site ``rank`` (of round ``round_no``)."""
    sender, header, _ = message
    return (
        sender == rank
        and header["kind"] == kind
        and (round_no is None or header.get("round") == round_no)
    )


def _changed(now: Callable[[], set[int]], then: frozenset[int]) -> bool:
    return now() != then


def _is_contrib(round_no: int, shard: int, message: Message) -> bool:
    """An update for ``shard`` of this round, or any update of another round (one of the two
    sites heals)."""
    header = message[1]
    if header["kind"] != "contrib":
        return False
    theirs = int(header.get("round", -1))
    return theirs != round_no or header.get("shard") == shard


def _is_result(round_no: int, waiting: dict[int, int], message: Message) -> bool:
    """A result (or a refusal, or a call to heal) of this round from a shard's leader."""
    sender, header, _ = message
    return (
        header["kind"] == "result"
        and header.get("round") == round_no
        and waiting.get(int(header.get("shard", -1))) == sender
    )


def _joined(parts: list[Averaged]) -> Averaged:
    """One round's result from its shards' results (in shard order)."""
    participants = sorted(set.intersection(*(set(p.participants) for p in parts)))
    digest = hashlib.sha256("".join(p.digest for p in parts).encode()).hexdigest()[:16]
    return Averaged(
        torch.cat([p.vector for p in parts]),
        tuple(participants),
        min(p.tokens for p in parts),
        digest,
    )
