"""Active probes of every circuit of a site, several times a second.

One UDP socket per circuit, bound to the site's own address on that circuit, is both the
reflector peers probe and the sender of this site's probes to the peer's socket — so a probe
crosses exactly that circuit (its address is on the circuit's point-to-point device), never a
rerouted path.  One thread owns every socket.

A probe not answered within its timeout is lost.  The timeout adapts to the circuit: three
times its minimum RTT, at least that RTT plus 100 ms, between 50 ms and 1 s (1 s until the
first reply), so queueing under load is not mistaken for loss; a reply that comes after its
timeout stretches the timeout to 1.5 × its RTT for a window, so a path that suddenly got
longer costs the probes in flight when it changed, not a false outage.  Outcomes are finished in
sequence order — a lost probe holds back those sent after it until its timeout — so the
server receives one ordered stream per circuit (:meth:`Prober.pending`).

Failures never stop the probes: a send that fails (no route, device gone) is a lost probe; a
packet that is not a probe is counted and ignored; a reply that comes after its timeout is
counted as late and stays lost.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from onecluster.errors import BackendError, ValidationError
from onecluster.telemetry._window import LinkFigures, Outcome, ProbeWindow
from onecluster.telemetry._wire import Packet, decode, encode

__all__ = ["DEFAULT_PROBE_PORT", "CircuitSnapshot", "PeerEndpoint", "Prober"]

#: The UDP port of every site's probe sockets unless configured otherwise: in IANA's
#: dynamic/private range (no assignment to collide with, unlike e.g. 4791, RoCEv2's) and
#: above Linux's default ephemeral ports (32768–60999), so no client socket holds it.
DEFAULT_PROBE_PORT = 61862

_log = logging.getLogger("onecluster.probes")

#: Outcomes kept for the server while it cannot be reached (≈ a minute at 10 probes/s).
_MAX_PENDING = 600
#: A circuit this many losses in a row into silence wants an early report.
_ATTENTION_LOSSES = 3
#: ... for this long into the silence (after that the outage is old news);
_ATTENTION_SILENCE_S = 5.0
#: ... and so does one that answered again within this many seconds.
_ATTENTION_RECOVERY_S = 2.0


@dataclass(frozen=True, slots=True)
class PeerEndpoint:
    """The far end of a circuit: its site and the address of its probe socket."""

    site: str
    host: str
    port: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CircuitSnapshot:
    """What the prober knows of one circuit now."""

    circuit: str
    local: str
    peer: PeerEndpoint | None
    sent: int
    received: int
    lost: int
    late: int
    send_errors: int
    rtt_sum_s: float
    bucket_counts: tuple[int, ...]
    figures: LinkFigures
    silent_s: float | None


class _Circuit:
    """The probe state of one circuit (owned by the prober's thread, read under its lock)."""

    def __init__(self, name: str, sock: socket.socket, window_s: float, now: float) -> None:
        self.name = name
        self.sock = sock
        self.peer: PeerEndpoint | None = None
        self.window = ProbeWindow(window_s)
        self.next_seq = 0
        self.next_send = now
        self.inflight: deque[int] = deque()  # seqs in send order, not yet finished
        self.sent_at: dict[int, float] = {}
        self.rtts: dict[int, float | None] = {}  # finished out of order, awaiting the head
        self.pending: deque[Outcome] = deque(maxlen=_MAX_PENDING)
        self.late = 0
        self.send_errors = 0
        self.last_reply: float | None = None
        self.recovered_at: float | None = None
        self.expired: dict[int, float] = {}  # seq → send time of probes declared lost
        self.late_rtt: float | None = None
        self.late_at = float("-inf")

    def timeout_s(self, now: float) -> float:
        floor = self.window.rtt_floor()
        if floor is None:
            return 1.0
        timeout = max(3 * floor, floor + 0.1, 0.05)
        if self.late_rtt is not None and now - self.late_at < self.window.window_s:
            # replies come later than the window's floor suggests (the path got longer, say
            # after a protection switch): wait for them rather than count them all lost
            timeout = max(timeout, 1.5 * self.late_rtt)
        return min(timeout, 1.0)


class Prober:
    """Probes each circuit in ``local`` (circuit → this site's address on it) every
    ``interval_s`` seconds once its peer is known (:meth:`set_peers`).

    Sockets are bound at construction, so a bad address fails at once with
    :class:`BackendError`.  ``port`` is fixed by default (:data:`DEFAULT_PROBE_PORT`), so a
    restarted agent answers its peers' probes where they already send them; 0 takes any free
    port (:meth:`endpoints` says which).  :meth:`start` runs the
    probe thread; :meth:`close` stops it and closes the sockets.  All methods are thread-safe.
    """

    def __init__(
        self,
        local: Mapping[str, str],
        *,
        port: int = DEFAULT_PROBE_PORT,
        interval_s: float = 0.1,
        window_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        wall_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        if not 0.001 <= interval_s <= 10:
            msg = f"the probe interval must be between 1 ms and 10 s (got {interval_s} s)"
            raise ValidationError(msg)
        self._clock = clock
        self._wall_ns = wall_ns
        self._interval = interval_s
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._selector = selectors.DefaultSelector()
        self._circuits: dict[str, _Circuit] = {}
        self.unknown_packets = 0
        now = clock()
        try:
            for name, address in local.items():
                sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                self._circuits[name] = _Circuit(name, sock, window_s, now)
                sock.setblocking(False)
                sock.bind((address, port))
                self._selector.register(sock, selectors.EVENT_READ, name)
        except OSError as exc:
            self.close()
            msg = f"cannot open the probe socket of circuit {name} on {address}:{port}: {exc}"
            raise BackendError(msg, hint="is that address configured on this host?") from exc

    # -- configuration ----------------------------------------------------------------------

    def endpoints(self) -> dict[str, str]:
        """``host:port`` of this site's probe socket on each circuit."""
        found = {}
        for name, c in self._circuits.items():
            host, port = c.sock.getsockname()[:2]
            found[name] = f"{host}:{port}"
        return found

    def set_peers(self, peers: Mapping[str, PeerEndpoint]) -> None:
        """Where each circuit's far end listens; circuits not named are not probed."""
        with self._lock:
            for name, c in self._circuits.items():
                c.peer = peers.get(name)

    # -- reading ----------------------------------------------------------------------------

    def clock(self) -> float:
        """The clock the probes' send times are on."""
        return self._clock()

    def snapshot(self) -> list[CircuitSnapshot]:
        """Every circuit's counters and window figures."""
        now = self._clock()
        local = self.endpoints()
        with self._lock:
            return [
                CircuitSnapshot(
                    circuit=c.name,
                    local=local[c.name],
                    peer=c.peer,
                    sent=c.window.sent,
                    received=c.window.received,
                    lost=c.window.lost,
                    late=c.late,
                    send_errors=c.send_errors,
                    rtt_sum_s=c.window.rtt_sum_s,
                    bucket_counts=tuple(c.window.bucket_counts),
                    figures=c.window.figures(),
                    silent_s=None if c.last_reply is None else now - c.last_reply,
                )
                for c in self._circuits.values()
            ]

    def pending(self) -> dict[str, list[Outcome]]:
        """Finished outcomes not yet acknowledged, per circuit, oldest first."""
        with self._lock:
            return {name: list(c.pending) for name, c in self._circuits.items()}

    def acknowledge(self, upto: Mapping[str, int]) -> None:
        """Forget the pending outcomes up to and including sequence ``upto[circuit]``."""
        with self._lock:
            for name, seq in upto.items():
                pending = self._circuits[name].pending
                while pending and pending[0].seq <= seq:
                    pending.popleft()

    def attention(self) -> bool:
        """Whether a circuit just fell silent or just answered again (report it early)."""
        now = self._clock()
        with self._lock:
            for c in self._circuits.values():
                silent = c.last_reply is not None and now - c.last_reply < _ATTENTION_SILENCE_S
                if silent and c.window.consecutive_losses() >= _ATTENTION_LOSSES:
                    return True
                if c.recovered_at is not None and now - c.recovered_at < _ATTENTION_RECOVERY_S:
                    return True
        return False

    # -- the thread -------------------------------------------------------------------------

    def start(self) -> None:
        """Start probing in a daemon thread (idempotent)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="probes", daemon=True)
            self._thread.start()

    def close(self) -> None:
        """Stop the thread and close every socket; idempotent."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        for c in self._circuits.values():
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(c.sock)
            c.sock.close()
        self._selector.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._turn()
            except Exception:  # noqa: BLE001 - probing must outlive a bug in one turn
                _log.exception("a probe turn failed; continuing")
                self._stop.wait(self._interval)

    def _turn(self) -> None:
        """Send what is due, wait for packets until the next deadline, expire timeouts."""
        now = self._clock()
        with self._lock:
            wake = now + self._interval
            for c in self._circuits.values():
                if c.peer is not None and now >= c.next_send:
                    self._send(c, now)
                if c.peer is not None:
                    wake = min(wake, c.next_send)
                if c.inflight:
                    wake = min(wake, c.sent_at[c.inflight[0]] + c.timeout_s(now))
        for key, _ in self._selector.select(max(wake - self._clock(), 0.0)):
            self._receive(key.fileobj, str(key.data))  # type: ignore[arg-type]
        now = self._clock()
        with self._lock:
            for c in self._circuits.values():
                self._expire(c, now)

    def _send(self, c: _Circuit, now: float) -> None:
        assert c.peer is not None
        seq = c.next_seq
        c.next_seq += 1
        c.next_send = max(c.next_send + self._interval, now)
        c.inflight.append(seq)
        c.sent_at[seq] = now
        try:
            c.sock.sendto(encode(Packet("probe", seq, self._wall_ns())), (c.peer.host, c.peer.port))
        except (OSError, OverflowError, ValueError):
            c.send_errors += 1  # it counts as lost when its timeout passes

    def _receive(self, sock: socket.socket, name: str) -> None:
        for _ in range(64):
            try:
                data, sender = sock.recvfrom(2048)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return  # e.g. an ICMP error queued on the socket
            packet = decode(data)
            if packet is None:
                self.unknown_packets += 1
            elif packet.kind == "probe":
                reply = Packet("reply", packet.seq, packet.sent_ns, self._wall_ns())
                with contextlib.suppress(OSError):
                    sock.sendto(encode(reply), sender)
            else:
                with self._lock:
                    self._answered(self._circuits[name], packet)

    def _answered(self, c: _Circuit, packet: Packet) -> None:
        now = self._clock()
        if packet.seq in c.expired:  # after its timeout: it stays lost, but says how late
            c.late += 1
            c.late_rtt, c.late_at = now - c.expired.pop(packet.seq), now
            return
        sent = c.sent_at.get(packet.seq)
        if sent is None or packet.seq in c.rtts:
            c.late += 1  # a duplicate, or a reply to a probe long forgotten
            return
        c.rtts[packet.seq] = now - sent
        c.window.transit(packet.sent_ns, packet.reflected_ns)
        if c.window.consecutive_losses() >= _ATTENTION_LOSSES:
            c.recovered_at = now  # it answers again after a silence
        c.last_reply = now
        self._finish(c)

    def _expire(self, c: _Circuit, now: float) -> None:
        timeout = c.timeout_s(now)
        for seq in c.inflight:
            if seq not in c.rtts and now - c.sent_at[seq] >= timeout:
                c.rtts[seq] = None
                c.expired[seq] = c.sent_at[seq]
        while len(c.expired) > 256:
            del c.expired[next(iter(c.expired))]
        self._finish(c)

    def _finish(self, c: _Circuit) -> None:
        """Move finished probes at the head of the in-flight queue into the window."""
        while c.inflight and c.inflight[0] in c.rtts:
            seq = c.inflight.popleft()
            outcome = Outcome(seq=seq, sent_at=c.sent_at.pop(seq), rtt_s=c.rtts.pop(seq))
            c.window.add(outcome)
            c.pending.append(outcome)
