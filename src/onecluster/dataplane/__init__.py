"""The data plane between agents: a data endpoint that serves and relays chunks, and a
fetch that pulls a transfer's missing chunks over every path at once (TCP, BBR, several
streams per path, resumable by construction: it only ever asks for what is missing).
"""

from onecluster.dataplane._fetch import ChunkSink, Fetch, PathStats, Route, fetch_manifest
from onecluster.dataplane._metrics import DataPlaneMetrics
from onecluster.dataplane._pacing import Pacer
from onecluster.dataplane._protocol import ProtocolError
from onecluster.dataplane._server import ChunkSource, DataServer, Grants, Served
from onecluster.dataplane._sockets import DSCP, window_bytes

__all__ = [
    "DSCP",
    "ChunkSink",
    "ChunkSource",
    "DataPlaneMetrics",
    "DataServer",
    "Fetch",
    "Grants",
    "Pacer",
    "PathStats",
    "ProtocolError",
    "Route",
    "Served",
    "fetch_manifest",
    "window_bytes",
]
