"""Updates on the wire: every width decodes to within its step, and a bad payload is refused."""

from __future__ import annotations

import struct

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from onecluster.errors import IntegrityError
from onecluster.training._codec import decode, encode, encoded_size


@pytest.mark.parametrize("bits", [32, 16, 8, 4])
@pytest.mark.parametrize("numel", [1, 15, 4096, 5000])
def test_a_vector_comes_back_within_one_quantisation_step(bits: int, numel: int) -> None:
    v = torch.randn(numel, generator=torch.Generator().manual_seed(numel))
    payload = encode(v, bits, 64)
    assert len(payload) == encoded_size(numel, bits, 64)
    back = decode(payload, numel, bits, 64)
    if bits == 32:
        assert torch.equal(back, v)
        return
    for lo in range(0, numel, 64):
        block = v[lo : lo + 64]
        step = (
            block.abs().max() / ((1 << (bits - 1)) - 1) if bits < 16 else 1e-3 * block.abs().max()
        )
        assert (back[lo : lo + 64] - block).abs().max() <= step / 2 + 1e-6


def test_int8_is_a_quarter_of_fp32_and_int4_an_eighth() -> None:
    n = 4096 * 10
    assert encoded_size(n, 32, 4096) == 4 * n
    assert encoded_size(n, 8, 4096) == n + 40
    assert encoded_size(n, 4, 4096) == n // 2 + 40


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.floats(-6e4, 6e4, allow_nan=False, width=32), min_size=1, max_size=300),
    st.sampled_from([16, 8, 4]),
)
def test_decoding_is_the_inverse_of_encoding_up_to_the_block_scale(
    values: list[float], bits: int
) -> None:
    v = torch.tensor(values, dtype=torch.float32)
    back = decode(encode(v, bits, 16), len(values), bits, 16)
    assert back.shape == v.shape and torch.isfinite(back).all()
    scale = v.abs().max().item()
    assert (back - v).abs().max().item() <= scale / (
        (1 << (min(bits, 8) - 1)) - 1
    ) + 1e-3 * scale + 1e-6


def test_a_non_finite_update_is_never_sent() -> None:
    with pytest.raises(IntegrityError, match="not finite"):
        encode(torch.tensor([1.0, float("nan")]), 8, 16)
    with pytest.raises(IntegrityError, match="overflows fp16"):
        encode(torch.tensor([1e9]), 16, 16)


def test_a_payload_of_the_wrong_size_or_a_non_finite_scale_is_refused() -> None:
    payload = encode(torch.ones(100), 8, 16)
    with pytest.raises(IntegrityError, match="bytes"):
        decode(payload[:-1], 100, 8, 16)
    bad = struct.pack("<f", float("inf")) + payload[4:]
    with pytest.raises(IntegrityError, match="not finite"):
        decode(bad, 100, 8, 16)
    nan = torch.tensor([float("nan")] * 4).numpy().tobytes()
    with pytest.raises(IntegrityError, match="not finite"):
        decode(nan, 4, 32, 16)
