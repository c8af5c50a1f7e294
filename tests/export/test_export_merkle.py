"""``onecluster.export.merkle`` against RFC 9162 §2.1: hand-derived vectors, the RFC's own
recursive definitions (every index and size pair up to 64 leaves), and tampered proofs."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onecluster.errors import IntegrityError
from onecluster.export import merkle

# ---------------------------------------------------------------------------------------
# The RFC's definitions, transcribed as literally as possible: the oracle.


def _sha(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _k(n: int) -> int:
    """The largest power of two smaller than n (n > 1)."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def rfc_mth(d: Sequence[bytes]) -> bytes:
    """MTH(D[n]) of RFC 9162 §2.1.1."""
    if len(d) == 0:
        return _sha(b"")
    if len(d) == 1:
        return _sha(b"\x00" + d[0])
    k = _k(len(d))
    return _sha(b"\x01" + rfc_mth(d[:k]) + rfc_mth(d[k:]))


def rfc_path(m: int, d: Sequence[bytes]) -> list[bytes]:
    """PATH(m, D[n]) of RFC 9162 §2.1.3.1."""
    if len(d) <= 1:
        return []
    k = _k(len(d))
    if m < k:
        return [*rfc_path(m, d[:k]), rfc_mth(d[k:])]
    return [*rfc_path(m - k, d[k:]), rfc_mth(d[:k])]


def rfc_subproof(m: int, d: Sequence[bytes], b: bool) -> list[bytes]:
    """SUBPROOF(m, D[n], b) of RFC 9162 §2.1.4.1."""
    n = len(d)
    if m == n:
        return [] if b else [rfc_mth(d)]
    k = _k(n)
    if m <= k:
        return [*rfc_subproof(m, d[:k], b), rfc_mth(d[k:])]
    return [*rfc_subproof(m - k, d[k:], False), rfc_mth(d[:k])]


def rfc_proof(m: int, d: Sequence[bytes]) -> list[bytes]:
    """PROOF(m, D[n]) of RFC 9162 §2.1.4.1 (0 < m < n)."""
    return rfc_subproof(m, d, True)


def _leaves(n: int) -> list[bytes]:
    return [f"entry {i}".encode() * (i % 3 + 1) for i in range(n)]


# ---------------------------------------------------------------------------------------
# Hand-derived vectors.  The leaves are RFC 6962's test inputs:
#   d0 = "" (empty)   d1 = 00   d2 = 10   d3 = 2021   d4 = 3031   d5 = 40414243
#   d6 = 5051525354555657
# Each hash below was computed one step at a time with `sha256sum` over the bytes named in
# its comment (0x00 ‖ d for a leaf, 0x01 ‖ left ‖ right for a node); the roots of sizes
# 1, 2, 3, 5 and 7 agree with the reference roots every CT implementation publishes.

D = [bytes.fromhex(h) for h in ("", "00", "10", "2021", "3031", "40414243", "5051525354555657")]

# Leaf hashes: SHA-256(0x00 ‖ d_i).
L0 = bytes.fromhex("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d")  # 00
L1 = bytes.fromhex("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7")  # 0000
L2 = bytes.fromhex("0298d122906dcfc10892cb53a73992fc5b9f493ea4c9badb27b791b4127a7fe7")  # 0010
L3 = bytes.fromhex("07506a85fd9dd2f120eb694f86011e5bb4662e5c415a62917033d4a9624487e7")  # 002021
L4 = bytes.fromhex("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b")  # 003031
L5 = bytes.fromhex("4271a26be0d8a84f0bd54c8c302e7cb3a3b5d1fa6780a40bcce2873477dab658")
L6 = bytes.fromhex("b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f")
# Inner nodes: SHA-256(0x01 ‖ left ‖ right).
N01 = bytes.fromhex("fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125")  # L0 L1
N23 = bytes.fromhex("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e")  # L2 L3
N45 = bytes.fromhex("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a")  # L4 L5
N0123 = bytes.fromhex("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7")  # N01 N23
N456 = bytes.fromhex("837dbb152e9b079010717e84e865da4ebc0fa198a806d59d31bf15accef22d0e")  # N45 L6
# Heads.  n = 1: the lone leaf.  n = 2: N01.  n = 3: k = 2, so node(N01, L2).
# n = 5: k = 4, so node(N0123, L4).  n = 7: k = 4, so node(N0123, MTH(d4..d6)) where
# MTH(d4..d6) has k = 2: node(N45, L6) = N456.
ROOT1 = L0
ROOT2 = N01
ROOT3 = bytes.fromhex("aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77")
ROOT5 = bytes.fromhex("4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4")
ROOT7 = bytes.fromhex("ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c")
EMPTY = bytes.fromhex("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")


