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

Two readers.  The server gets the outcomes (:meth:`Prober.pending`): every probe's, or — with
``report_interval_s`` longer than the probe interval — one probe's in every
``report_interval_s``, picked by sequence number, so that probing faster for the site's own
use does not multiply what the server receives and judges.  The site's fast reroute gets
every reply as it is read (:meth:`Prober.liveness`), with how long the circuit was *proven*
silent before it: a turn that read nothing from a circuit proves that no reply reached its
socket before the turn began, however late the thread ran, so a stalled prober thread is
never mistaken for a silent circuit.

Failures never stop the probes: a send that fails (no route, device gone) is a lost probe; a
packet that is not a probe is counted and ignored; a reply that comes after its timeout is
counted as late and stays lost (for the liveness reader it still proves the circuit works).
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

__all__ = ["DEFAULT_PROBE_PORT", "CircuitSnapshot", "Heard", "Liveness", "PeerEndpoint", "Prober"]

#: The UDP port of every site's probe sockets unless configured otherwise: in IANA's
#: dynamic/private range (no assignment to collide with, unlike e.g. 4791, RoCEv2's) and
#: above Linux's default ephemeral ports (32768–60999), so no client socket holds it.
DEFAULT_PROBE_PORT = 61862

_log = logging.getLogger("onecluster.probes")

#: Outcomes kept for the server while it cannot be reached (≈ a minute at 10 reported
#: probes/s).
_MAX_PENDING = 600
#: A circuit this many losses in a row into silence wants an early report.
_ATTENTION_LOSSES = 3
#: ... for this long into the silence (after that the outage is old news);
_ATTENTION_SILENCE_S = 5.0
#: ... and so does one that answered again within this many seconds.
_ATTENTION_RECOVERY_S = 2.0
#: Replies kept per circuit for the liveness reader (bounded when nobody reads them).
_MAX_HEARD = 1024


@dataclass(frozen=True, slots=True)
class PeerEndpoint:
    """The far end of a circuit: its site and the address of its probe socket."""

    site: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class Heard:
    """One reply, read at ``at`` (the prober's clock); before it the circuit had been proven
    silent for ``quiet_s`` (0 when a reply came in the turn before)."""

    at: float
    quiet_s: float
    rtt_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Liveness:
    """The replies read since the last :meth:`Prober.liveness`, per circuit, oldest first.

    ``until``: every reply that reached a socket before this instant is in ``heard`` or was in
    an earlier reading — so a circuit whose newest reply is older than ``until`` was silent
    from that reply to ``until``.  ``probing``: the circuits being probed (their far end is
    known); silence of any other means nothing.
    """

    until: float
    heard: Mapping[str, tuple[Heard, ...]]
    probing: frozenset[str]


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
        self.heard: deque[Heard] = deque(maxlen=_MAX_HEARD)
        self.last_heard: float | None = None  # when the newest reply was read

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
    ``interval_s`` seconds once its peer is known (:meth:`set_peers`).  The server is given
    one outcome per ``report_interval_s`` (default: every outcome; see the module docstring).

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
        report_interval_s: float | None = None,
        window_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        wall_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        if not 0.001 <= interval_s <= 10:
            msg = f"the probe interval must be between 1 ms and 10 s (got {interval_s} s)"
            raise ValidationError(msg)
        report = interval_s if report_interval_s is None else report_interval_s
        if not interval_s <= report <= 10:
            msg = (
                f"probes are reported every {report} s, which must be between the probe "
                f"interval ({interval_s} s) and 10 s"
            )
            raise ValidationError(msg)
        self._clock = clock
        self._wall_ns = wall_ns
        self._interval = interval_s
        #: one outcome in this many is kept for the server
        self._report_every = max(round(report / interval_s), 1)
        self._lock = threading.Lock()
        self._turned = threading.Condition(self._lock)
        self._turns = 0
        # when the select of the latest finished turn began: every reply that reached a
        # socket before then has been read
        self._covered: float | None = None
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

    @property
    def interval_s(self) -> float:
        """Seconds between two probes of a circuit."""
        return self._interval

    def liveness(self, *, wait_s: float = 0.0) -> Liveness:
        """The replies read since the last call, per circuit (see :class:`Liveness`); waits up
        to ``wait_s`` for the probe thread to finish a turn first.  For one reader: a reply
        is handed out once."""
        with self._turned:
            if wait_s > 0:
                seen = self._turns
                self._turned.wait_for(lambda: self._turns != seen, timeout=wait_s)
            heard = {}
            for name, c in self._circuits.items():
                heard[name] = tuple(c.heard)
                c.heard.clear()
            until = self._covered if self._covered is not None else float("-inf")
            probing = frozenset(name for name, c in self._circuits.items() if c.peer is not None)
        return Liveness(until=until, heard=heard, probing=probing)

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
        polled = self._clock()
        for key, _ in self._selector.select(max(wake - polled, 0.0)):
            self._receive(key.fileobj, str(key.data))  # type: ignore[arg-type]
        now = self._clock()
        with self._lock:
            for c in self._circuits.values():
                self._expire(c, now)
            self._covered = polled
            self._turns += 1
            self._turned.notify_all()

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
            self._heard(c, now, c.late_rtt)
            return
        sent = c.sent_at.get(packet.seq)
        if sent is None or packet.seq in c.rtts:
            c.late += 1  # a duplicate, or a reply to a probe long forgotten
            return
        c.rtts[packet.seq] = now - sent
        self._heard(c, now, now - sent)
        c.window.transit(packet.sent_ns, packet.reflected_ns)
        if c.window.consecutive_losses() >= _ATTENTION_LOSSES:
            c.recovered_at = now  # it answers again after a silence
        c.last_reply = now
        self._finish(c)

    def _heard(self, c: _Circuit, now: float, rtt_s: float) -> None:
        """Note a reply for the liveness reader.  The circuit was proven silent from the
        reply before it until the previous turn's select began (``_covered``: had a reply
        reached the socket before that, the previous turn would have read it)."""
        quiet = 0.0
        if c.last_heard is not None and self._covered is not None:
            quiet = max(self._covered - c.last_heard, 0.0)
        c.heard.append(Heard(at=now, quiet_s=quiet, rtt_s=rtt_s))
        c.last_heard = now

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
            if seq % self._report_every == 0:
                c.pending.append(outcome)
