"""How the sites of a training gang synchronise, with every timeout explicit (pure).

Defaults are for a long run over continental circuits: a site is declared lost after 10 s of
silence (a shorter flap changes nothing), a live but slow site is waited for up to 30 min,
and a returning site waits up to 30 min for a peer's state (a peer sends it at its next sync
boundary, up to ``sync_every`` inner steps away).  ``docs/training.md`` gives the reasons.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Literal

from onecluster.errors import ValidationError

__all__ = ["Mode", "SyncConfig"]

Mode = Literal["diloco", "ddp"]
_BITS = (32, 16, 8, 4)


@dataclass(frozen=True)
class SyncConfig:
    """The cross-site synchronisation of one run; every site must use the same one.

    ``mode``: ``diloco`` (an outer step every ``sync_every`` inner steps: Nesterov on the
    averaged pseudo-gradient) or ``ddp`` (gradients averaged across sites every step).
    ``bits``: what a value takes on the wire (32 fp32, 16 fp16, 8 or 4 int with a scale per
    block of ``block`` values); accumulation is always fp32.  ``fragments`` > 1 streams the
    outer step: fragment *f* is synced ``f·sync_every/fragments`` steps into each cycle.
    ``overlap_steps`` > 0 overlaps each round with that many inner steps (it lands later),
    and the fragment then becomes ``merge_alpha``·local + (1 − ``merge_alpha``)·global.

    Timeouts, seconds:

    - ``peer_timeout_s``: silence after which a peer site is declared lost (heartbeats every
      ``heartbeat_s``); a closed connection is a loss at once;
    - ``sync_timeout_s``: the longest wait at a sync for a live site's update;
    - ``rendezvous_timeout_s``: the longest wait at start for the other sites;
    - ``heal_timeout_s``: the longest wait of a returning site for a peer's state.
    """

    mode: Mode = "diloco"
    sync_every: int = 100
    bits: int = 8
    block: int = 4096
    fragments: int = 1
    overlap_steps: int = 0
    merge_alpha: float = 0.0
    outer_lr: float = 0.7
    outer_momentum: float = 0.9
    heartbeat_s: float = 0.5
    peer_timeout_s: float = 10.0
    sync_timeout_s: float = 1800.0
    rendezvous_timeout_s: float = 600.0
    heal_timeout_s: float = 1800.0

    def __post_init__(self) -> None:
        if self.mode not in ("diloco", "ddp"):
            raise ValidationError(f"mode is {self.mode!r}; use diloco or ddp")
        if self.sync_every < 1:
            raise ValidationError(f"sync_every is {self.sync_every}; it must be at least 1")
        if self.bits not in _BITS:
            raise ValidationError(f"bits is {self.bits}; use one of {', '.join(map(str, _BITS))}")
        if self.block < 16 or self.block % 2:
            raise ValidationError(f"block is {self.block}; use an even number of at least 16")
        if not 1 <= self.fragments <= self.sync_every:
            raise ValidationError(
                f"fragments is {self.fragments}; use 1..sync_every ({self.sync_every})"
            )
        if self.mode == "ddp" and (
            self.fragments != 1 or self.sync_every != 1 or self.overlap_steps != 0
        ):
            raise ValidationError(
                "ddp mode syncs every step: sync_every 1, fragments 1, overlap_steps 0"
            )
        every = self.sync_every // self.fragments
        if self.mode == "diloco" and not 0 <= self.overlap_steps < every:
            raise ValidationError(
                f"overlap_steps is {self.overlap_steps}; a round must land before the next "
                f"starts: use 0..{every - 1} (sync_every / fragments - 1)"
            )
        if not 0 <= self.merge_alpha <= 1:
            raise ValidationError(f"merge_alpha is {self.merge_alpha}; use 0..1")
        for name in (
            "heartbeat_s",
            "peer_timeout_s",
            "sync_timeout_s",
            "rendezvous_timeout_s",
            "heal_timeout_s",
            "outer_lr",
        ):
            value = getattr(self, name)
            if not 0 < value < float("inf"):
                raise ValidationError(f"{name} is {value}; it must be a positive number")
        if not 0 <= self.outer_momentum < 1:
            raise ValidationError(f"outer_momentum is {self.outer_momentum}; use 0 <= m < 1")
        if self.peer_timeout_s < 2 * self.heartbeat_s:
            raise ValidationError(
                f"peer_timeout_s ({self.peer_timeout_s}) must be at least two heartbeats "
                f"({2 * self.heartbeat_s} s), or one late heartbeat loses a site"
            )

    def digest(self, shapes: list[tuple[str, tuple[int, ...]]]) -> str:
        """What every site must agree on: this config's sync rules and the model's parameter
        names and shapes (timeouts may differ per site)."""
        rules = {k: v for k, v in asdict(self).items() if not k.endswith("_s")}
        text = json.dumps({"rules": rules, "shapes": shapes}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]
