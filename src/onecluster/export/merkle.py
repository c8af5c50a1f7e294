"""RFC 9162 (Certificate Transparency 2.0) Merkle trees with SHA-256: heads and proofs.

This module is public so that auditors' scripts can check the export register on their own
(``docs/export.md`` has a worked example).  Every byte string is a raw 32-byte SHA-256
digest, never hex.  The definitions are RFC 9162 §2.1 (the same as RFC 6962 §2.1):

* a leaf hashes ``0x00 ‖ data``, an inner node ``0x01 ‖ left ‖ right``;
* the head of *n* > 1 leaves splits them at *k*, the largest power of two below *n*;
* the head of no leaves is SHA-256 of the empty string.

The verifiers follow the algorithms of §2.1.3.2 (inclusion) and §2.1.4.2 (consistency) and
also refuse what the RFC leaves to the caller: digests that are not 32 bytes, negative
sizes, an index outside the tree, ``size1 > size2``, a consistency proof from the empty
tree.  They raise :class:`~onecluster.errors.IntegrityError` on any failure and return
``None`` when the proof holds.

An inclusion proof does not authenticate the tree size: the proof of (index 0, size 3)
also passes as (index 0, size 4) against the size-3 head.  Take ``size`` and ``root`` from
a signed tree head, never from whoever hands you the proof.

:class:`Tree` keeps every complete subtree's hash, so that a register of *n* entries makes
any head, inclusion proof or consistency proof of any earlier size in O(log n) hashes; the
module-level functions build one from the leaves they are given.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

from onecluster.errors import IntegrityError

__all__ = [
    "DIGEST_SIZE",
    "Tree",
    "consistency_proof",
    "inclusion_proof",
    "leaf_hash",
    "node_hash",
    "root",
    "verify_consistency",
    "verify_inclusion",
]

#: Bytes in every digest: a leaf's, a node's, a head's.
DIGEST_SIZE = 32

_EMPTY_ROOT = hashlib.sha256(b"").digest()


def leaf_hash(data: bytes) -> bytes:
    """The leaf hash of one entry's bytes: SHA-256(0x00 ‖ data)."""
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """The hash of an inner node over its children's hashes: SHA-256(0x01 ‖ left ‖ right)."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two smaller than ``n`` (``n`` > 1)."""
    return 1 << ((n - 1).bit_length() - 1)


