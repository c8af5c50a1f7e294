"""The userspace link emulator: one process per circuit, moving IP packets between two TUN
devices — one in each end's network namespace — with a one-way delay, random loss and
outages (a cut, or a flap schedule).  The rate limit is not here: ``tbf`` in front of each
TUN device is the bottleneck queue (kernels here have no netem; see ``docs/lab.md``).

Run as ``python -m onecluster.lab._emulator CONFIG.json`` by :mod:`onecluster.lab._links`.
Standard library only, single-threaded: one epoll loop holds each packet in its direction's
FIFO until ``arrival + delay`` (a constant delay keeps the FIFO in deadline order, so nothing
is reordered).  Timing: ``epoll`` sleeps whole milliseconds, so the loop sleeps until 1 ms
before a deadline and polls without sleeping for the rest, at the cost of a little CPU:
measured RTTs are within 0.15 ms of the configured ones (benchmarks/RESULTS.md).

Control: newline-delimited JSON over a Unix socket, one answer per request::

    {"op": "status"}                          → counters, state, delays, loss
    {"op": "cut"} / {"op": "heal"}            → total outage on / off
    {"op": "flap", "period_s": 5, "down_s": 1} → down for down_s at the start of every period
    {"op": "set", "delay_ms": [34, 34], "loss": [0.001, 0.0]}

The TUN devices exist only while this process holds them: when it dies they vanish from both
namespaces, so a dead emulator is a dead circuit — never a perfect one.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import random
import select
import signal
import socket
import struct
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Direction", "Emulator", "main", "open_tun"]

_IFF_TUN = 0x0001
_IFF_NO_PI = 0x1000
_TUNSETIFF = 0x400454CA
_CLONE_NEWNET = 0x40000000
#: Packets held per direction before new ones are dropped (far above rate × delay of any lab).
_MAX_QUEUE = 200_000
_READ_BATCH = 256
_SPIN_S = 0.001
_MAX_IN = 65536
_MAX_OUT = 1 << 20


def open_tun(netns: str, name: str) -> int:
    """A non-blocking TUN device ``name`` created inside the network namespace file ``netns``.

    The calling thread enters the namespace only for the ``TUNSETIFF`` call, then returns.
    Raises :class:`OSError` (with the namespace and device named) on any failure.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    own = os.open("/proc/self/ns/net", os.O_RDONLY)
    target = os.open(netns, os.O_RDONLY)
    try:
        if libc.setns(target, _CLONE_NEWNET) != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"cannot enter network namespace {netns}: {os.strerror(code)}")
        try:
            fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
            try:
                fcntl.ioctl(
                    fd, _TUNSETIFF, struct.pack("16sH", name.encode(), _IFF_TUN | _IFF_NO_PI)
                )
            except OSError as exc:
                os.close(fd)
                raise OSError(
                    exc.errno, f"cannot create TUN device {name} in {netns}: {exc}"
                ) from exc
        finally:
            if libc.setns(own, _CLONE_NEWNET) != 0:
                code = ctypes.get_errno()
                raise OSError(code, "cannot return to the emulator's own network namespace")
    finally:
        os.close(own)
        os.close(target)
    return fd


@dataclass(slots=True)
class Direction:
    """Packets read from ``src`` and written to ``dst`` after ``delay_s``; lost with ``loss``."""

    src: int
    dst: int
    delay_s: float
    loss: float
    queue: deque[tuple[float, bytes]] = field(default_factory=deque)
    received: int = 0
    forwarded: int = 0
    forwarded_bytes: int = 0
    lost: int = 0
    cut: int = 0
    overflow: int = 0
    write_errors: int = 0

    def counters(self) -> dict[str, int]:
        """The counters, for ``status``."""
        return {
            "received": self.received,
            "forwarded": self.forwarded,
            "forwarded_bytes": self.forwarded_bytes,
            "lost": self.lost,
            "cut": self.cut,
            "overflow": self.overflow,
            "write_errors": self.write_errors,
            "queued": len(self.queue),
        }


@dataclass(slots=True)
class _Client:
    """A control connection and what it has sent and is owed."""

    conn: socket.socket
    inbox: bytearray = field(default_factory=bytearray)
    outbox: bytearray = field(default_factory=bytearray)