def test_hand_derived_leaf_and_node_hashes() -> None:
    assert [merkle.leaf_hash(d) for d in D] == [L0, L1, L2, L3, L4, L5, L6]
    assert merkle.node_hash(L0, L1) == N01
    assert merkle.node_hash(L2, L3) == N23
    assert merkle.node_hash(L4, L5) == N45
    assert merkle.node_hash(N01, N23) == N0123
    assert merkle.node_hash(N45, L6) == N456
    assert merkle.node_hash(N01, L2) == ROOT3
    assert merkle.node_hash(N0123, L4) == ROOT5
    assert merkle.node_hash(N0123, N456) == ROOT7


@pytest.mark.parametrize(
    ("n", "head"), [(0, EMPTY), (1, ROOT1), (2, ROOT2), (3, ROOT3), (5, ROOT5), (7, ROOT7)]
)
def test_hand_derived_heads(n: int, head: bytes) -> None:
    assert merkle.root(D[:n]) == head
    assert merkle.Tree(D).root(n) == head


# Proofs derived by hand from the RFC's recursion:
#   PATH(5, D7): k = 4, 5 ≥ 4 → PATH(1, d4..d6) + [N0123]; PATH(1, d4..d6): k = 2 →
#     PATH(1, d4 d5) + [L6]; PATH(1, d4 d5) = [L4].  So [L4, L6, N0123].
#   PATH(6, D7) = PATH(2, d4..d6) + [N0123] = [N45, N0123].
#   PATH(2, D3) = PATH(0, d2) + [N01] = [N01].
#   PATH(0, D5) = PATH(0, D4) + [L4] = [L1, N23, L4].
#   PROOF(3, D7): k = 4, 3 ≤ 4 → SUBPROOF(3, D4, true) + [N456]; SUBPROOF(3, D4, true): k = 2,
#     3 > 2 → SUBPROOF(1, d2 d3, false) + [N01] = [L2, L3, N01].  So [L2, L3, N01, N456].
#   PROOF(2, D5) = SUBPROOF(2, D4, true) + [L4] = [N23, L4].
#   PROOF(4, D7) = SUBPROOF(4, D4, true) + [N456] = [N456].
#   PROOF(1, D3): k = 2 → SUBPROOF(1, D2, true) + [L2] = [L1, L2].
INCLUSIONS = [
    (5, 7, [L4, L6, N0123], ROOT7),
    (6, 7, [N45, N0123], ROOT7),
    (2, 3, [N01], ROOT3),
    (0, 5, [L1, N23, L4], ROOT5),
    (0, 1, [], ROOT1),
]
CONSISTENCIES = [
    (3, 7, [L2, L3, N01, N456], ROOT3, ROOT7),
    (2, 5, [N23, L4], ROOT2, ROOT5),
    (4, 7, [N456], N0123, ROOT7),
    (1, 3, [L1, L2], ROOT1, ROOT3),
    (5, 7, merkle.consistency_proof(D, 5), ROOT5, ROOT7),
]


