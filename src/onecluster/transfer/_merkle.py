"""The Merkle tree over a manifest's entries: a dataset version's identity and its proofs.

The tree is RFC 6962's (Certificate Transparency), with BLAKE3 for SHA-256: a leaf hashes
``0x00 ‖ entry``, an inner node ``0x01 ‖ left ‖ right``, and a list of *n* > 1 leaves splits
at the largest power of two below *n*.  The root of no leaves is BLAKE3 of nothing.  Domain
separation keeps a leaf from ever passing for a node, so no two different entry lists share
a root; an inclusion proof shows one entry is in a version without the others.
"""

from __future__ import annotations

from collections.abc import Sequence

from blake3 import blake3

__all__ = [
    "DIGEST_SIZE",
    "digest",
    "inclusion_proof",
    "leaf_hash",
    "merkle_root",
    "verify_inclusion",
]

#: Bytes in every digest: a chunk's, a leaf's, a root's.
DIGEST_SIZE = 32


def digest(data: bytes | bytearray | memoryview) -> bytes:
    """BLAKE3 of ``data`` (a chunk's identity)."""
    return blake3(data).digest()


def leaf_hash(entry: bytes) -> bytes:
    """The tree's leaf for one encoded entry."""
    return blake3(b"\x00" + entry).digest()


def _node(left: bytes, right: bytes) -> bytes:
    return blake3(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two smaller than ``n`` (``n`` > 1)."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def merkle_root(leaves: Sequence[bytes]) -> bytes:
    """The root over ``leaves`` (leaf hashes, in order)."""
    if not leaves:
        return blake3(b"").digest()
    level = list(leaves)
    # Bottom-up over the same tree the recursive definition gives: pair from the left,
    # carrying an unpaired last node up unchanged (RFC 6962's split keeps it rightmost).
    while len(level) > 1:
        paired = [_node(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            paired.append(level[-1])
        level = paired
    return level[0]


def inclusion_proof(leaves: Sequence[bytes], index: int) -> list[bytes]:
    """The audit path of leaf ``index`` (RFC 6962 §2.1.1), from the leaf up."""
    if not 0 <= index < len(leaves):
        msg = f"leaf {index} is not in a tree of {len(leaves)}"
        raise IndexError(msg)
    path: list[bytes] = []
    _path(list(leaves), index, path)
    return path


def _path(leaves: list[bytes], index: int, out: list[bytes]) -> None:
    if len(leaves) <= 1:
        return
    k = _split(len(leaves))
    if index < k:
        _path(leaves[:k], index, out)
        out.append(merkle_root(leaves[k:]))
    else:
        _path(leaves[k:], index - k, out)
        out.append(merkle_root(leaves[:k]))


def verify_inclusion(
    leaf: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes
) -> bool:
    """Whether ``proof`` shows ``leaf`` at ``index`` of a tree of ``size`` leaves with ``root``
    (RFC 9162 §2.1.3.2)."""
    if not 0 <= index < size:
        return False
    fn, sn, node = index, size - 1, leaf
    for sibling in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            node = _node(sibling, node)
            while not fn & 1 and fn:
                fn >>= 1
                sn >>= 1
        else:
            node = _node(node, sibling)
        fn >>= 1
        sn >>= 1
    return sn == 0 and node == root
