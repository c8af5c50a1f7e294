"""The agent's typed configuration, built once by the CLI and passed down."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from onecluster.errors import NotFoundError, ValidationError
from onecluster.fabric import load_fabric

__all__ = ["AgentConfig"]

_BACKENDS = ("local",)


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentConfig:
    """Everything ``onecluster agent`` needs.

    The site's GPU pools come either from ``pools`` (``{"H100": 384}``) or from the site's
    entry in the fabric file at ``fabric_path`` (exactly one of the two).  ``work_dir`` holds
    the attempts' working directories and logs (default ``~/.onecluster/agent/<site>``).
    ``stop_grace_s`` is the grace given to attempts the agent stops on its own (when the server
    no longer lists them, or when the agent shuts down).  Construction raises
    :class:`ValidationError` for values that cannot work.
    """

    site: str
    server_url: str
    token: str
    backend: str = "local"
    pools: Mapping[str, int] | None = None
    fabric_path: Path | None = None
    work_dir: Path | None = None
    heartbeat_interval_s: float = 1.0
    max_backoff_s: float = 4.0
    stop_grace_s: float = 10.0
    log_chunk_bytes: int = 65536
    request_timeout_s: float = 5.0

    def __post_init__(self) -> None:
        if not self.site:
            msg = "the agent needs --site: the fabric name of the site it runs"
            raise ValidationError(msg)
        if not self.server_url.startswith(("http://", "https://")):
            msg = f"server URL {self.server_url!r} must start with http:// or https://"
            raise ValidationError(msg)
        if self.backend not in _BACKENDS:
            msg = (
                f"backend {self.backend!r} is not available in this agent; "
                f"use one of {', '.join(_BACKENDS)}"
            )
            raise ValidationError(msg)
        if (self.pools is None) == (self.fabric_path is None):
            msg = "give the agent its GPU pools either directly or through a fabric file, not both"
            raise ValidationError(msg, hint="e.g. --fabric examples/fabrics/demo.yaml")
        for what, value in (
            ("the heartbeat interval", self.heartbeat_interval_s),
            ("the longest retry backoff", self.max_backoff_s),
            ("the request timeout", self.request_timeout_s),
        ):
            if not value > 0:
                msg = f"{what} must be greater than 0 seconds (got {value})"
                raise ValidationError(msg)
        if self.stop_grace_s < 0:
            msg = f"the stop grace period must not be negative (got {self.stop_grace_s})"
            raise ValidationError(msg)
        if self.log_chunk_bytes < 1024:
            msg = f"log chunks must allow at least 1024 bytes (got {self.log_chunk_bytes})"
            raise ValidationError(msg)

    def resolved_pools(self) -> dict[str, int]:
        """GPU count per type at this site; reads the fabric file if one was given.

        Raises :class:`~onecluster.errors.FabricError` for a bad file and
        :class:`~onecluster.errors.NotFoundError` when the site is not in it.
        """
        if self.pools is not None:
            return dict(self.pools)
        assert self.fabric_path is not None  # checked at construction
        fabric = load_fabric(self.fabric_path)
        if not fabric.has_site(self.site):
            msg = f"site {self.site!r} is not in the fabric file {self.fabric_path}"
            raise NotFoundError(msg, hint=f"its sites: {', '.join(fabric.site_names)}")
        return {p.gpu_type: p.count for p in fabric.site(self.site).pools}

    def resolved_work_dir(self) -> Path:
        """``work_dir``, or ``~/.onecluster/agent/<site>`` when none was given."""
        if self.work_dir is not None:
            return Path(self.work_dir)
        return Path.home() / ".onecluster" / "agent" / self.site
