"""Emulated circuits: the :class:`LinkEmulator` seam, and its implementation on the userspace
TUN emulator (:mod:`onecluster.lab._emulator`, one process per circuit).

Starting a circuit means: start its emulator (which creates a TUN device in each end's
namespace), then give each end its point-to-point address, the MTU, a long transmit queue and
the ``tbf`` rate limit.  An emulator that dies takes its devices — and so the circuit — with
it; :meth:`TunEmulator.status` then raises :class:`UnavailableError`, and ``lab heal``
starts it again.
"""

from __future__ import annotations

import json
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from onecluster.errors import BackendError, UnavailableError, ValidationError
from onecluster.lab._plan import CircuitPlan, LabPlan
from onecluster.launch import Launched, Launcher, log_tail
from onecluster.network import add_address, netns_path, set_link, set_tbf
from onecluster.process import alive

__all__ = ["EmulatorStatus", "LinkEmulator", "TunEmulator", "start_tun_emulator"]

_READY_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True, kw_only=True)
class EmulatorStatus:
    """What a circuit's emulator reports: ``state`` is up, cut or flapping."""

    circuit: str
    pid: int
    state: str
    down_now: bool
    cpu_s: float
    delay_ms: tuple[float, float]
    loss: tuple[float, float]
    #: Per direction (a→b, b→a): received, forwarded, forwarded_bytes, lost, cut, overflow …
    directions: tuple[dict[str, int], dict[str, int]]


class LinkEmulator(Protocol):
    """One emulated circuit, however it is emulated."""

    circuit: str

    def status(self) -> EmulatorStatus:
        """Its state and counters; :class:`UnavailableError` if the emulator is gone."""
        ...

    def cut(self) -> None:
        """Drop every packet until :meth:`heal`."""
        ...

    def heal(self) -> None:
        """End a cut or a flap."""
        ...

    def flap(self, period_s: float, down_s: float) -> None:
        """Go down for ``down_s`` at the start of every ``period_s``."""
        ...


class TunEmulator:
    """A :class:`LinkEmulator` talking to a running emulator process over its control socket."""

    def __init__(self, circuit: str, pid: int, control: Path) -> None:
        self.circuit = circuit
        self.pid = pid
        self.control = control

    def request(self, body: dict[str, Any]) -> dict[str, Any]:
        """One control request; :class:`UnavailableError` if the emulator does not answer,
        :class:`ValidationError` if it refused the request."""
        if not alive(self.pid):  # (a reused PID would not answer on this socket)
            msg = f"the link emulator of circuit {self.circuit} (pid {self.pid}) is not running"
            raise UnavailableError(msg, hint="`onecluster lab heal` starts it again")
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(5.0)
                s.connect(str(self.control))
                s.sendall(json.dumps(body).encode() + b"\n")
                data = b""
                while not data.endswith(b"\n"):
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
        except OSError as exc:
            msg = (
                f"the link emulator of circuit {self.circuit} does not answer "
                f"on {self.control}: {exc}"
            )
            raise UnavailableError(msg, hint="`onecluster lab heal` starts it again") from exc
        try:
            answer: dict[str, Any] = json.loads(data)
        except ValueError as exc:
            msg = f"the link emulator of circuit {self.circuit} answered something unreadable"
            raise UnavailableError(msg) from exc
        if not answer.get("ok"):
            msg = (
                f"the link emulator of circuit {self.circuit} refused {body}: {answer.get('error')}"
            )
            raise ValidationError(msg)
        return answer

    def status(self) -> EmulatorStatus:
        """The emulator's state and counters."""
        a = self.request({"op": "status"})
        return EmulatorStatus(
            circuit=self.circuit,
            pid=int(a["pid"]),
            state=str(a["state"]),
            down_now=bool(a["down_now"]),
            cpu_s=float(a["cpu_s"]),
            delay_ms=(float(a["delay_ms"][0]), float(a["delay_ms"][1])),
            loss=(float(a["loss"][0]), float(a["loss"][1])),
            directions=(dict(a["directions"][0]), dict(a["directions"][1])),
        )

    def cut(self) -> None:
        """Total outage until healed."""
        self.request({"op": "cut"})

    def heal(self) -> None:
        """Back to normal."""
        self.request({"op": "heal"})

    def flap(self, period_s: float, down_s: float) -> None:
        """Down for ``down_s`` every ``period_s``."""
        self.request({"op": "flap", "period_s": period_s, "down_s": down_s})


def start_tun_emulator(
    plan: LabPlan, circuit: CircuitPlan, directory: Path, launcher: Launcher
) -> tuple[TunEmulator, Launched]:
    """Start ``circuit``'s emulator (as ``emulator-<circuit>`` of ``launcher``, logging to
    ``directory``) and configure both its ends; the emulator and its process.

    :class:`BackendError` (with the log's tail) if it does not come up.
    """
    directory.mkdir(parents=True, exist_ok=True)
    control = directory / f"c{circuit.index}.sock"
    config = directory / f"c{circuit.index}.json"
    log = directory / f"c{circuit.index}.log"
    ends = [plan.site(circuit.a).netns, plan.site(circuit.b).netns]
    config.write_text(
        json.dumps(
            {
                "circuit": circuit.circuit,
                "ends": [{"netns": str(netns_path(ns)), "device": circuit.device} for ns in ends],
                "delay_ms": [circuit.one_way_ms, circuit.one_way_ms],
                "loss": [circuit.loss, circuit.loss],
                "control": str(control),
                "seed": circuit.index,
            }
        )
    )
    control.unlink(missing_ok=True)
    process = launcher.start(
        f"emulator-{circuit.circuit}",
        [sys.executable, "-m", "onecluster.lab._emulator", str(config)],
        log_path=log,
    )
    emulator = TunEmulator(circuit.circuit, process.pid, control)

    def ready() -> bool:
        try:
            return control.exists() and bool(emulator.status())
        except UnavailableError:
            return False

    def failure() -> BackendError:
        msg = (
            f"the link emulator of circuit {circuit.circuit} did not start "
            f"within {_READY_TIMEOUT_S:.0f} s"
        )
        return BackendError(msg, hint=f"its log {log} ends with:\n{log_tail(log)}")

    launcher.wait_until(ready, timeout_s=_READY_TIMEOUT_S, failure=failure)
    for site, ns in zip((circuit.a, circuit.b), ends, strict=True):
        dev = circuit.device
        add_address(dev, f"{circuit.address_of(site)}/32", ns, peer=f"{circuit.peer_of(site)}/32")
        set_link(dev, ns, mtu=circuit.mtu, txqueuelen=10000, up=True)
        set_tbf(
            dev,
            ns,
            rate_bps=circuit.rate_bps,
            burst_bytes=circuit.burst_bytes,
            limit_bytes=circuit.limit_bytes,
        )
    return emulator, process
