"""The data plane's wire format between agents (version 1).

A connection opens with a **hello**: ``OCDP``, the version, the kind (``FETCH``: pull chunks
of one transfer from this agent; ``RELAY``: connect onwards and splice), and a small JSON
header carrying the transfer's id and ticket.  The answer is one status byte and a message.

A fetch session then carries requests, which the client may pipeline:

- ``M``: the version's manifest → ``u64 length`` + the zstd-compressed manifest;
- ``C`` + ``u32 n`` + *n* digests → *n* frames in the order asked, each ``digest, u8 codec,
  u32 raw length, u32 wire length`` + payload; codec ``RAW``, ``ZSTD``, or ``ERROR`` (the
  payload is the reason: the chunk cannot be served, e.g. its file changed at the source).

The receiver checks every chunk against its digest; nothing on the wire is trusted.
"""

from __future__ import annotations

import json
import socket
import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from onecluster.errors import IntegrityError
from onecluster.transfer import DIGEST_SIZE

__all__ = [
    "CHUNKS",
    "COUNT",
    "LENGTH",
    "MANIFEST",
    "MAX_BATCH",
    "Codec",
    "Frame",
    "Kind",
    "ProtocolError",
    "frame_head",
    "hello_bytes",
    "read_exact",
    "read_frame",
    "read_hello",
    "read_status",
    "request_chunks",
    "write_hello",
    "write_status",
]

MAGIC = b"OCDP"
VERSION = 1
_HELLO = struct.Struct(">4sBBI")
_STATUS = struct.Struct(">BI")
_FRAME = struct.Struct(f">{DIGEST_SIZE}sBII")
#: Most digests in one request; largest hello header and status message.
MAX_BATCH = 4096
_MAX_HEADER = 64 * 1024
_MAX_MESSAGE = 4096
#: Largest chunk payload a frame may announce (format 1's chunks are at most 4 MiB).
MAX_PAYLOAD = 8 * 1024 * 1024

MANIFEST = b"M"
CHUNKS = b"C"
COUNT = struct.Struct(">I")
LENGTH = struct.Struct(">Q")


class Kind(IntEnum):
    FETCH = 1
    RELAY = 2


class Codec(IntEnum):
    RAW = 0
    ZSTD = 1
    ERROR = 2


class ProtocolError(IntegrityError):
    """The peer does not speak this protocol, or broke it."""


@dataclass(frozen=True, slots=True)
class Frame:
    digest: bytes
    codec: Codec
    raw_size: int
    payload: bytes


def read_exact(sock: socket.socket, n: int) -> bytes:
    """``n`` bytes, or :class:`ConnectionError` when the peer closes first."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ConnectionError("the peer closed the connection")
        got += k
    return bytes(buf)


def hello_bytes(kind: Kind, header: dict[str, Any]) -> bytes:
    body = json.dumps(header, separators=(",", ":")).encode()
    return _HELLO.pack(MAGIC, VERSION, kind, len(body)) + body


def write_hello(sock: socket.socket, kind: Kind, header: dict[str, Any]) -> None:
    sock.sendall(hello_bytes(kind, header))


def read_hello(sock: socket.socket) -> tuple[Kind, dict[str, Any]]:
    """The hello of a new connection; :class:`ProtocolError` if it is none."""
    magic, version, raw_kind, size = _HELLO.unpack(read_exact(sock, _HELLO.size))
    if magic != MAGIC:
        raise ProtocolError("the peer does not speak the onecluster data protocol")
    if version != VERSION:
        msg = f"the peer speaks data protocol {version}; this agent speaks {VERSION}"
        raise ProtocolError(msg)
    if size > _MAX_HEADER:
        raise ProtocolError(f"a hello header of {size} bytes is too large")
    try:
        kind = Kind(raw_kind)
        header = json.loads(read_exact(sock, size))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError("the hello is malformed") from exc
    if not isinstance(header, dict):
        raise ProtocolError("the hello header is not an object")
    return kind, header


def write_status(sock: socket.socket, ok: bool, message: str = "") -> None:
    body = message.encode()[:_MAX_MESSAGE]
    sock.sendall(_STATUS.pack(0 if ok else 1, len(body)) + body)


def read_status(sock: socket.socket) -> tuple[bool, str]:
    code, size = _STATUS.unpack(read_exact(sock, _STATUS.size))
    if size > _MAX_MESSAGE:
        raise ProtocolError("the peer's status message is too long")
    return code == 0, read_exact(sock, size).decode(errors="replace")


def frame_head(chunk: bytes, codec: Codec, raw_size: int, wire_size: int) -> bytes:
    return _FRAME.pack(chunk, codec, raw_size, wire_size)


def read_frame(sock: socket.socket) -> Frame:
    chunk, raw_codec, raw_size, wire_size = _FRAME.unpack(read_exact(sock, _FRAME.size))
    if wire_size > MAX_PAYLOAD or raw_size > MAX_PAYLOAD:
        raise ProtocolError(f"a frame announces {max(wire_size, raw_size)} bytes, over the limit")
    try:
        codec = Codec(raw_codec)
    except ValueError as exc:
        raise ProtocolError(f"a frame has an unknown codec {raw_codec}") from exc
    return Frame(chunk, codec, raw_size, read_exact(sock, wire_size))


def request_chunks(digests: list[bytes]) -> bytes:
    return CHUNKS + COUNT.pack(len(digests)) + b"".join(digests)
