"""uint8 bilinear and bicubic resampling (``F.interpolate``'s modes without antialiasing)
as eager's CPU kernel computes them, in fixed point.

Eager (``aten/src/ATen/native/cpu/UpSampleKernel.cpp``: the AVX2
``upsample_avx_bilinear_bicubic_uint8`` for up to 4 channels, the separable generic
kernel beyond; one arithmetic) resamples the width, then the height (an axis whose
size stays is not resampled), each pass rounded back to uint8:

- per output position, its taps' weights in double (``_compute_indices_min_size_weights``:
  bilinear's two ``1 - |j - lambda|``, bicubic's four of Keys' cubic with a = -0.75, a tap
  past a border adding its weight to the border's);
- the weights scaled to int16 by ``2**precision``, the precision the largest below 22
  whose largest weight, doubled, stays under ``2**15``
  (``_compute_index_ranges_int16_weights``), rounded half away from zero;
- the integer sum ``2**(precision - 1) + sum(w * x)`` shifted right by the precision
  and clamped to [0, 255].

Integer sums are exact in any order, so this is eager's answer bit for bit (every
size, channel count and layout probed). ``torch._decomp``'s float interpolation,
which the other types keep, was one level off in 358 of 1,536 values (bilinear) and
9 of 1,440 (bicubic).
"""

from __future__ import annotations

import numpy as np
import torch
from torch._decomp import decomposition_table
from torch._prims_common import suggest_memory_format

from .ops.upsample import _area_scale, _fixed_point, _guard, _source_index

aten = torch.ops.aten


def decomposition(func):
    """The decomposition here for ``func``, or ``None``."""
    return _MODES.get(func)


def _linear_filter(x):
    x = np.abs(x)
    return np.where(x < 1.0, 1.0 - x, 0.0)


def _cubic_filter(x):
    """``HelperInterpCubic::aa_filter`` without antialiasing: Keys' cubic with a = -0.75."""
    a = -0.75
    x = np.abs(x)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = (((x - 5) * x + 8) * x - 4) * a
    return np.where(x < 1.0, near, np.where(x < 2.0, far, 0.0))


def _taps(in_size: int, out_size: int, align_corners: bool, scale, interp: int, filt):
    """Per output position: its ``interp`` taps (clamped into the input), their int16
    weights (0 past the position's ``index_size``), and the precision."""
    t = np.float64
    ratio = _area_scale(in_size, out_size, align_corners, scale, t)
    index, lam = _guard(_source_index(ratio, out_size, align_corners, interp > 2, t), in_size, t)
    support = interp // 2
    lowest = index - support + 1  # (unbounded: a tap past a border adds its weight to the border's)
    first = np.maximum(lowest, 0)
    size = np.clip(np.minimum(index + support + 1, in_size) - first, 0, interp)
    rows = np.arange(out_size)
    weights = np.zeros((out_size, interp))
    at = np.zeros(out_size, np.int64)
    wt_max = 0.0
    for j in range(interp):  # (eager's loop over j, every position at once)
        at = np.where(lowest + j <= 0, 0, np.where(lowest + j >= in_size - 1, size - 1, at))
        weights[rows, at] += filt(float(j + 1 - support) - lam)
        wt_max = max(wt_max, float(weights[rows, at].max(initial=0.0)))
        at = at + 1
    j = np.arange(interp)[None, :]
    return _fixed_point(np.minimum(first[:, None] + j, in_size - 1), weights, j < size[:, None], wt_max)


def _pass(x, dim: int, taps, weights, precision: int):
    """One pass of eager's uint8 kernel along ``dim`` (a uint8 result)."""
    out, k = taps.shape
    picked = x.to(torch.int32).index_select(dim, torch.as_tensor(taps.reshape(-1), device=x.device))
    picked = picked.unflatten(dim, (out, k))
    shape = [1] * picked.dim()
    shape[dim], shape[dim + 1] = out, k
    w = torch.as_tensor(weights, dtype=torch.int32, device=x.device).reshape(shape)
    total = (picked * w).sum(dim + 1, dtype=torch.int32)
    return ((total + (1 << (precision - 1))) >> precision).clamp(0, 255).to(torch.uint8)


def _resampling(func, interp: int, filt):
    floats = decomposition_table[func]

    def resample(x, output_size, align_corners, scales_h=None, scales_w=None):
        if x.dtype != torch.uint8 or x.dim() != 4:
            return floats(x, output_size, align_corners, scales_h, scales_w)
        scales = (scales_h, scales_w)
        h = x
        for i in (1, 0):  # width first
            dim = 2 + i
            if x.shape[dim] != output_size[i]:
                h = _pass(h, dim, *_taps(x.shape[dim], output_size[i], align_corners, scales[i], interp, filt))
        return h.contiguous(memory_format=suggest_memory_format(x))  # (torch._decomp's layout too)

    return resample


_MODES = {
    aten.upsample_bilinear2d.default: _resampling(aten.upsample_bilinear2d.default, 2, _linear_filter),
    aten.upsample_bicubic2d.default: _resampling(aten.upsample_bicubic2d.default, 4, _cubic_filter),
}
"""The uint8 resamplings here (their float types: torch._decomp's decompositions)."""