@pytest.mark.parametrize(("index", "size", "proof", "head"), INCLUSIONS)
def test_hand_derived_inclusion_proofs(
    index: int, size: int, proof: list[bytes], head: bytes
) -> None:
    assert merkle.inclusion_proof(D[:size], index) == proof
    assert merkle.verify_inclusion(index, size, merkle.leaf_hash(D[index]), proof, head) is None


@pytest.mark.parametrize(("size1", "size2", "proof", "head1", "head2"), CONSISTENCIES)
def test_hand_derived_consistency_proofs(
    size1: int, size2: int, proof: list[bytes], head1: bytes, head2: bytes
) -> None:
    assert merkle.consistency_proof(D[:size2], size1) == proof
    assert merkle.verify_consistency(size1, size2, proof, head1, head2) is None


def test_consistency_5_to_7_by_hand() -> None:
    # PROOF(5, D7): k = 4, 5 > 4 → SUBPROOF(1, d4..d6, false) + [N0123];
    # SUBPROOF(1, d4..d6, false): k = 2 → SUBPROOF(1, d4 d5, false) + [L6];
    # SUBPROOF(1, d4 d5, false): k = 1 → SUBPROOF(1, d4, false) + [L5] = [L4, L5].
    assert merkle.consistency_proof(D, 5) == [L4, L5, L6, N0123]


# ---------------------------------------------------------------------------------------
# Against the RFC's definitions, exhaustively up to 64 leaves.


def test_heads_and_proofs_equal_the_rfc_definitions_up_to_64_leaves() -> None:
    data = _leaves(64)
    tree = merkle.Tree(data)
    for n in range(65):
        prefix = data[:n]
        head = rfc_mth(prefix)
        assert merkle.root(prefix) == head == tree.root(n)
        for m in range(n):
            proof = rfc_path(m, prefix)
            assert tree.inclusion_proof(m, n) == proof
            merkle.verify_inclusion(m, n, merkle.leaf_hash(prefix[m]), proof, head)
        for m in range(1, n):
            proof = rfc_proof(m, prefix)
            assert tree.consistency_proof(m, n) == proof
            merkle.verify_consistency(m, n, proof, tree.root(m), head)


def test_module_functions_take_raw_leaf_data() -> None:
    data = _leaves(11)
    assert merkle.inclusion_proof(data, 4) == rfc_path(4, data)
    assert merkle.consistency_proof(data, 6) == rfc_proof(6, data)
    assert merkle.consistency_proof(data, 11) == []
    assert merkle.consistency_proof(data, 0) == []
    with pytest.raises(ValueError, match="not in a tree of 11"):
        merkle.inclusion_proof(data, 11)
    with pytest.raises(ValueError, match="no consistency proof"):
        merkle.consistency_proof(data, 12)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=40), min_size=1, max_size=70), st.data())
def test_any_leaves_any_index_match_the_rfc(leaves: list[bytes], data: st.DataObject) -> None:
    n = len(leaves)
    index = data.draw(st.integers(0, n - 1))
    head = rfc_mth(leaves)
    assert merkle.root(leaves) == head
    proof = merkle.inclusion_proof(leaves, index)
    assert proof == rfc_path(index, leaves)
    merkle.verify_inclusion(index, n, merkle.leaf_hash(leaves[index]), proof, head)
    size1 = data.draw(st.integers(1, n))
    proof = merkle.consistency_proof(leaves, size1)
    assert proof == (rfc_proof(size1, leaves) if size1 < n else [])
    merkle.verify_consistency(size1, n, proof, rfc_mth(leaves[:size1]), head)


# ---------------------------------------------------------------------------------------
# Tampering: every byte flipped, truncated, extended, reordered, wrong sizes.


