"""The whole prediction: every mode, the verdict and the critic's numbers, as one value."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from onecluster.planner._inputs import PlanInputs
from onecluster.planner._modes import ModeResult, all_modes
from onecluster.planner._report import CriticNumbers, critic_numbers
from onecluster.planner._verdict import Verdict, choose

__all__ = ["SCHEMA_VERSION", "Plan", "plan", "predict"]

#: Version of :meth:`Plan.to_json`'s layout; bumped when a field changes meaning or goes.
SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """What :func:`plan` predicts for one set of inputs."""

    inputs: PlanInputs
    modes: tuple[ModeResult, ...]
    verdict: Verdict
    critic: CriticNumbers

    def mode(self, name: str) -> ModeResult:
        """The prediction of mode ``name``; :class:`KeyError` if there is none."""
        for m in self.modes:
            if m.mode == name:
                return m
        raise KeyError(name)

    def to_json(self) -> dict[str, Any]:
        """Every input and figure as plain JSON values (``docs/planner.md`` lists them)."""
        i = self.inputs
        return {
            "schema": SCHEMA_VERSION,
            "inputs": i.to_json(),
            "compute": {
                "gpus": i.total_gpus,
                "nodes": i.total_nodes,
                "peak_tflops": i.peak,
                "step_compute_s": i.step_compute_s,
                "gradient_bytes": i.gradient_bytes,
                "pseudo_gradient_bytes": i.pseudo_gradient_bytes,
            },
            "hops": [h.to_json() for h in i.hops],
            "modes": [m.to_json() for m in self.modes],
            "verdict": self.verdict.to_json(),
            "critic": self.critic.to_json(),
        }


def plan(inputs: PlanInputs) -> Plan:
    """Predict every mode for ``inputs``, choose one, and compute the critic's numbers for
    the chosen mode (or the closest one when none meets the target).  Pure; never raises
    for valid inputs."""
    modes = all_modes(inputs)
    verdict = choose(modes)
    shown = next(m for m in modes if m.mode == (verdict.mode or verdict.closest))
    return Plan(inputs=inputs, modes=modes, verdict=verdict, critic=critic_numbers(inputs, shown))


def predict(inputs: PlanInputs) -> dict[str, Any]:
    """:func:`plan` as a JSON-ready dict: the entry point for benchmarks that feed measured
    inputs (a measured ``step_time_s``, RTT and capacity) and compare with what they saw."""
    return plan(inputs).to_json()