class Tree:
    """An append-only RFC 9162 tree that keeps the hash of every complete subtree.

    ``levels[h]`` holds, 32 bytes each, the hashes of the subtrees of 2**h leaves that are
    complete: leaves ``[i·2**h, (i+1)·2**h)`` for every ``i`` with ``(i+1)·2**h <= size``.
    Those are exactly the aligned subtrees of every earlier tree size too, so heads and
    proofs of any size up to :attr:`size` come from them without rehashing the leaves.
    """

    __slots__ = ("_levels",)

    def __init__(self, leaves: Iterable[bytes] = ()) -> None:
        self._levels: list[bytearray] = [bytearray()]
        for data in leaves:
            self.append(data)

    def copy(self) -> Tree:
        """An independent tree with the same leaves (appending to one leaves the other)."""
        twin = Tree()
        twin._levels = [bytearray(level) for level in self._levels]
        return twin

    @property
    def size(self) -> int:
        """The number of leaves appended."""
        return len(self._levels[0]) // DIGEST_SIZE

    def append(self, data: bytes) -> int:
        """Append one entry's bytes; returns its index."""
        return self.append_hash(leaf_hash(data))

    def append_hash(self, hashed: bytes) -> int:
        """Append a leaf by its leaf hash (:func:`leaf_hash` of the entry); returns its index."""
        if len(hashed) != DIGEST_SIZE:
            msg = f"a leaf hash is {DIGEST_SIZE} bytes, not {len(hashed)}"
            raise ValueError(msg)
        index = self.size
        node, height, position = bytes(hashed), 0, index
        while True:
            self._levels[height] += node
            if not position & 1:
                break
            # The new node completes a pair: its parent is complete too.
            left = self._node_at(height, position - 1)
            node, height, position = node_hash(left, node), height + 1, position >> 1
            if height == len(self._levels):
                self._levels.append(bytearray())
        return index

    def _node_at(self, height: int, position: int) -> bytes:
        start = position * DIGEST_SIZE
        return bytes(self._levels[height][start : start + DIGEST_SIZE])

    def _check_size(self, size: int | None) -> int:
        if size is None:
            return self.size
        if not 0 <= size <= self.size:
            msg = f"no tree of size {size}: this one holds {self.size} leaves"
            raise ValueError(msg)
        return size

    def _hash(self, lo: int, hi: int) -> bytes:
        """MTH of leaves ``[lo, hi)``, a range that the RFC's recursion produces (``lo`` is a
        multiple of the largest power of two not above ``hi - lo``)."""
        n = hi - lo
        if n & (n - 1) == 0:  # a complete, aligned subtree: stored
            height = n.bit_length() - 1
            return self._node_at(height, lo >> height)
        k = _split(n)
        return node_hash(self._hash(lo, lo + k), self._hash(lo + k, hi))

    def root(self, size: int | None = None) -> bytes:
        """The head of the first ``size`` leaves (default: all of them)."""
        size = self._check_size(size)
        return self._hash(0, size) if size else _EMPTY_ROOT

    def inclusion_proof(self, index: int, size: int | None = None) -> list[bytes]:
        """PATH(index, D[:size]) of RFC 9162 §2.1.3.1, from the leaf up.

        Raises ``ValueError`` when ``index`` is not a leaf of the tree of ``size``.
        """
        size = self._check_size(size)
        if not 0 <= index < size:
            msg = f"leaf {index} is not in a tree of {size} leaves"
            raise ValueError(msg)
        proof: list[bytes] = []
        lo, hi = 0, size
        while hi - lo > 1:  # descend, collecting the sibling at each split
            k = _split(hi - lo)
            if index < lo + k:
                proof.append(self._hash(lo + k, hi))
                hi = lo + k
            else:
                proof.append(self._hash(lo, lo + k))
                lo += k
        proof.reverse()
        return proof

    def consistency_proof(self, size1: int, size2: int | None = None) -> list[bytes]:
        """PROOF(size1, D[:size2]) of RFC 9162 §2.1.4.1 (empty when the sizes are equal).

        Raises ``ValueError`` unless ``0 <= size1 <= size2 <= size``.
        """
        size2 = self._check_size(size2)
        if not 0 <= size1 <= size2:
            msg = f"no consistency proof from size {size1} to size {size2}"
            raise ValueError(msg)
        if size1 in (0, size2):
            return []
        proof: list[bytes] = []
        lo, hi, m, whole = 0, size2, size1, True
        while m != hi:  # SUBPROOF(m - lo, D[lo:hi], whole), iterated
            k = _split(hi - lo)
            if m - lo <= k:
                proof.append(self._hash(lo + k, hi))
                hi = lo + k
            else:
                proof.append(self._hash(lo, lo + k))
                lo, whole = lo + k, False
        if not whole:
            proof.append(self._hash(lo, hi))
        proof.reverse()
        return proof


def root(leaves: Sequence[bytes]) -> bytes:
    """The tree head over ``leaves``, each an entry's raw bytes (not its leaf hash).

    ``root([])`` is SHA-256 of the empty string.
    """
    return Tree(leaves).root()


def inclusion_proof(leaves: Sequence[bytes], index: int) -> list[bytes]:
    """The inclusion proof of entry ``index`` in the tree over ``leaves`` (raw entry bytes).

    Raises ``ValueError`` when ``index`` is not in ``range(len(leaves))``.
    """
    return Tree(leaves).inclusion_proof(index)


def consistency_proof(leaves: Sequence[bytes], size1: int) -> list[bytes]:
    """The proof that the tree over ``leaves[:size1]`` is a prefix of the tree over ``leaves``.

    Empty when ``size1`` is 0 or ``len(leaves)`` (nothing to prove; the verifier refuses
    size 0).  Raises ``ValueError`` unless ``0 <= size1 <= len(leaves)``.
    """
    return Tree(leaves).consistency_proof(size1)


def _fail(message: str) -> IntegrityError:
    return IntegrityError(
        message,
        hint="take the tree size and head from a signed tree head, and fetch the proof again",
    )


