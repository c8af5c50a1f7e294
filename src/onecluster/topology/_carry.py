"""What a leader's link board hands to the next leader (pure): each circuit's state, each
end's tracker state and flap penalty, and the route table's version and circuits routed
around.

The probe history is not carried: the agents' next reports rebuild it within a sync or two.
What cannot be rebuilt that fast is carried — a circuit held down by its flap damping must
stay down, a route table must not switch back onto a circuit that is still cut while the new
leader's trackers warm up, and an alert already sent must not be sent again.

Times are ages (seconds before the moment the carry was taken), so that a leader on another
host, with another monotonic clock, can place them on its own.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import cast, get_args

from onecluster.errors import ValidationError
from onecluster.model import CircuitState

__all__ = ["CircuitCarry", "EndCarry", "LinkCarry"]

_STATES: frozenset[object] = frozenset(get_args(CircuitState))


@dataclass(frozen=True, slots=True, kw_only=True)
class EndCarry:
    """One end's tracker: whether it saw the circuit down, and its flap penalty as of its
    last change (``penalty``), ``penalty_age_s`` before the carry was taken."""

    site: str
    down: bool
    penalty: float
    penalty_age_s: float


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
        return self._ages(lambda age: age + gap)

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

    def to_json(self) -> str:
        """The carry as JSON (what the database keeps)."""
        return json.dumps(
            {
                "version": self.version,
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
                            }
                            for e in c.ends
                        ],
                    }
                    for c in self.circuits
                ],
                "endpoints": [list(e) for e in self.endpoints],
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> LinkCarry:
        """The carry :meth:`to_json` wrote; :class:`ValidationError` for anything else."""
        try:
            raw = json.loads(text)
            circuits = tuple(
                CircuitCarry(
                    name=str(c["name"]),
                    a=str(c["a"]),
                    b=str(c["b"]),
                    state=_state(c["state"]),
                    ends=tuple(
                        EndCarry(
                            site=str(e["site"]),
                            down=bool(e["down"]),
                            penalty=float(e["penalty"]),
                            penalty_age_s=float(e["penalty_age_s"]),
                        )
                        for e in c["ends"]
                    ),
                )
                for c in raw["circuits"]
            )
            endpoints = tuple(
                (str(circuit), str(site), str(endpoint))
                for circuit, site, endpoint in raw.get("endpoints", [])
            )
            return cls(
                version=int(raw["version"]),
                down=frozenset(str(name) for name in raw["down"]),
                circuits=circuits,
                endpoints=endpoints,
            )
        except (ValueError, TypeError, KeyError) as exc:
            msg = f"the link state kept in the database cannot be read: {exc}"
            raise ValidationError(msg, hint="a new leader starts its links afresh") from exc


def _state(value: object) -> CircuitState:
    if value not in _STATES:
        msg = f"unknown circuit state {value!r}"
        raise ValueError(msg)
    return cast("CircuitState", value)
