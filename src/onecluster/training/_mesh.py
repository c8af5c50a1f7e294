"""The connections of one worker to its counterparts at the other sites of the gang.

Worker *i* of every site takes part in one mesh: a TCP connection per pair of sites (the
higher-ranked site dials, and dials again after a loss) for updates, results and states,
a UDP heartbeat each way every ``heartbeat_s`` on the same port number, and an inbox of what
the peers sent.  A peer is *lost* when its connection closes (a killed process: at once) or
when neither its heartbeats nor its connection have said anything for ``peer_timeout_s`` (a
cut circuit); a silent connection is then closed, so that a peer that comes back always
says hello again.  A shorter silence (a flap) changes nothing.  Heartbeats travel as UDP so
that TCP's retransmission back-off after an outage (the next try can come seconds after the
circuit is back) never turns a short flap into a loss.

Each hello carries the config digest (a peer with another model or sync config is refused
with an error on both sides) and the sender's lineage: which outer steps it has applied.
When two sites meet again with different lineages, the one that merged fewer tokens heals
from the other (``heal_from``).  Threads are daemon threads owned by the mesh; :meth:`close`
ends them.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from onecluster.errors import IntegrityError, PlatformError, UnavailableError, ValidationError
from onecluster.training._config import SyncConfig
from onecluster.training._topology import Topology
from onecluster.training._wire import read_frame, write_frame

__all__ = ["GENESIS", "Lineage", "Mesh", "MeshStats", "Message"]

_log = logging.getLogger("onecluster.training")
GENESIS = "genesis"
_SYNC_KINDS = frozenset({"contrib", "result"})
_PULSE = b"OCH1"

#: One message from a peer: (site rank, header, payload).
Message = tuple[int, dict[str, Any], bytes]


@dataclass(frozen=True)
class Lineage:
    """Which outer steps a site has applied: ``id`` chains every applied result, ``history``
    holds the ids before it (so a site one step ahead is still the same line), ``weight`` the
    tokens merged, ``step`` the steps applied; ``joining`` while it waits to be healed."""

    id: str = GENESIS
    history: tuple[str, ...] = ()
    weight: float = 0.0
    step: int = 0
    joining: bool = False
    #: The first round it takes part in (the round it healed to; 0 from the start).
    since: int = 0

    def same_line(self, other: Lineage) -> bool:
        return self.id == other.id or self.id in other.history or other.id in self.history

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "history": list(self.history),
            "weight": self.weight,
            "step": self.step,
            "joining": self.joining,
            "since": self.since,
        }

    @classmethod
    def from_json(cls, data: Any) -> Lineage:
        if not isinstance(data, dict):
            raise IntegrityError("a peer's lineage is not an object")
        try:
            return cls(
                str(data["id"]),
                tuple(str(h) for h in data["history"]),
                float(data["weight"]),
                int(data["step"]),
                bool(data["joining"]),
                int(data.get("since", 0)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise IntegrityError(f"a peer's lineage is malformed: {exc}") from exc


@dataclass(frozen=True)
class MeshStats:
    """Bytes this worker moved to and from other sites: ``sent``/``received`` count every
    frame (heartbeats too), ``sync_*`` only the payloads of updates and results, ``heal_*``
    only those of states sent to or taken from healing sites.  ``lost``: how often each peer
    site was lost (by name); ``rejoined``: how often one came back after that."""

    sent: int
    received: int
    sync_sent: int
    sync_received: int
    heal_sent: int
    heal_received: int
    lost: Mapping[str, int] = field(default_factory=dict)
    rejoined: Mapping[str, int] = field(default_factory=dict)


@dataclass
class _Conn:
    rank: int
    sock: socket.socket
    peer: Lineage  # what the peer said last
    last_seen: float
    send_lock: threading.Lock = field(default_factory=threading.Lock)
    joined: str | None = None  # the line we sent it our state at; older "joining" beats lag
    open: bool = True


class Mesh:
    """See the module docstring.  ``clock`` is monotonic seconds (injectable for tests)."""

    def __init__(
        self,
        topology: Topology,
        config: SyncConfig,
        digest: str,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.topology = topology
        self.config = config
        self.digest = digest
        self._clock = clock
        self._cv = threading.Condition()
        self._conns: dict[int, _Conn] = {}
        self._inbox: list[Message] = []
        self._lineage = Lineage(joining=True)  # a fresh process holds nothing yet
        self._fatal: PlatformError | None = None
        self._heal_from: int | None = None
        self._closed = threading.Event()
        self._threads: list[threading.Thread] = []
        self._listener: socket.socket | None = None
        self._udp: socket.socket | None = None
        self._heard: dict[int, float] = {}  # site rank → when its last heartbeat came
        self._sent = self._received = self._sync_sent = self._sync_received = 0
        self._heal_sent = self._heal_received = 0
        self._lost: Counter[int] = Counter()  # site rank → times lost
        self._rejoined: Counter[int] = Counter()  # site rank → times back after a loss

    # -- life -------------------------------------------------------------------------------

    def start(self) -> None:
        """Listen, dial the lower-ranked sites and start heartbeats; a
        :class:`ValidationError` when this worker's port cannot be bound."""
        topo = self.topology
        address, port = topo.address(topo.site_rank), topo.port(topo.site_rank)
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind((address, port))
        except OSError as exc:
            listener.close()
            msg = f"cannot listen on {address}:{port} for the other sites: {exc.strerror}"
            raise ValidationError(msg, hint="another run of this job may still hold it") from exc
        listener.listen(16)
        listener.settimeout(0.2)
        self._listener = listener
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            udp.bind((address, port))
        except OSError as exc:
            udp.close()
            listener.close()
            msg = f"cannot take heartbeats on {address}:{port}/udp: {exc.strerror}"
            raise ValidationError(msg, hint="another run of this job may still hold it") from exc
        udp.settimeout(0.2)
        self._udp = udp
        self._spawn(self._accept_loop, "accept")
        for rank in range(topo.site_rank):
            self._spawn(functools.partial(self._dial_loop, rank), f"dial-{topo.sites[rank]}")
        self._spawn(self._beat_loop, "heartbeat")
        self._spawn(self._pulse_loop, "pulse")
        self._spawn(self._hear_loop, "hear")

    def close(self) -> None:
        """End every connection and thread (idempotent)."""
        self._closed.set()
        with self._cv:
            conns = list(self._conns.values())
            self._cv.notify_all()
        for conn in conns:
            self._drop(conn, None)
        if self._listener is not None:
            self._listener.close()
        for t in self._threads:
            t.join(timeout=2)
        if self._udp is not None:
            self._udp.close()

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        t = threading.Thread(target=target, name=f"oc-mesh-{name}", daemon=True)
        self._threads.append(t)
        t.start()

    # -- what the exchange uses -------------------------------------------------------------

    def check(self) -> None:
        """Raise the error that ended the mesh (a refused peer, a corrupt frame), if any."""
        if self._fatal is not None:
            raise self._fatal

    @property
    def lineage(self) -> Lineage:
        return self._lineage

    def set_lineage(self, lineage: Lineage) -> None:
        """What this worker has applied; told to peers with every heartbeat, and at once
        when it joins or leaves the rounds (so that every peer counts it before it sends a
        part of a round: frames on a connection arrive in order)."""
        with self._cv:
            changed = lineage.joining != self._lineage.joining
            self._lineage = lineage
            conns = [c.rank for c in self._conns.values() if c.open] if changed else []
        for rank in conns:
            self.send(rank, {"kind": "beat", "lineage": lineage.to_json()})

    def take_heal_from(self) -> int | None:
        """The site this worker must heal from (a peer met with a heavier lineage), once."""
        with self._cv:
            rank, self._heal_from = self._heal_from, None
            return rank

    def mark_joined(self, rank: int, lineage: Lineage) -> None:
        """Count a peer this worker just sent its state (at ``lineage``) to as a member from
        the next round on (its own heartbeat saying so may come later than that round's
        start); its heartbeats still saying "joining" on an older line are ignored."""
        with self._cv:
            conn = self._conns.get(rank)
            if conn is not None:
                conn.peer = Lineage(
                    lineage.id, lineage.history, lineage.weight, lineage.step, since=lineage.step
                )
                conn.joined = lineage.id

    def alive(self, rank: int) -> bool:
        with self._cv:
            return self._alive(rank)

    def _alive(self, rank: int) -> bool:
        conn = self._conns.get(rank)
        return conn is not None and conn.open

    def peer(self, rank: int) -> Lineage | None:
        """What a live peer said of itself last; ``None`` for a lost one."""
        with self._cv:
            conn = self._conns.get(rank)
            return conn.peer if conn is not None and conn.open else None

    def live_ranks(self) -> list[int]:
        """The live sites, this one included, by rank."""
        with self._cv:
            me = self.topology.site_rank
            return sorted([me, *(r for r in self._conns if self._alive(r))])

    def send(self, rank: int, header: dict[str, Any], payload: bytes = b"") -> bool:
        """Send to a live peer; ``False`` (and the peer is lost) when that fails."""
        with self._cv:
            conn = self._conns.get(rank)
        if conn is None or not conn.open:
            return False
        try:
            with conn.send_lock:
                size = write_frame(conn.sock, header, payload)
        except OSError as exc:
            self._drop(conn, f"sending failed: {exc}")
            return False
        with self._cv:
            self._sent += size
            if header["kind"] in _SYNC_KINDS:
                self._sync_sent += len(payload)
            elif header["kind"] == "state":
                self._heal_sent += len(payload)
        return True

    def take(
        self,
        match: Callable[[Message], bool],
        deadline: float,
        give_up: Callable[[], bool] = lambda: False,
    ) -> Message | None:
        """The first inbox message ``match`` accepts, waiting until ``deadline`` (monotonic)
        or until ``give_up()`` (checked whenever a peer comes or goes); ``None`` then."""
        with self._cv:
            while True:
                self.check()
                for i, message in enumerate(self._inbox):
                    if match(message):
                        return self._inbox.pop(i)
                if give_up():
                    return None
                left = deadline - self._clock()
                if left <= 0:
                    return None
                self._cv.wait(min(left, self.config.heartbeat_s))

    def drain(self, match: Callable[[Message], bool]) -> list[Message]:
        """Every inbox message ``match`` accepts, without waiting."""
        with self._cv:
            taken = [m for m in self._inbox if match(m)]
            self._inbox = [m for m in self._inbox if not match(m)]
            return taken

    def stats(self) -> MeshStats:
        with self._cv:
            return MeshStats(
                self._sent,
                self._received,
                self._sync_sent,
                self._sync_received,
                self._heal_sent,
                self._heal_received,
                {self._name(r): n for r, n in self._lost.items()},
                {self._name(r): n for r, n in self._rejoined.items()},
            )

    # -- connections ------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._closed.is_set():
            try:
                sock, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._spawn(functools.partial(self._run_conn, sock, None), "conn")

    def _dial_loop(self, rank: int) -> None:
        topo = self.topology
        where = (topo.address(rank), topo.port(rank))
        pause = 0.1
        while not self._closed.is_set():
            try:
                sock = socket.create_connection(where, timeout=self.config.peer_timeout_s)
            except OSError:
                self._closed.wait(pause)
                pause = min(pause * 2, 1.0)
                continue
            pause = 0.1
            self._run_conn(sock, rank)

    def _run_conn(self, sock: socket.socket, rank: int | None) -> None:
        """Say hello, check the peer's, then read its frames until the connection ends."""
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(self.config.peer_timeout_s)
        topo = self.topology
        with self._cv:
            mine = self._lineage
        conn: _Conn | None = None
        try:
            write_frame(
                sock,
                {
                    "kind": "hello",
                    "rank": topo.site_rank,
                    "site": topo.site,
                    "digest": self.digest,
                    "lineage": mine.to_json(),
                },
            )
            # Before its hello a peer is nobody: a small frame only, never a big allocation.
            (header, _), size = read_frame(sock, max_payload=0)
            if header["kind"] == "refuse":
                self._fail(
                    ValidationError(
                        f"site {self._name(rank)} refused this one: {header.get('reason')}"
                    )
                )
                return
            peer_rank, peer = self._check_hello(header, rank, sock)
            conn = _Conn(peer_rank, sock, peer, self._clock())
            self._register(conn, size)
            sock.settimeout(None)  # silence is judged by the heartbeat loop
            while not self._closed.is_set():
                (header, payload), size = read_frame(sock, lambda: self._touch(conn))
                self._take_frame(conn, header, payload, size)
        except IntegrityError as exc:
            if conn is not None:  # the peer is cut off; what it sent is never applied
                name = self._name(conn.rank)
                _log.error("site %s sent a bad frame, refused: %s", name, exc.message)
                self._drop(conn, f"it sent a bad frame ({exc.message})")
        except (OSError, ConnectionError, ValueError) as exc:
            if conn is not None:
                self._drop(conn, f"connection ended: {exc}")
        finally:
            if conn is not None:
                self._drop(conn, None)
            with contextlib.suppress(OSError):
                sock.close()

    def _check_hello(
        self, header: dict[str, Any], rank: int | None, sock: socket.socket
    ) -> tuple[int, Lineage]:
        topo = self.topology
        if header.get("kind") != "hello":
            raise IntegrityError(f"the first frame is {header.get('kind')!r}, not hello")
        peer_rank = header.get("rank")
        if (
            not isinstance(peer_rank, int)
            or not 0 <= peer_rank < topo.n_sites
            or (peer_rank == topo.site_rank or (rank is not None and peer_rank != rank))
        ):
            raise IntegrityError(f"a peer says it is site rank {peer_rank!r}")
        if header.get("digest") != self.digest:
            reason = (
                f"site {topo.sites[peer_rank]} runs another model or sync config (digest "
                f"{header.get('digest')}) than site {topo.site} ({self.digest}): every site "
                "must build the same model and pass the same sync settings"
            )
            with contextlib.suppress(OSError):
                write_frame(sock, {"kind": "refuse", "reason": reason})
            self._fail(ValidationError(reason))
            raise IntegrityError(reason)
        return peer_rank, Lineage.from_json(header.get("lineage"))

    def _register(self, conn: _Conn, size: int) -> None:
        with self._cv:
            old = self._conns.get(conn.rank)
            self._conns[conn.rank] = conn
            self._received += size
            if self._lost[conn.rank] > self._rejoined[conn.rank]:
                self._rejoined[conn.rank] += 1
            # What this worker holds *now* (a heal may have finished since its hello), and
            # nothing while it is healing anyway.
            mine, peer = self._lineage, conn.peer
            if (
                not mine.joining
                and not mine.same_line(peer)
                and not peer.joining
                and (peer.weight, -conn.rank) > (mine.weight, -self.topology.site_rank)
            ):
                self._heal_from = conn.rank
            self._cv.notify_all()
        if old is not None and old.open:
            self._drop(old, None)
        _log.info(
            "site %s is connected (its step %d, merged %.0f tokens)",
            self._name(conn.rank),
            conn.peer.step,
            conn.peer.weight,
        )

    def _touch(self, conn: _Conn) -> None:
        conn.last_seen = self._clock()

    def _take_frame(self, conn: _Conn, header: dict[str, Any], payload: bytes, size: int) -> None:
        with self._cv:
            conn.last_seen = self._clock()
            self._received += size
            kind = header["kind"]
            if kind == "beat":
                said = Lineage.from_json(header.get("lineage"))
                # Sent before it took our state: it says "member" the moment it has healed,
                # and a later heal of it starts with a join frame (which counts at once).
                if conn.joined is not None and said.joining:
                    return
                conn.joined = None
                if said.joining != conn.peer.joining:
                    self._cv.notify_all()  # a member came or went: rounds re-count
                conn.peer = said
                return
            if kind == "join":  # it waits for our state from now on: not a member
                peer = conn.peer
                conn.peer = Lineage(
                    peer.id, peer.history, peer.weight, peer.step, joining=True, since=peer.since
                )
                conn.joined = None
                self._cv.notify_all()
            if kind in _SYNC_KINDS:
                self._sync_received += len(payload)
            elif kind == "state":
                self._heal_received += len(payload)
            self._inbox.append((conn.rank, header, payload))
            self._cv.notify_all()

    def _beat_loop(self) -> None:
        """Tell every peer this worker's lineage over TCP (it may wait behind an update)."""
        while not self._closed.wait(self.config.heartbeat_s):
            with self._cv:
                conns = [c for c in self._conns.values() if c.open]
                beat = {"kind": "beat", "lineage": self._lineage.to_json()}
            for conn in conns:
                self.send(conn.rank, beat)

    def _pulse_loop(self) -> None:
        """Send the UDP heartbeats and judge every peer's silence."""
        topo = self.topology
        pulse = _PULSE + self.digest.encode()[:16].ljust(16) + bytes([topo.site_rank])
        peers = [(r, (topo.address(r), topo.port(r))) for r in range(topo.n_sites)]
        while not self._closed.wait(self.config.heartbeat_s):
            assert self._udp is not None
            for rank, where in peers:
                if rank != topo.site_rank:
                    with contextlib.suppress(OSError):
                        self._udp.sendto(pulse, where)
            now = self._clock()
            with self._cv:
                conns = [c for c in self._conns.values() if c.open]
                heard = dict(self._heard)
            for conn in conns:
                silent = now - max(conn.last_seen, heard.get(conn.rank, 0.0))
                if silent > self.config.peer_timeout_s:
                    why = f"silent for {silent:.1f} s (timeout {self.config.peer_timeout_s:g} s)"
                    self._drop(conn, why)

    def _hear_loop(self) -> None:
        """Take the peers' UDP heartbeats (others' packets are ignored)."""
        topo = self.topology
        digest = self.digest.encode()[:16].ljust(16)
        while not self._closed.is_set():
            assert self._udp is not None
            try:
                data, _ = self._udp.recvfrom(64)
            except TimeoutError:
                continue
            except OSError:
                return
            if len(data) != 21 or data[:4] != _PULSE or data[4:20] != digest:
                continue
            rank = data[20]
            if rank < topo.n_sites and rank != topo.site_rank:
                with self._cv:
                    self._heard[rank] = self._clock()

    def _drop(self, conn: _Conn, why: str | None) -> None:
        with self._cv:
            was_open = conn.open
            conn.open = False
            if self._conns.get(conn.rank) is conn:
                del self._conns[conn.rank]
                if why is not None and not self._closed.is_set():
                    self._lost[conn.rank] += 1
            self._cv.notify_all()
        if was_open:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_RDWR)
            if why is not None and not self._closed.is_set():
                _log.warning("site %s is lost: %s", self._name(conn.rank), why)

    def _fail(self, error: PlatformError) -> None:
        with self._cv:
            if self._fatal is None:
                self._fatal = error
                _log.error("%s", error.message)
            self._cv.notify_all()

    def _name(self, rank: int | None) -> str:
        return "?" if rank is None else self.topology.sites[rank]


def rendezvous_error(topology: Topology, missing: list[int], timeout_s: float) -> UnavailableError:
    """The error of a start at which some sites never connected."""
    where = ", ".join(
        f"{topology.sites[r]} ({topology.address(r)}:{topology.port(r)})" for r in missing
    )
    return UnavailableError(
        f"the gang's rendezvous did not complete in {timeout_s:g} s: no connection from {where}",
        hint="check that every site's workers started and that the sites reach each other",
    )
