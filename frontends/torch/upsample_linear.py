"""``F.interpolate``'s linear, bilinear and trilinear modes (float32, float64) as eager's
CPU kernel computes them: ``lazycore::linear_resample`` (lowered in
:mod:`.ops.upsample`, which says the arithmetic), told which of eager's two kernels
the call reaches. Other types, a machine whose eager kernels are built without fused
multiply-adds, an empty input and a channels-last 3d input (eager's vectorized 3d
kernel, not reproduced) take the decomposition they took before (uint8's in
:mod:`.resize_uint8`, torch._decomp's)."""

from __future__ import annotations

import torch
from torch._decomp import decomposition_table
from torch._prims_common import suggest_memory_format

from . import resize_uint8

aten = torch.ops.aten

_SPATIAL = {aten.upsample_linear1d.default: ("scales",),
            aten.upsample_bilinear2d.default: ("scales_h", "scales_w"),
            aten.upsample_trilinear3d.default: ("scales_d", "scales_h", "scales_w")}


def decomposition(func):
    """The decomposition here for ``func``, or ``None``."""
    names = _SPATIAL.get(func)
    if names is None:
        return None
    other = resize_uint8.decomposition(func) or decomposition_table[func]

    def resample(x, output_size, align_corners, *scales, **kwargs):
        scales = tuple(scales) + tuple(kwargs.get(n) for n in names[len(scales):])
        channels_last = _channels_last_kernel(x, output_size)
        if channels_last is None:
            return other(x, output_size, align_corners, *scales)
        out = torch.ops.lazycore.linear_resample(x, list(output_size), [float(s or 0.0) for s in scales],
                                                 bool(align_corners), channels_last)
        return out if x.dim() == 3 else out.contiguous(memory_format=suggest_memory_format(x))

    return resample


def _channels_last_kernel(x, output_size):
    """Whether eager's CPU kernel for ``x`` is the 2d channels-last one (else the generic
    one); ``None`` where the call is not ours."""
    if x.dtype not in (torch.float32, torch.float64) or x.numel() == 0:
        return None
    if not torch.backends.cpu.get_cpu_capability().startswith("AVX"):
        return None  # (built without contraction: no fused multiply-adds to match)
    channels = x.shape[1]
    if x.dim() == 5:
        return None if x.is_contiguous(memory_format=torch.channels_last_3d) and channels > 3 else False
    if x.dim() != 4:
        return False
    # eager's _use_vectorized_kernel_cond_2d, and its one-thread RGB case
    return bool((x.is_contiguous(memory_format=torch.channels_last) and channels > 3)
                or output_size[0] + output_size[1] <= 128 or (torch.get_num_threads() == 1 and channels == 3))
