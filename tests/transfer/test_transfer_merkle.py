"""The Merkle tree: RFC 6962's shape, and proofs that verify only what they should."""

from __future__ import annotations

from blake3 import blake3
from hypothesis import given
from hypothesis import strategies as st

from onecluster.transfer import inclusion_proof, leaf_hash, merkle_root, verify_inclusion


def _recursive(leaves: list[bytes]) -> bytes:
    """RFC 6962 §2.1's definition, written out."""
    if not leaves:
        return blake3(b"").digest()
    if len(leaves) == 1:
        return leaves[0]
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return blake3(b"\x01" + _recursive(leaves[:k]) + _recursive(leaves[k:])).digest()


leaf_lists = st.lists(st.binary(min_size=1, max_size=8), min_size=1, max_size=40).map(
    lambda xs: [leaf_hash(x) for x in xs]
)


@given(leaf_lists)
def test_the_root_is_rfc_6962s_tree(leaves: list[bytes]) -> None:
    assert merkle_root(leaves) == _recursive(leaves)


@given(leaf_lists, st.data())
def test_every_leaf_has_a_proof_that_verifies_and_only_for_it(
    leaves: list[bytes], data: st.DataObject
) -> None:
    root = merkle_root(leaves)
    index = data.draw(st.integers(0, len(leaves) - 1))
    proof = inclusion_proof(leaves, index)
    assert verify_inclusion(leaves[index], index, len(leaves), proof, root)
    assert not verify_inclusion(leaf_hash(b"other"), index, len(leaves), proof, root)
    if len(leaves) > 1:
        other = (index + 1) % len(leaves)
        assert leaves[other] == leaves[index] or not verify_inclusion(
            leaves[other], index, len(leaves), proof, root
        )


def test_a_leaf_never_passes_for_a_node() -> None:
    a, b = leaf_hash(b"a"), leaf_hash(b"b")
    assert merkle_root([a, b]) != leaf_hash(a + b)
    assert merkle_root([]) == blake3(b"").digest()
