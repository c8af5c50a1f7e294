"""The server's typed configuration, built once by the caller (the CLI) and passed down."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from onecluster.errors import ValidationError
from onecluster.model import MAX_HEARTBEAT_S, Fabric
from onecluster.scheduler import PolicyConfig
from onecluster.state_dir import DATABASE_FILE
from onecluster.store import DEFAULT_LEASE_S
from onecluster.transfer import Etiquette

__all__ = ["ServerConfig"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerConfig:
    """Everything ``onecluster server`` needs.

    ``db_url`` defaults to a SQLite file in ``state_dir``; ``state_dir`` also receives the
    bootstrap ``admin.token``.  ``lease_s``: each sync grants the site this lease; a site
    whose lease runs out unrenewed is down, its attempts are lost and their jobs requeued
    elsewhere (its agent has stopped them by then).  It is the trade-off between how fast a
    lost site's work restarts elsewhere and how long an outage of this server (or of a
    site's connection to it) running jobs survive: about ``lease_s`` less 5 %, less the agents'
    stop grace, less their retry interval (841 s at 900 s; ``docs/architecture.md``, "Jobs
    outlive the control plane").  ``grace_s``: how long an agent waits
    between SIGTERM and SIGKILL when told to stop an attempt.

    ``leader_lease_s``: with several replicas on one database (PostgreSQL), the leadership
    lease; a leader that dies is replaced within about that long, and a leader that cannot
    renew it (stalled, cut off from the database) for that long is deposed — its writes are
    then refused by the database.  ``advertise_url``: the URL other replicas forward
    leader-only requests to while this one leads (default: the URL it listens on).

    ``register_key``: the export register's Ed25519 signing key file, the same for every
    replica (default: ``<state_dir>/register/signing.key``, made there by the first replica
    on a database whose register has no key yet); the register itself is in the database.

    ``bulk_share`` and ``relay_share``: the etiquette of transfers — the share of a direct
    circuit's capacity a transfer's path may fill, and of each circuit of a path relayed
    through a third site (whose own traffic comes first: ``docs/decisions.md``).
    """

    fabric: Fabric
    state_dir: Path
    db_url: str | None = None
    host: str = "127.0.0.1"
    port: int = 8080
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    lease_s: float = DEFAULT_LEASE_S
    reconcile_interval_s: float = 0.5
    grace_s: float = 10.0
    heartbeat_interval_s: float = 1.0
    leader_lease_s: float = 2.0
    advertise_url: str | None = None
    log_level: str = "info"
    bulk_share: float = 1.0
    relay_share: float = 0.5
    register_key: Path | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "state_dir", Path(self.state_dir))
        if self.register_key is not None:
            object.__setattr__(self, "register_key", Path(self.register_key))
        for name in ("lease_s", "reconcile_interval_s", "heartbeat_interval_s", "leader_lease_s"):
            if not getattr(self, name) > 0:
                msg = f"server setting {name} must be greater than 0 (got {getattr(self, name)})"
                raise ValidationError(msg)
        if self.heartbeat_interval_s > MAX_HEARTBEAT_S:
            msg = (
                f"server setting heartbeat_interval_s must be at most {MAX_HEARTBEAT_S:g} s "
                f"(got {self.heartbeat_interval_s:g})"
            )
            raise ValidationError(msg)
        if self.grace_s < 0:
            msg = f"server setting grace_s must not be negative (got {self.grace_s})"
            raise ValidationError(msg)
        for name in ("bulk_share", "relay_share"):
            share = getattr(self, name)
            if not 0 < share <= 1:
                msg = f"server setting {name} must be a fraction in (0, 1] (got {share})"
                raise ValidationError(msg, hint="e.g. 0.5 for half of a circuit's capacity")
        if self.advertise_url is not None and not self.advertise_url.startswith(
            ("http://", "https://")
        ):
            msg = f"the advertised URL {self.advertise_url!r} must start with http:// or https://"
            raise ValidationError(msg, hint="e.g. --advertise-url http://10.0.0.5:8080")
        if not 0 <= self.port <= 65535:
            msg = f"port {self.port} is not between 0 and 65535"
            raise ValidationError(msg)

    @property
    def etiquette(self) -> Etiquette:
        """How much of a circuit a transfer's path may take."""
        return Etiquette(bulk_share=self.bulk_share, relay_share=self.relay_share)

    @property
    def database_url(self) -> str:
        """``db_url``, or the SQLite file ``<state_dir>/onecluster.db``."""
        return self.db_url or f"sqlite:///{self.state_dir / DATABASE_FILE}"