def _check_digest(name: str, value: bytes) -> None:
    if not isinstance(value, bytes | bytearray | memoryview) or len(value) != DIGEST_SIZE:
        size = len(value) if isinstance(value, bytes | bytearray | memoryview) else "not bytes"
        msg = f"{name} must be a {DIGEST_SIZE}-byte SHA-256 digest ({size})"
        raise _fail(msg)


def _check_proof(proof: Sequence[bytes]) -> None:
    for position, element in enumerate(proof):
        _check_digest(f"proof element {position}", element)


def verify_inclusion(
    index: int, size: int, leaf_hash: bytes, proof: Sequence[bytes], root: bytes
) -> None:
    """Check that ``leaf_hash`` is leaf ``index`` of the tree of ``size`` leaves with head
    ``root`` (RFC 9162 §2.1.3.2).

    Raises :class:`IntegrityError` when it is not, or when the input is malformed: an index
    outside ``[0, size)``, a digest that is not 32 bytes, a proof too short or too long.
    """
    if not 0 <= index < size:
        msg = f"leaf {index} is not in a tree of {size} leaves"
        raise _fail(msg)
    _check_digest("the leaf hash", leaf_hash)
    _check_digest("the tree head", root)
    _check_proof(proof)
    fn, sn, r = index, size - 1, bytes(leaf_hash)
    for p in proof:
        if sn == 0:
            msg = f"the inclusion proof of leaf {index} in {size} has extra hashes"
            raise _fail(msg)
        if fn & 1 or fn == sn:
            r = node_hash(bytes(p), r)
            while not fn & 1 and fn:
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, bytes(p))
        fn >>= 1
        sn >>= 1
    if sn != 0:
        msg = f"the inclusion proof of leaf {index} in {size} is too short"
        raise _fail(msg)
    if r != root:
        msg = f"leaf {index} is not in the tree of {size} with this head"
        raise _fail(msg)


def verify_consistency(
    size1: int, size2: int, proof: Sequence[bytes], root1: bytes, root2: bytes
) -> None:
    """Check that the tree of ``size1`` leaves with head ``root1`` is a prefix of the tree of
    ``size2`` leaves with head ``root2`` (RFC 9162 §2.1.4.2).

    Equal sizes need an empty proof and equal heads.  Raises :class:`IntegrityError` when the
    proof fails, and on malformed input: a negative size, ``size1 > size2``, ``size1 == 0``
    below a larger tree (the empty tree proves nothing), an empty proof where one is needed,
    a digest that is not 32 bytes.
    """
    _check_digest("the first tree head", root1)
    _check_digest("the second tree head", root2)
    _check_proof(proof)
    if size1 < 0 or size2 < 0:
        msg = f"tree sizes cannot be negative ({size1}, {size2})"
        raise _fail(msg)
    if size1 > size2:
        msg = f"a tree of {size1} leaves cannot be a prefix of one of {size2}"
        raise _fail(msg)
    if size1 == size2:
        if proof:
            msg = f"two heads of the same size {size1} need an empty proof, not {len(proof)}"
            raise _fail(msg)
        if root1 != root2:
            msg = f"two different heads for the same tree size {size1}: the log forked"
            raise _fail(msg)
        return
    if size1 == 0:
        msg = "no consistency proof starts from the empty tree"
        raise _fail(msg)
    if not proof:
        msg = f"an empty consistency proof cannot show {size1} → {size2}"
        raise _fail(msg)
    path = [bytes(p) for p in proof]
    if size1 & (size1 - 1) == 0:  # step 2: a power of two is its own left subtree
        path.insert(0, bytes(root1))
    fn, sn = size1 - 1, size2 - 1
    while fn & 1:  # step 4
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            msg = f"the consistency proof {size1} → {size2} has extra hashes"
            raise _fail(msg)
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            while not fn & 1 and fn:
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        msg = f"the consistency proof {size1} → {size2} is too short"
        raise _fail(msg)
    if fr != root1:
        msg = f"the proof does not lead to the head of size {size1}: the old tree was rewritten"
        raise _fail(msg)
    if sr != root2:
        msg = f"the proof does not lead to the head of size {size2}"
        raise _fail(msg)
