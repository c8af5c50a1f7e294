"""What a leader's link board hands to the next leader (pure): each circuit's state, each
end's tracker state and flap penalty, and the route table's version and circuits routed
around.

The probe history is not carried: the agents' next reports rebuild it within a sync or two.
What cannot be rebuilt that fast is carried — a circuit held down by its flap damping must
stay down, a route table must not switch back onto a circuit that is still cut while the new
leader's trackers warm up, and an alert already sent must not be sent again.

The carry is plain values (:meth:`LinkCarry.as_dict`); the server keeps it as JSON.  Times
are ages (seconds before the moment the carry was taken), so that a leader on another
host, with another clock, can place them on its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import cast, get_args

from onecluster.errors import ValidationError
from onecluster.model import CircuitState

__all__ = ["CircuitCarry", "EndCarry", "LinkCarry"]

_STATES: frozenset[object] = frozenset(get_args(CircuitState))


@dataclass(frozen=True, slots=True, kw_only=True)
class EndCarry:
    """One end's tracker: whether it saw the circuit down, its flap penalty as of its last
    change (``penalty``), ``penalty_age_s`` before the carry was taken, its agent and its RTT
    floor."""

    site: str
    down: bool
    penalty: float
    penalty_age_s: float
    #: The agent whose probes the tracker took (another agent restarts the end afresh).
    agent_id: str | None = None
    #: The tracker's floor RTT: a degraded circuit stays judged against it.
    min_rtt_ms: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CircuitCarry:
    """One circuit between ``a`` and ``b``: its state and its ends that had a tracker."""

    name: str
    a: str
    b: str
    state: CircuitState
    ends: tuple[EndCarry, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkCarry:
    """Every circuit's carry, the route table's version and the circuits it routes around."""

    version: int
    down: frozenset[str]
    circuits: tuple[CircuitCarry, ...]
    #: The leader's term that wrote it (0: not written by a leader).
    term: int = 0
    #: Where each circuit's end listens for probes, ``(circuit, site, ADDRESS:PORT)``: the
    #: server's to fill in (it tells each agent its peers), so that probing never pauses.
    endpoints: tuple[tuple[str, str, str], ...] = ()

    def shape(self) -> LinkCarry:
        """This carry without its ages: equal shapes need not be written again (a penalty
        only decays between them, which its age says)."""
        return self._ages(lambda _: 0.0)

    def aged(self, seconds: float) -> LinkCarry:
        """This carry ``seconds`` later (every age grows; a negative gap counts as none)."""
        gap = max(seconds, 0.0)
        return self._ages(lambda age: max(age, 0.0) + gap)

    def unjudged(self) -> LinkCarry:
        """This carry with its judgements dropped — every circuit ``unknown``, no end down,
        no RTT floor, nothing routed around, the next version — keeping the flap penalties
        and the probe endpoints: what a leader may take from a carry too old to vouch for
        the circuits (written by a leader other than the one just before, or long ago)."""
        circuits = tuple(
            replace(
                c,
                state="unknown",
                ends=tuple(replace(e, down=False, min_rtt_ms=None) for e in c.ends),
            )
            for c in self.circuits
        )
        return replace(self, version=self.version + 1, down=frozenset(), circuits=circuits)

    def _ages(self, new: Callable[[float], float]) -> LinkCarry:
        """This carry with every end's penalty age mapped through ``new``."""
        circuits = tuple(
            replace(
                c,
                ends=tuple(replace(e, penalty_age_s=new(e.penalty_age_s)) for e in c.ends),
            )
            for c in self.circuits
        )
        return replace(self, circuits=circuits)

    def as_dict(self) -> dict[str, object]:
        """The carry as plain values (the server keeps it as JSON)."""
        return {
            "version": self.version,
            "term": self.term,
            "down": sorted(self.down),
            "circuits": [
                {
                    "name": c.name,
                    "a": c.a,
                    "b": c.b,
                    "state": c.state,
                    "ends": [
                        {
                            "site": e.site,
                            "down": e.down,
                            "penalty": e.penalty,
                            "penalty_age_s": e.penalty_age_s,
                            "agent_id": e.agent_id,
                            "min_rtt_ms": e.min_rtt_ms,
                        }
                        for e in c.ends
                    ],
                }
                for c in self.circuits
            ],
            "endpoints": [list(e) for e in self.endpoints],
        }

    @classmethod
    def from_dict(cls, value: object) -> LinkCarry:
        """The carry :meth:`as_dict` gave; :class:`ValidationError` for anything else —
        a wrong type, a number that is not finite or is negative — so that a damaged row
        can never reach a tracker."""
        try:
            raw = _dict(value)
            circuits = tuple(_circuit(_dict(c)) for c in _list(raw["circuits"]))
            endpoints = tuple(
                (_str(circuit), _str(site), _str(endpoint))
                for circuit, site, endpoint in (_list(e) for e in _list(raw.get("endpoints", [])))
            )
            return cls(
                version=_count(raw["version"]),
                term=_count(raw.get("term", 0)),
                down=frozenset(_str(name) for name in _list(raw["down"])),
                circuits=circuits,
                endpoints=endpoints,
            )
        except (ValueError, TypeError, KeyError, OverflowError) as exc:
            msg = f"the link state kept in the database cannot be read: {exc}"
            raise ValidationError(msg, hint="a new leader starts its links afresh") from exc


def _circuit(raw: dict[str, object]) -> CircuitCarry:
    return CircuitCarry(
        name=_str(raw["name"]),
        a=_str(raw["a"]),
        b=_str(raw["b"]),
        state=_state(raw["state"]),
        ends=tuple(_end(_dict(e)) for e in _list(raw["ends"])),
    )


def _end(raw: dict[str, object]) -> EndCarry:
    agent_id = raw.get("agent_id")
    floor = raw.get("min_rtt_ms")
    return EndCarry(
        site=_str(raw["site"]),
        down=_bool(raw["down"]),
        penalty=_amount(raw["penalty"]),
        penalty_age_s=_amount(raw["penalty_age_s"]),
        agent_id=None if agent_id is None else _str(agent_id),
        min_rtt_ms=None if floor is None else _amount(floor),
    )


def _dict(value: object) -> dict[str, object]:
    if not isinstance(value, dict):
        msg = f"expected an object, not {value!r:.40}"
        raise TypeError(msg)
    return value


def _list(value: object) -> list[object]:
    if not isinstance(value, list):
        msg = f"expected a list, not {value!r:.40}"
        raise TypeError(msg)
    return value


def _str(value: object) -> str:
    if not isinstance(value, str):
        msg = f"expected a string, not {value!r:.40}"
        raise TypeError(msg)
    return value


def _bool(value: object) -> bool:
    if not isinstance(value, bool):
        msg = f"expected true or false, not {value!r:.40}"
        raise TypeError(msg)
    return value


def _amount(value: object) -> float:
    """A finite, non-negative number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        msg = f"expected a number, not {value!r:.40}"
        raise TypeError(msg)
    number = float(value)
    if not math.isfinite(number) or number < 0:
        msg = f"expected a finite number of at least 0, not {value!r:.40}"
        raise ValueError(msg)
    return number


def _count(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        msg = f"expected a whole number of at least 0, not {value!r:.40}"
        raise TypeError(msg)
    return value


def _state(value: object) -> CircuitState:
    if value not in _STATES:
        msg = f"unknown circuit state {value!r}"
        raise ValueError(msg)
    return cast("CircuitState", value)
