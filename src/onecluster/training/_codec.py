"""Updates on the wire: a flat fp32 vector as fp32, fp16, or int8/int4 with one fp32 scale
per block of values (absmax), and back.  Decoding checks the payload's size and that every
value is finite, so a corrupt or diverged update is refused, never averaged in."""

from __future__ import annotations

import torch

from onecluster.errors import IntegrityError

__all__ = ["decode", "encode", "encoded_size"]


def _levels(bits: int) -> int:
    return (1 << (bits - 1)) - 1  # 127 for int8, 7 for int4


def encoded_size(numel: int, bits: int, block: int) -> int:
    """Bytes that :func:`encode` makes of ``numel`` values."""
    if bits == 32:
        return 4 * numel
    if bits == 16:
        return 2 * numel
    blocks = -(-numel // block)
    values = numel if bits == 8 else -(-numel // 2)
    return 4 * blocks + values


def encode(vector: torch.Tensor, bits: int, block: int) -> bytes:
    """``vector`` (1-D fp32) in ``bits`` per value; raises :class:`IntegrityError` when it holds
    a value that is not finite (the site's own model diverged: nothing is sent)."""
    flat = vector.detach().to(torch.float32).reshape(-1).contiguous()
    if not bool(torch.isfinite(flat).all()):
        bad = int((~torch.isfinite(flat)).sum())
        raise IntegrityError(f"the update holds {bad} values that are not finite (NaN or inf)")
    if bits == 32:
        return flat.numpy().tobytes()
    if bits == 16:
        half = flat.to(torch.float16)
        if not bool(torch.isfinite(half).all()):
            raise IntegrityError("the update overflows fp16 (a value beyond ±65504); use bits 32")
        return half.numpy().tobytes()
    numel = flat.numel()
    blocks = -(-numel // block)
    padded = torch.zeros(blocks * block, dtype=torch.float32)
    padded[:numel] = flat
    grid = padded.view(blocks, block)
    scales = grid.abs().amax(dim=1)
    scales = torch.where(scales > 0, scales, torch.ones_like(scales))
    levels = _levels(bits)
    q = torch.round(grid / scales[:, None] * levels).clamp(-levels, levels).to(torch.int8)
    q = q.reshape(-1)[:numel]
    if bits == 8:
        body = q.numpy().tobytes()
    else:
        nibbles = (q + 8).to(torch.uint8)
        if numel % 2:
            nibbles = torch.cat([nibbles, torch.full((1,), 8, dtype=torch.uint8)])
        pairs = nibbles.view(-1, 2)
        body = (pairs[:, 0] | (pairs[:, 1] << 4)).numpy().tobytes()
    return scales.numpy().tobytes() + body


def decode(payload: bytes, numel: int, bits: int, block: int) -> torch.Tensor:
    """The fp32 vector of ``numel`` values that :func:`encode` made ``payload`` of;
    :class:`IntegrityError` when the size is wrong or a value is not finite."""
    expected = encoded_size(numel, bits, block)
    if len(payload) != expected:
        msg = f"the update is {len(payload)} bytes; {numel} values at {bits} bits are {expected}"
        raise IntegrityError(msg)
    data = bytearray(payload)  # writable, so torch shares it without a warning
    if bits == 32:
        out = torch.frombuffer(data, dtype=torch.float32).clone()
    elif bits == 16:
        out = torch.frombuffer(data, dtype=torch.float16).to(torch.float32)
    else:
        blocks = -(-numel // block)
        scales = torch.frombuffer(data, dtype=torch.float32, count=blocks).clone()
        body = data[4 * blocks :]
        if bits == 8:
            q = torch.frombuffer(body, dtype=torch.int8).to(torch.float32)
        else:
            packed = torch.frombuffer(body, dtype=torch.uint8)
            pairs = torch.stack([packed & 0x0F, packed >> 4], dim=1).reshape(-1)[:numel]
            q = pairs.to(torch.float32) - 8
        if not bool(torch.isfinite(scales).all()):
            raise IntegrityError("the update has a block scale that is not finite")
        padded = torch.zeros(blocks * block, dtype=torch.float32)
        padded[:numel] = q
        out = (padded.view(blocks, block) * (scales[:, None] / _levels(bits))).reshape(-1)[:numel]
    if not bool(torch.isfinite(out).all()):
        bad = int((~torch.isfinite(out)).sum())
        raise IntegrityError(f"the update holds {bad} values that are not finite (NaN or inf)")
    return out