def _tampered(proof: list[bytes]) -> list[tuple[str, list[bytes]]]:
    out: list[tuple[str, list[bytes]]] = []
    for i, element in enumerate(proof):
        for j in range(len(element)):
            flipped = bytearray(element)
            flipped[j] ^= 0x01
            out.append((f"byte {j} of hash {i}", [*proof[:i], bytes(flipped), *proof[i + 1 :]]))
        out.append((f"hash {i} cut short", [*proof[:i], element[:-1], *proof[i + 1 :]]))
        out.append((f"hash {i} one byte long", [*proof[:i], element + b"\0", *proof[i + 1 :]]))
    if proof:
        out.append(("last hash dropped", proof[:-1]))
        out.append(("first hash dropped", proof[1:]))
    out.append(("a hash appended", [*proof, proof[-1] if proof else EMPTY]))
    out.append(("a hash prepended", [proof[0] if proof else EMPTY, *proof]))
    for i in range(len(proof) - 1):
        swapped = list(proof)
        swapped[i], swapped[i + 1] = swapped[i + 1], swapped[i]
        if swapped != proof:
            out.append((f"hashes {i} and {i + 1} swapped", swapped))
    if len(proof) > 2:
        out.append(("reversed", proof[::-1]))
    return out


def _refused(verify: Callable[..., None], args: tuple[object, ...], what: str) -> None:
    with pytest.raises(IntegrityError):
        verify(*args)
        pytest.fail(f"accepted a proof with {what}")


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 8, 13, 16])
def test_every_tampered_inclusion_proof_is_refused(size: int) -> None:
    data = _leaves(size)
    head = merkle.root(data)
    wrong_head = merkle.root([*data[:-1], b"rewritten"])
    verify = merkle.verify_inclusion
    for index in range(size):
        proof = merkle.inclusion_proof(data, index)
        leaf = merkle.leaf_hash(data[index])
        for what, bad in _tampered(proof):
            _refused(verify, (index, size, leaf, bad, head), what)
        other = merkle.leaf_hash(data[index] + b"!")
        _refused(verify, (index, size, other, proof, head), "another leaf")
        _refused(verify, (index, size, leaf, proof, wrong_head), "another head")
        if size > 1:
            _refused(verify, ((index + 1) % size, size, leaf, proof, head), "another index")


@pytest.mark.parametrize("size2", [2, 3, 5, 7, 8, 9, 16, 17])
def test_every_tampered_consistency_proof_is_refused(size2: int) -> None:
    data = _leaves(size2)
    tree = merkle.Tree(data)
    forked = merkle.Tree([b"rewritten", *data[1:]])
    head2 = tree.root()
    verify = merkle.verify_consistency
    for size1 in range(1, size2):
        head1 = tree.root(size1)
        proof = tree.consistency_proof(size1)
        for what, bad in _tampered(proof):
            _refused(verify, (size1, size2, bad, head1, head2), what)
        # A log that rewrote an old entry cannot prove it only appended.
        _refused(verify, (size1, size2, proof, forked.root(size1), head2), "a rewritten tree")
        _refused(verify, (size1, size2, proof, head2, head1), "swapped heads")
        _refused(verify, (size1 + 1, size2, proof, head1, head2), "another size1")
        # (size2 + 1 can pass, as for inclusion: the sizes come from signed heads.)


