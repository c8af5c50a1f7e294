"""Peak dense BF16 throughput of the GPU types the planner knows, from the vendors' datasheets."""

from __future__ import annotations

from types import MappingProxyType

from onecluster.errors import ValidationError

__all__ = ["PEAK_TFLOPS", "peak_tflops"]

#: Dense (no sparsity) BF16 tensor-core TFLOP/s of the SXM parts.  NVIDIA datasheets: H100
#: SXM 989 (1,979 with sparsity), H200 SXM 989 (same compute as H100), H800 SXM 989 (H100
#: compute, narrower NVLink), A100 312, L40S 362.  With H100 at MFU 0.40 these give the
#: 4.35 s step of ``fabric.md`` §4.6 (70B, 4 Mi tokens, 1,024 GPUs).
PEAK_TFLOPS: MappingProxyType[str, float] = MappingProxyType(
    {"H100": 989.0, "H200": 989.0, "H800": 989.0, "A100": 312.0, "L40S": 362.0}
)


def peak_tflops(gpu_type: str, override: float | None = None) -> float:
    """The peak TFLOP/s to plan with: ``override`` when given, else the table's figure.

    Raises :class:`ValidationError` for a GPU type the table lacks and no override.
    """
    if override is not None:
        return override
    peak = PEAK_TFLOPS.get(gpu_type.upper())
    if peak is None:
        msg = f"the planner has no peak throughput for GPU type {gpu_type!r}"
        raise ValidationError(
            msg,
            hint=f"known types: {', '.join(PEAK_TFLOPS)}; or give --gpu-tflops (dense BF16)",
        )
    return peak
