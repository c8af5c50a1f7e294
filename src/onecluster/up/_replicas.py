"""The server replicas of ``up``: where each listens and keeps its state, how they start, and
a watch that tells of a replica lost and of a change of leader while the others serve on.

One replica is what ``up`` always ran: ``server`` on the state folder itself.  Several share
one PostgreSQL database; each has a state folder of its own (``<state>/replicas/<i>``, the
server's lock allows one server per folder), its own port and ``--advertise-url``.  The
first starts alone, so that it creates the schema and the admin token before the others
connect; ``up`` then writes every URL to ``<state>/server.url`` and the token to
``<state>/admin.token``, where the CLI of another shell finds them and fails over between
the replicas as ``up``'s own clients and agents do (decisions 161, 183).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from onecluster.errors import BackendError, ConflictError, PlatformError
from onecluster.launch import Launcher, free_port
from onecluster.schema import LeaderOut
from onecluster.state_dir import ADMIN_TOKEN_FILE, SERVER_URL_FILE

__all__ = [
    "Replica",
    "ReplicaView",
    "ReplicaWatch",
    "plan_replicas",
    "publish_replicas",
    "replica_admin_token",
]

#: Where the state folders of several replicas go, under ``up``'s own.
REPLICAS_DIR = "replicas"


@dataclass(frozen=True, slots=True, kw_only=True)
class Replica:
    """One server process of ``up``: its launcher name, port, URL and state folder."""

    name: str
    port: int
    url: str
    state_dir: Path


def plan_replicas(state: Path, *, host: str, port: int | None, count: int) -> tuple[Replica, ...]:
    """Where ``count`` replicas listen and keep their state.

    One: ``server`` on ``state`` itself, on ``port`` (``None``: 8080 if free, else any) — what
    ``up`` has always run.  Several: ``server-1`` … ``server-<count>``, each with its state in
    ``state/replicas/<i>``, the first on ``port`` as above and each next one on the port after
    the one before if it is free, else on any free port.
    """
    first = port or free_port(host, preferred=8080)
    if count == 1:
        return (_replica("server", host, first, state),)
    ports = [first]
    while len(ports) < count:
        candidate = free_port(host, preferred=ports[-1] + 1 if ports[-1] < 65535 else None)
        if candidate not in ports:
            ports.append(candidate)
    return tuple(
        _replica(f"server-{i}", host, p, state / REPLICAS_DIR / str(i))
        for i, p in enumerate(ports, start=1)
    )


def _replica(name: str, host: str, port: int, state_dir: Path) -> Replica:
    return Replica(name=name, port=port, url=f"http://{host}:{port}", state_dir=state_dir)


def replica_admin_token(state: Path, replicas: Sequence[Replica]) -> str:
    """The admin token ``up`` uses, kept in ``<state>/admin.token`` for the CLI.

    The replica that created the database wrote a fresh one into its own state folder: that
    one wins, copied to ``<state>`` (readable by its owner only).  Otherwise the database
    existed already (an earlier ``up --db``, whose token stays in ``<state>``).
    :class:`ConflictError` when neither holds one.
    """
    target = state / ADMIN_TOKEN_FILE
    for replica in replicas:
        minted = replica.state_dir / ADMIN_TOKEN_FILE
        if minted != target and minted.is_file():
            _write_private(target, minted.read_text(encoding="utf-8"))
            break
    try:
        return target.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        msg = (
            f"the database already has an admin token, and {state} does not hold it "
            "(the servers write a new one only into an empty database)"
        )
        raise ConflictError(
            msg,
            hint="give --db an empty database, or the --state-dir of the `up` that created it",
        ) from None


def publish_replicas(state: Path, replicas: Sequence[Replica]) -> Path | None:
    """Write every replica's URL, comma-separated, to ``<state>/server.url`` (the CLI's
    ``--server`` default) and return the file.  One replica writes its own: ``None``."""
    if len(replicas) == 1:
        return None
    path = state / SERVER_URL_FILE
    scratch = path.with_name(path.name + ".tmp")
    scratch.write_text(",".join(r.url for r in replicas) + "\n", encoding="utf-8")
    scratch.replace(path)
    return path


def _write_private(path: Path, text: str) -> None:
    """``text`` into ``path``, readable by its owner only, whatever mode a file there had."""
    scratch = path.with_name(path.name + ".tmp")
    fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # a scratch file left behind keeps its mode
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
    scratch.replace(path)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaView:
    """What ``up`` last knew of its replicas: those lost and the URL of the leader."""

    replicas: tuple[Replica, ...]
    lost: frozenset[str] = field(default_factory=frozenset)
    leader: str | None = None

    def observe(
        self, *, exited: Mapping[str, tuple[int, int]], leader: LeaderOut | None
    ) -> tuple[ReplicaView, list[str]]:
        """The view after replicas ``exited`` (name → (pid, exit status)) and ``leader`` (what
        ``/cluster/leader`` answered; ``None``: nobody answered), with a line for each change:
        a replica lost, another replica leading.  A vacant lease (an election under way) is no
        change.  :class:`BackendError` once every replica is lost.
        """
        lines: list[str] = []
        lost = set(self.lost)
        for name, (pid, code) in sorted(exited.items()):
            if name in lost:
                continue
            lost.add(name)
            serving = len(self.replicas) - len(lost)
            lines.append(
                f"lost replica {name} (pid {pid}, exit status {code}); "
                f"{serving} of {len(self.replicas)} replicas serve on"
            )
        if len(lost) == len(self.replicas):
            msg = f"every server replica has exited ({', '.join(sorted(lost))})"
            raise BackendError(msg, hint="see their logs in the state folder's logs/")
        now = self.leader
        if leader is not None and leader.leader is not None and leader.leader != self.leader:
            now = leader.leader
            before = "" if self.leader is None else ", after " + self._name_of(self.leader)
            lines.append(f"{self._name_of(now)} leads at {now} (term {leader.term}{before})")
        return replace(self, lost=frozenset(lost), leader=now), lines

    def _name_of(self, url: str) -> str:
        return next((r.name for r in self.replicas if r.url == url), url)


class ReplicaWatch:
    """Called about every half second while ``up`` runs (and once when every replica
    answers): raises :class:`BackendError` when a process other than a replica exits, or the
    last replica does, and tells ``say`` of each replica lost and each new leader.  With one
    replica it is :meth:`Launcher.check` and asks nothing of the server."""

    def __init__(
        self,
        launcher: Launcher,
        replicas: Sequence[Replica],
        *,
        leader: Callable[[], LeaderOut],
        say: Callable[[str], None],
    ) -> None:
        self._launcher = launcher
        self._view = ReplicaView(replicas=tuple(replicas))
        self._names = frozenset(r.name for r in replicas)
        self._leader = leader
        self._say = say

    @property
    def view(self) -> ReplicaView:
        """What the watch knows now."""
        return self._view

    def __call__(self) -> None:
        if len(self._names) == 1:
            self._launcher.check()
            return
        self._launcher.check(ignore=self._names)
        exited = {
            launched.name: (launched.pid, code)
            for launched, code in self._launcher.exited()
            if launched.name in self._names
        }
        self._view, lines = self._view.observe(exited=exited, leader=self._ask_leader())
        self._launcher.reap()  # only replicas have exited here: each was told of above
        for line in lines:
            self._say(line)

    def _ask_leader(self) -> LeaderOut | None:
        try:
            return self._leader()
        except PlatformError:  # no replica answered this time: an election, or a lost one
            return None
