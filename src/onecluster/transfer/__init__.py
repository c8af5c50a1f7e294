"""Datasets as content: manifests, chunks, Merkle roots and transfer plans (pure).

A dataset *version* is a tree of files cut into content-defined chunks; its identity is the
Merkle root over its manifest.  This package holds the format and the decisions — which
paths a push takes, how many streams each runs, how missing chunks are batched — as pure
functions; reading files is :mod:`onecluster.storage`'s, moving bytes
:mod:`onecluster.dataplane`'s.
"""

from onecluster.transfer._manifest import (
    FORMAT_VERSION,
    ChunkRef,
    Entry,
    EntryKind,
    Manifest,
    check_relative_path,
    decode_manifest,
    encode_manifest,
)
from onecluster.transfer._merkle import (
    DIGEST_SIZE,
    digest,
    inclusion_proof,
    leaf_hash,
    merkle_root,
    verify_inclusion,
)
from onecluster.transfer._plan import (
    CHUNK_AVG,
    CHUNK_MAX,
    CHUNK_MIN,
    Etiquette,
    Hop,
    PathPlan,
    batches,
    plan_paths,
    streams_for,
)

__all__ = [
    "CHUNK_AVG",
    "CHUNK_MAX",
    "CHUNK_MIN",
    "DIGEST_SIZE",
    "FORMAT_VERSION",
    "ChunkRef",
    "Entry",
    "EntryKind",
    "Etiquette",
    "Hop",
    "Manifest",
    "PathPlan",
    "batches",
    "check_relative_path",
    "decode_manifest",
    "digest",
    "encode_manifest",
    "inclusion_proof",
    "leaf_hash",
    "merkle_root",
    "plan_paths",
    "streams_for",
    "verify_inclusion",
]
