"""The probe packet (a TWAMP-Light-like exchange over UDP, fixed 64 bytes).

A sender's *probe* carries a sequence number and its wall-clock send time; the reflector
answers with a *reply* that copies both and adds its own wall-clock receive time.  The
sender measures the round trip on its monotonic clock; the two wall-clock stamps give the
one-way transit whose differences feed the RFC 3550 jitter estimator (the offset between the
two clocks cancels out of those differences).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Literal

__all__ = ["PACKET_SIZE", "Packet", "decode", "encode"]

_MAGIC = b"OCP1"
_FORMAT = struct.Struct("!4sB3xQqq")
#: Every probe and reply is padded to this size (a small, realistic control packet).
PACKET_SIZE = 64
_KINDS = {1: "probe", 2: "reply"}
_CODES = {"probe": 1, "reply": 2}


@dataclass(frozen=True, slots=True)
class Packet:
    """A probe or its reply; ``reflected_ns`` is 0 in a probe."""

    kind: Literal["probe", "reply"]
    seq: int
    sent_ns: int
    reflected_ns: int = 0


def encode(packet: Packet) -> bytes:
    """The packet's bytes, padded to :data:`PACKET_SIZE`."""
    head = _FORMAT.pack(
        _MAGIC, _CODES[packet.kind], packet.seq, packet.sent_ns, packet.reflected_ns
    )
    return head.ljust(PACKET_SIZE, b"\0")


def decode(data: bytes) -> Packet | None:
    """The packet in ``data``, or ``None`` for anything that is not one of ours."""
    if len(data) < _FORMAT.size:
        return None
    magic, kind, seq, sent_ns, reflected_ns = _FORMAT.unpack_from(data)
    if magic != _MAGIC or kind not in _KINDS:
        return None
    return Packet(
        kind="probe" if kind == 1 else "reply", seq=seq, sent_ns=sent_ns, reflected_ns=reflected_ns
    )
