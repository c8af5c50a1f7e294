"""Test traffic between sites of the lab, run inside the sites' namespaces.

``python -m onecluster.lab._traffic sink tcp|udp HOST PORT INTERVAL`` prints one JSON line
per ``INTERVAL`` seconds: ``{"t": seconds since the first byte, "bytes": total received}``
(UDP also: ``"packets"`` and ``"gap_s"``, the longest silence between two datagrams so far),
and a final ``{"done": true, …}`` line when the sender closes (TCP) or goes quiet for 5 s
(UDP).  ``… source tcp|udp SRC HOST PORT SECONDS [PPS]`` sends for ``SECONDS``: TCP as fast
as the path allows, UDP as ``PPS`` sequence-numbered datagrams a second.  The source binds
``SRC`` (the site's service address), so its traffic follows the route table.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import sys
import time

__all__ = ["main"]

_CHUNK = 1 << 16
_DATAGRAM = 1200
_UDP_IDLE_S = 5.0


def _emit(line: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def sink_tcp(host: str, port: int, interval: float) -> None:
    """Accept one connection and count what arrives."""
    with socket.create_server((host, port)) as server:
        _emit({"listening": True})
        conn, _ = server.accept()
        with conn:
            start = time.monotonic()
            total, next_report = 0, start + interval
            while True:
                conn.settimeout(max(next_report - time.monotonic(), 0.001))
                try:
                    data = conn.recv(_CHUNK)
                except TimeoutError:
                    data = None
                except OSError:
                    break
                if data == b"":
                    break
                if data:
                    total += len(data)
                now = time.monotonic()
                if now >= next_report:
                    _emit({"t": round(now - start, 3), "bytes": total})
                    next_report += interval
            _emit({"done": True, "t": round(time.monotonic() - start, 3), "bytes": total})


def sink_udp(host: str, port: int, interval: float) -> None:
    """Count datagrams; the longest silence between two of them is the outage seen."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((host, port))
        _emit({"listening": True})
        s.settimeout(None)
        data = s.recv(_DATAGRAM * 2)
        start = last = time.monotonic()
        total, packets, gap, next_report = len(data), 1, 0.0, start + interval
        while True:
            s.settimeout(max(min(next_report - time.monotonic(), _UDP_IDLE_S), 0.001))
            try:
                data = s.recv(_DATAGRAM * 2)
            except TimeoutError:
                data = b""
            now = time.monotonic()
            if data:
                gap = max(gap, now - last)
                last = now
                total += len(data)
                packets += 1
            elif now - last >= _UDP_IDLE_S:
                break
            if now >= next_report:
                _emit(
                    {
                        "t": round(now - start, 3),
                        "bytes": total,
                        "packets": packets,
                        "gap_s": round(gap, 4),
                    }
                )
                next_report += interval
        _emit(
            {
                "done": True,
                "t": round(last - start, 3),
                "bytes": total,
                "packets": packets,
                "gap_s": round(gap, 4),
            }
        )


def source_tcp(src: str, host: str, port: int, seconds: float) -> None:
    """Send as fast as the path allows for ``seconds``."""
    payload = b"\0" * _CHUNK
    with socket.create_connection((host, port), timeout=30, source_address=(src, 0)) as conn:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            conn.sendall(payload)


def source_udp(src: str, host: str, port: int, seconds: float, pps: float) -> None:
    """Send ``pps`` numbered datagrams a second for ``seconds``."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((src, 0))
        start = time.monotonic()
        seq = 0
        while (now := time.monotonic()) < start + seconds:
            due = start + seq / pps
            if now < due:
                time.sleep(due - now)
            # no route for a moment: that datagram is lost, as on a real outage
            with contextlib.suppress(OSError):
                s.sendto(struct.pack("!Q", seq).ljust(_DATAGRAM, b"\0"), (host, port))
            seq += 1


def main(argv: list[str] | None = None) -> int:
    """Run a sink or a source (see the module docstring)."""
    args = sys.argv[1:] if argv is None else argv
    try:
        role, proto = args[0], args[1]
        if role == "sink":
            (sink_tcp if proto == "tcp" else sink_udp)(args[2], int(args[3]), float(args[4]))
        elif role == "source" and proto == "tcp":
            source_tcp(args[2], args[3], int(args[4]), float(args[5]))
        elif role == "source":
            source_udp(args[2], args[3], int(args[4]), float(args[5]), float(args[6]))
        else:
            raise IndexError
    except (IndexError, ValueError):
        sys.stderr.write("usage: see the docstring of onecluster.lab._traffic\n")
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
