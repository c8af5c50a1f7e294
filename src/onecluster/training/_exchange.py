"""One round of cross-site averaging over a worker's mesh: the leader collects, averages in
fp32 and sends the one result every site applies.

The leader of a round is the lowest-ranked live site that is not joining.  A member sends
its update to the leader and waits for the result; if the leader is lost first, it sends
the update to the next leader.  The leader waits for every live member's update (up to
``sync_timeout_s``; a member lost meanwhile is not waited for), refuses an update that does
not decode or is not finite (the sender gets an error, nobody averages it in), and tells a
member whose update belongs to an earlier round or another lineage to heal instead.  So
every site applies the same bytes, or heals: sites never silently diverge.

Rounds are numbered ``step · fragments + fragment`` and only ever go up.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from onecluster.errors import IntegrityError, UnavailableError
from onecluster.training._codec import decode, encode
from onecluster.training._config import SyncConfig
from onecluster.training._mesh import Lineage, Mesh, Message

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

    def leader(self) -> int:
        """The lowest-ranked live site that is not joining (this one if none is lower)."""
        me = self.mesh.topology.site_rank
        for rank in self.mesh.live_ranks():
            if rank == me:
                return me
            peer = self.mesh.peer(rank)
            if peer is not None and not peer.joining:
                return rank
        return me

    def average(self, round_no: int, vector: torch.Tensor, tokens: float) -> Averaged | Heal:
        """Average ``vector`` (1-D fp32, this site's update, from ``tokens`` tokens) with the
        other sites' updates of round ``round_no``."""
        payload = encode(vector, self.config.bits, self.config.block)
        lineage = self.mesh.lineage
        header = {
            "kind": "contrib",
            "round": round_no,
            "tokens": tokens,
            "numel": vector.numel(),
            "lineage": lineage.id,
        }
        deadline = self._clock() + self.config.sync_timeout_s
        while True:
            self.mesh.check()
            source = self.mesh.take_heal_from()
            if source is not None:
                return Heal(source, "a site with more merged work came back")
            leader = self.leader()
            if leader == self.mesh.topology.site_rank:
                return self._lead(round_no, vector, tokens, lineage, deadline)
            if not self.mesh.send(leader, header, payload):
                continue
            reply = self.mesh.take(
                functools.partial(is_reply, "result", leader, round_no),
                deadline,
                give_up=functools.partial(self._lost, leader),
            )
            if reply is None:
                if self._clock() >= deadline:
                    raise UnavailableError(
                        f"no result of sync round {round_no} from site "
                        f"{self._name(leader)} in {self.config.sync_timeout_s:g} s",
                        hint="the site is alive but stuck; see its log",
                    )
                continue  # the leader was lost: send to the next one
            _, answer, body = reply
            if answer.get("heal"):
                return Heal(leader, str(answer.get("why", "the leader is on another line")))
            if answer.get("rejected"):
                raise IntegrityError(
                    f"site {self._name(leader)} refused this site's update of round "
                    f"{round_no}: {answer['rejected']}"
                )
            return self._result(answer, body, vector.numel())

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

    def _lead(
        self,
        round_no: int,
        vector: torch.Tensor,
        tokens: float,
        lineage: Lineage,
        deadline: float,
    ) -> Averaged:
        mesh = self.mesh
        me = mesh.topology.site_rank
        got: dict[int, tuple[torch.Tensor, float]] = {me: (vector.to(torch.float32), tokens)}
        refused: dict[int, str] = {}

        def pending() -> set[int]:
            out = set()
            for rank in mesh.live_ranks():
                peer = mesh.peer(rank)
                if (
                    rank != me
                    and rank not in got
                    and rank not in refused
                    and (peer is not None and not peer.joining)
                ):
                    out.add(rank)
            return out

        while True:
            waiting = pending()
            if not waiting:
                break
            message = mesh.take(
                lambda m: m[1]["kind"] == "contrib" and int(m[1].get("round", -1)) <= round_no,
                deadline,
                give_up=functools.partial(_changed, pending, frozenset(waiting)),
            )
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
            self._take_contrib(
                message,
                round_no=round_no,
                lineage=lineage,
                numel=vector.numel(),
                got=got,
                refused=refused,
            )
        total = sum(t for _, t in got.values())
        mean = torch.zeros_like(vector, dtype=torch.float32)
        for vec, t in got.values():
            mean.add_(vec, alpha=t / total if total > 0 else 1 / len(got))
        body = encode(mean, self.config.bits, self.config.block)
        participants = sorted(got)
        reply = {"kind": "result", "round": round_no, "participants": participants, "tokens": total}
        for rank in participants:
            if rank != me:
                mesh.send(rank, reply, body)
        for rank, why in refused.items():
            mesh.send(rank, {"kind": "result", "round": round_no, "rejected": why})
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
    ) -> None:
        rank, header, body = message
        theirs = int(header.get("round", -1))
        if theirs != round_no or header.get("lineage") != lineage.id:
            why = (
                f"its update is for round {theirs}, this one is at {round_no}"
                if theirs != round_no
                else "it is on another line of outer steps"
            )
            _log.warning("site %s must heal: %s", self._name(rank), why)
            self.mesh.send(rank, {"kind": "result", "round": theirs, "heal": True, "why": why})
            return
        try:
            if int(header.get("numel", -1)) != numel:
                raise IntegrityError(f"it has {header.get('numel')} values, not {numel}")
            tokens = float(header.get("tokens", 0))
            if not 0 <= tokens < float("inf"):
                raise IntegrityError(f"it claims {tokens} tokens")
            got[rank] = (decode(body, numel, self.config.bits, self.config.block), tokens)
        except IntegrityError as exc:
            refused[rank] = exc.message
            _log.error(
                "refused the update of site %s in round %d: %s",
                self._name(rank),
                round_no,
                exc.message,
            )

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