def _number(value: object, name: str, low: float, high: float) -> float:
    """``value`` as a finite number in [low, high]; ``ValueError`` otherwise (strings too)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number")
    number = float(value)
    if not low <= number <= high:  # also false for NaN
        raise ValueError(f"{name} must be between {low:g} and {high:g} (got {value})")
    return number


def _pair(value: object, name: str, low: float, high: float) -> tuple[float, float] | None:
    """Two numbers (one per direction) or ``None`` when absent."""
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != 2:
        raise ValueError(f"{name} must be a list of two numbers, one per direction")
    return (_number(value[0], name, low, high), _number(value[1], name, low, high))


class Emulator:
    """The loop of one circuit: two directions, a control socket, an outage schedule."""

    def __init__(
        self, directions: tuple[Direction, Direction], control: socket.socket, *, seed: int
    ) -> None:
        self.directions = directions
        self._control = control
        self._random = random.Random(seed)
        self._epoll = select.epoll()
        self._by_fd = {d.src: d for d in directions}
        self._clients: dict[int, _Client] = {}
        self._cut = False
        self._flap: tuple[float, float, float] | None = None  # (start, period, down)
        self._running = True
        self._started = time.monotonic()
        for d in directions:
            self._epoll.register(d.src, select.EPOLLIN)
        control.setblocking(False)
        self._epoll.register(control.fileno(), select.EPOLLIN)

    def stop(self) -> None:
        """End the loop after the current turn (the SIGTERM handler calls it)."""
        self._running = False

    def is_down(self, now: float) -> bool:
        """Whether the circuit is out at ``now`` (cut, or in the down part of a flap)."""
        if self._cut:
            return True
        if self._flap is None:
            return False
        start, period, down = self._flap
        return (now - start) % period < down

    def run(self) -> None:
        """Forward until :meth:`stop`; a TUN device that vanishes ends the loop with an error."""
        while self._running:
            events = self._epoll.poll(self._timeout(), 64)
            now = time.monotonic()
            for fd, mask in events:
                direction = self._by_fd.get(fd)
                if direction is not None:
                    self._read(direction, now)
                elif fd == self._control.fileno():
                    self._accept()
                elif fd in self._clients:
                    self._serve(fd, mask)
            now = time.monotonic()
            for d in self.directions:
                self._flush(d, now)

    def _timeout(self) -> float:
        due = min((d.queue[0][0] for d in self.directions if d.queue), default=None)
        if due is None:
            return 0.5 if self._flap is None else 0.01
        wait = due - time.monotonic()
        if wait <= _SPIN_S:
            return 0.0
        return wait - _SPIN_S

    def _read(self, d: Direction, now: float) -> None:
        down = self.is_down(now)
        for _ in range(_READ_BATCH):
            try:
                packet = os.read(d.src, 65536)
            except BlockingIOError:
                return
            d.received += 1
            if down:
                d.cut += 1
            elif d.loss and self._random.random() < d.loss:
                d.lost += 1
            elif len(d.queue) >= _MAX_QUEUE:
                d.overflow += 1
            else:
                d.queue.append((now + d.delay_s, packet))

    def _flush(self, d: Direction, now: float) -> None:
        queue = d.queue
        while queue and queue[0][0] <= now:
            packet = queue[0][1]
            try:
                os.write(d.dst, packet)
            except BlockingIOError:
                return  # the device's queue is full: retry on the next turn
            except OSError as exc:
                if exc.errno in (errno.EIO, errno.EINVAL, errno.EMSGSIZE):
                    d.write_errors += 1  # the far end is down or refused this one packet
                else:
                    raise
            else:
                d.forwarded += 1
                d.forwarded_bytes += len(packet)
            queue.popleft()

    # -- control ------------------------------------------------------------------------------

    def _accept(self) -> None:
        try:
            conn, _ = self._control.accept()
        except BlockingIOError:
            return
        conn.setblocking(False)
        self._clients[conn.fileno()] = _Client(conn)
        self._epoll.register(conn.fileno(), select.EPOLLIN)

    def _drop(self, fd: int) -> None:
        client = self._clients.pop(fd)
        self._epoll.unregister(fd)
        client.conn.close()

    def _serve(self, fd: int, mask: int) -> None:
        """Read requests, answer them; never block (a client that does not read its answers
        is dropped once they pile up past ``_MAX_OUT``)."""
        client = self._clients[fd]
        if mask & select.EPOLLIN:
            try:
                data = client.conn.recv(65536)
            except BlockingIOError:
                data = None
            except OSError:
                data = b""
            if data == b"" or len(client.inbox) > _MAX_IN:
                self._drop(fd)
                return
            client.inbox += data or b""
            while b"\n" in client.inbox:
                line, _, rest = bytes(client.inbox).partition(b"\n")
                client.inbox[:] = rest
                client.outbox += json.dumps(self.handle(line)).encode() + b"\n"
        if client.outbox:
            try:
                sent = client.conn.send(client.outbox)
            except BlockingIOError:
                sent = 0
            except OSError:
                self._drop(fd)
                return
            del client.outbox[:sent]
        if len(client.outbox) > _MAX_OUT:
            self._drop(fd)
            return
        wanted = select.EPOLLIN | (select.EPOLLOUT if client.outbox else 0)
        self._epoll.modify(fd, wanted)

    def handle(self, line: bytes) -> dict[str, Any]:
        """Carry out one control request; a bad one gets ``{"ok": false, "error": …}`` and
        changes nothing."""
        try:
            request = json.loads(line)
            if not isinstance(request, dict):
                raise TypeError("a request is a JSON object")
            op = request.get("op")
            if op == "cut":
                self._cut = True
            elif op == "heal":
                self._cut = False
                self._flap = None
            elif op == "flap":
                period = _number(request.get("period_s"), "period_s", 0.01, 3600.0)
                down = _number(request.get("down_s"), "down_s", 0.001, 3600.0)
                if not down < period:
                    raise ValueError("flap needs 0 < down_s < period_s")
                self._cut = False
                self._flap = (time.monotonic(), period, down)
            elif op == "set":
                self._set(request)
            elif op != "status":
                raise ValueError(f"unknown op {op!r}")
        except Exception as exc:  # noqa: BLE001 - no request may stop the circuit's packets
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]}
        return {"ok": True, **self.status()}

    def _set(self, request: dict[str, Any]) -> None:
        """New delays and/or losses, all checked before any is applied."""
        delays = _pair(request.get("delay_ms"), "delay_ms", 0.0, 10_000.0)
        losses = _pair(request.get("loss"), "loss", 0.0, 0.999999)
        for i, d in enumerate(self.directions):
            if delays is not None:
                d.delay_s = delays[i] / 1000
            if losses is not None:
                d.loss = losses[i]

    def status(self) -> dict[str, Any]:
        """State and counters of both directions."""
        now = time.monotonic()
        state = "cut" if self._cut else "flapping" if self._flap else "up"
        usage = os.times()
        return {
            "pid": os.getpid(),
            "state": state,
            "down_now": self.is_down(now),
            "uptime_s": now - self._started,
            "cpu_s": usage.user + usage.system,
            "delay_ms": [d.delay_s * 1000 for d in self.directions],
            "loss": [d.loss for d in self.directions],
            "directions": [d.counters() for d in self.directions],
        }


def main(argv: list[str] | None = None) -> int:
    """Read the config file named in ``argv``, create both TUN devices, run until SIGTERM."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m onecluster.lab._emulator CONFIG.json", file=sys.stderr)  # noqa: T201
        return 2
    config = json.loads(Path(args[0]).read_text())
    ends = config["ends"]
    fds = [open_tun(end["netns"], end["device"]) for end in ends]
    delays = config["delay_ms"]
    losses = config["loss"]
    directions = (
        Direction(src=fds[0], dst=fds[1], delay_s=delays[0] / 1000, loss=losses[0]),
        Direction(src=fds[1], dst=fds[0], delay_s=delays[1] / 1000, loss=losses[1]),
    )
    path = Path(config["control"])
    path.unlink(missing_ok=True)
    control = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    control.bind(str(path))
    control.listen(8)
    emulator = Emulator(directions, control, seed=int(config.get("seed", 0)))
    signal.signal(signal.SIGTERM, lambda *_: emulator.stop())
    signal.signal(signal.SIGINT, lambda *_: emulator.stop())
    try:
        emulator.run()
    finally:
        control.close()
        path.unlink(missing_ok=True)
        for fd in fds:
            os.close(fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
