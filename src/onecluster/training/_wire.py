"""Frames between the sites of a gang: a JSON header and a binary payload, sealed with a
BLAKE2b digest so that a corrupt frame is refused, never applied.

Layout: ``OCT1`` · header length (u32) · payload length (u64) · header · payload · digest (16
bytes, over header and payload).
"""

from __future__ import annotations

import hashlib
import json
import socket
import struct
from collections.abc import Callable
from typing import Any

from onecluster.errors import IntegrityError

__all__ = ["MAX_HEADER", "Frame", "read_frame", "write_frame"]

_MAGIC = b"OCT1"
_PREFIX = struct.Struct("!4sIQ")
_DIGEST = 16
MAX_HEADER = 1 << 20
_MAX_PAYLOAD = 1 << 40

Frame = tuple[dict[str, Any], bytes]


def _digest(header: bytes, payload: bytes | memoryview) -> bytes:
    h = hashlib.blake2b(digest_size=_DIGEST)
    h.update(header)
    h.update(payload)
    return h.digest()


def write_frame(sock: socket.socket, header: dict[str, Any], payload: bytes = b"") -> int:
    """Send one frame; the bytes it took on the wire."""
    head = json.dumps(header, separators=(",", ":")).encode()
    prefix = _PREFIX.pack(_MAGIC, len(head), len(payload))
    sock.sendall(prefix + head)
    if payload:
        sock.sendall(payload)
    sock.sendall(_digest(head, payload))
    return len(prefix) + len(head) + len(payload) + _DIGEST


def _read_exact(sock: socket.socket, size: int, touch: Callable[[], None]) -> bytearray:
    buf = bytearray(size)
    view = memoryview(buf)
    got = 0
    while got < size:
        n = sock.recv_into(view[got:], min(size - got, 1 << 20))
        if n == 0:
            raise ConnectionError("the peer closed the connection")
        got += n
        touch()  # a long payload over a slow circuit is a sign of life, not silence
    return buf


def read_frame(
    sock: socket.socket,
    touch: Callable[[], None] = lambda: None,
    *,
    max_payload: int = _MAX_PAYLOAD,
) -> tuple[Frame, int]:
    """The next frame and the bytes it took; :class:`IntegrityError` for a frame that is not
    one of ours or whose digest does not match, ``ConnectionError`` at the end of the stream."""
    magic, head_len, payload_len = _PREFIX.unpack(_read_exact(sock, _PREFIX.size, touch))
    if magic != _MAGIC:
        raise IntegrityError(
            f"a frame starts with {bytes(magic)!r}, not {_MAGIC!r}: not a gang peer"
        )
    if head_len > MAX_HEADER or payload_len > max_payload:
        raise IntegrityError(f"a frame announces {head_len} + {payload_len} bytes: refused")
    head = bytes(_read_exact(sock, head_len, touch))
    payload = bytes(_read_exact(sock, payload_len, touch)) if payload_len else b""
    digest = bytes(_read_exact(sock, _DIGEST, touch))
    if digest != _digest(head, payload):
        raise IntegrityError("a frame's digest does not match its contents: it was corrupted")
    try:
        header = json.loads(head)
    except ValueError as exc:
        raise IntegrityError(f"a frame's header is not JSON: {exc}") from exc
    if not isinstance(header, dict) or not isinstance(header.get("kind"), str):
        raise IntegrityError("a frame's header has no kind")
    size = _PREFIX.size + head_len + payload_len + _DIGEST
    return (header, payload), size