@settings(max_examples=80, deadline=None)
@given(st.integers(2, 64), st.data())
def test_any_single_bit_flip_is_refused(n: int, data: st.DataObject) -> None:
    leaves = _leaves(n)
    tree = merkle.Tree(leaves)
    index = data.draw(st.integers(0, n - 1))
    proof = tree.inclusion_proof(index)
    size1 = data.draw(st.integers(1, n - 1))
    cproof = tree.consistency_proof(size1)
    which = data.draw(st.integers(0, len(proof) - 1))
    bit = data.draw(st.integers(0, 255))
    bad = [bytearray(p) for p in proof]
    bad[which][bit // 8] ^= 1 << (bit % 8)
    with pytest.raises(IntegrityError):
        merkle.verify_inclusion(
            index, n, merkle.leaf_hash(leaves[index]), [bytes(b) for b in bad], tree.root()
        )
    which = data.draw(st.integers(0, len(cproof) - 1))
    cbad = [bytearray(p) for p in cproof]
    cbad[which][bit // 8] ^= 1 << (bit % 8)
    with pytest.raises(IntegrityError):
        merkle.verify_consistency(size1, n, [bytes(b) for b in cbad], tree.root(size1), tree.root())


# ---------------------------------------------------------------------------------------
# Malformed input.

H = merkle.leaf_hash(b"x")


@pytest.mark.parametrize(
    ("index", "size", "leaf", "proof", "head", "why"),
    [
        (0, 0, H, [], H, "not in a tree of 0"),
        (1, 1, H, [], H, "not in a tree of 1"),
        (-1, 3, H, [H, H], H, "not in a tree of 3"),
        (0, 1, H[:31], [], H, "leaf hash must be a 32-byte"),
        (0, 1, H, [], H + b"\0", "tree head must be a 32-byte"),
        (0, 2, H, [H[:16]], H, "proof element 0"),
        (0, 2, H, [], H, "too short"),
        (0, 1, H, [H], H, "extra hashes"),
        (0, 1, H, [], merkle.leaf_hash(b"y"), "not in the tree"),
    ],
)
def test_malformed_inclusion_input_is_refused(
    index: int, size: int, leaf: bytes, proof: list[bytes], head: bytes, why: str
) -> None:
    with pytest.raises(IntegrityError, match=why):
        merkle.verify_inclusion(index, size, leaf, proof, head)


@pytest.mark.parametrize(
    ("size1", "size2", "proof", "head1", "head2", "why"),
    [
        (3, 2, [H], H, H, "cannot be a prefix"),
        (-1, 2, [H], H, H, "negative"),
        (0, 5, [H], EMPTY, H, "empty tree"),
        (2, 5, [], H, H, "empty consistency proof"),
        (2, 2, [H], H, H, "need an empty proof"),
        (2, 2, [], H, merkle.leaf_hash(b"y"), "forked"),
        (2, 3, [H], H[:-1], H, "first tree head"),
        (2, 3, [H], H, b"", "second tree head"),
        (2, 3, [b"short"], H, H, "proof element 0"),
    ],
)
def test_malformed_consistency_input_is_refused(
    size1: int, size2: int, proof: list[bytes], head1: bytes, head2: bytes, why: str
) -> None:
    with pytest.raises(IntegrityError, match=why):
        merkle.verify_consistency(size1, size2, proof, head1, head2)


def test_equal_sizes_with_equal_heads_hold() -> None:
    assert merkle.verify_consistency(0, 0, [], EMPTY, EMPTY) is None
    assert merkle.verify_consistency(7, 7, [], ROOT7, ROOT7) is None


def test_an_inclusion_proof_does_not_bind_the_tree_size() -> None:
    # RFC 9162's verifier computes the same for (0, 3) and (0, 4): the size and the head must
    # come from a signed tree head, never from whoever supplies the proof (docs/export.md).
    proof = merkle.inclusion_proof(D[:3], 0)
    merkle.verify_inclusion(0, 4, L0, proof, ROOT3)


def test_tree_appends_incrementally_and_keeps_old_heads() -> None:
    tree = merkle.Tree()
    heads = [tree.root()]
    for i, d in enumerate(D):
        assert tree.append(d) == i
        heads.append(tree.root())
    assert heads == [EMPTY, ROOT1, ROOT2, ROOT3, N0123, ROOT5, heads[6], ROOT7]
    assert [tree.root(n) for n in range(8)] == heads
    with pytest.raises(ValueError, match="no tree of size 8"):
        tree.root(8)
    with pytest.raises(ValueError, match="32 bytes"):
        tree.append_hash(b"short")
