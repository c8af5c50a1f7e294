"""The lab's state file (``<lab dir>/state.json``, versioned JSON): what ``lab up`` made, so
that every later ``lab`` command — and ``lab down-all`` after a crash — knows what to act on.

It is rewritten (atomically) after every step of building the lab, so a lab that failed
half-way can still be torn down completely.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from onecluster.errors import ForbiddenError, ValidationError

__all__ = ["STATE_VERSION", "LabState", "ProcessRecord"]

STATE_VERSION = 1


@dataclass(slots=True, kw_only=True)
class ProcessRecord:
    """A process the lab started: its PID and where it logs."""

    pid: int
    log: str


@dataclass(slots=True, kw_only=True)
class LabState:
    """Everything the lab made; ``fabric`` is the lab's own copy of the fabric file."""

    name: str
    fabric: str
    scale: float
    mtu: int
    bridge: bool = False
    netns: list[str] = field(default_factory=list)
    emulators: dict[str, ProcessRecord] = field(default_factory=dict)
    server: ProcessRecord | None = None
    server_url: str | None = None
    agents: dict[str, ProcessRecord] = field(default_factory=dict)
    #: Sites taken down with ``lab down SITE``, and the circuits that cut.
    sites_down: dict[str, list[str]] = field(default_factory=dict)

    def save(self, directory: Path) -> None:
        """Write the state to ``directory/state.json`` (readable by its owner only)."""
        directory.mkdir(parents=True, exist_ok=True)
        body = {"version": STATE_VERSION, **asdict(self)}
        tmp = directory / "state.json.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(body, f, indent=2)
        tmp.replace(directory / "state.json")

    @classmethod
    def load(cls, directory: Path) -> LabState | None:
        """The state in ``directory``, ``None`` if there is none; :class:`ValidationError` for
        a file this version cannot read."""
        path = directory / "state.json"
        try:
            body: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except PermissionError as exc:
            msg = f"the lab's state file {path} is readable by root only"
            raise ForbiddenError(msg, hint="run it as root (e.g. with sudo)") from exc
        except (OSError, ValueError) as exc:
            msg = f"cannot read the lab's state file {path}: {exc}"
            raise ValidationError(
                msg, hint="`onecluster lab down-all` removes what it can"
            ) from exc
        if body.get("version") != STATE_VERSION:
            msg = (
                f"{path} has state version {body.get('version')!r}; "
                f"this onecluster reads {STATE_VERSION}"
            )
            raise ValidationError(msg)
        try:
            return cls(
                name=body["name"],
                fabric=body["fabric"],
                scale=float(body["scale"]),
                mtu=int(body["mtu"]),
                bridge=bool(body["bridge"]),
                netns=list(body["netns"]),
                emulators={k: ProcessRecord(**v) for k, v in body["emulators"].items()},
                server=ProcessRecord(**body["server"]) if body["server"] else None,
                server_url=body["server_url"],
                agents={k: ProcessRecord(**v) for k, v in body["agents"].items()},
                sites_down={k: list(v) for k, v in body["sites_down"].items()},
            )
        except (KeyError, TypeError, ValueError) as exc:
            msg = f"the lab's state file {path} is damaged ({exc})"
            raise ValidationError(
                msg, hint="`onecluster lab down-all` removes what it can"
            ) from exc
