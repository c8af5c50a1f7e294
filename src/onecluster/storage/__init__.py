"""A site's dataset storage: scanning directories in place, the index of verified chunks,
reading chunks to send and writing received ones resumably (the agents' side of datasets).
"""

from onecluster.storage._index import ChunkIndex, Place, ReplicaRecord
from onecluster.storage._replica import PartialReplica, replica_dir
from onecluster.storage._scan import ScanCancelledError, ScanProgress, scan_tree
from onecluster.storage._source import SourceReader
from onecluster.storage._store import DataStore

__all__ = [
    "ChunkIndex",
    "DataStore",
    "PartialReplica",
    "Place",
    "ReplicaRecord",
    "ScanCancelledError",
    "ScanProgress",
    "SourceReader",
    "replica_dir",
    "scan_tree",
]
