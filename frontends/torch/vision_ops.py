"""torchvision's ``roi_align`` and its backward on the lazy device.

``torchvision.ops.roi_align`` (Faster/Mask R-CNN's ``MultiScaleRoIAlign``)
reaches ``torchvision::roi_align`` and autograd its ``_roi_align_backward``;
both ran eager's CPU kernel before (two counted fallbacks a training step,
each a barrier; issue 39). With a fixed sampling grid (``sampling_ratio > 0``,
``MultiScaleRoIAlign``'s 2) every sample point of every bin is known by its
place, so the op is gathers and the backward ``index_put_`` with
``accumulate=True``, run here as a decomposition (its pieces are lazy ops);
no boxes (a level of ``MultiScaleRoIAlign`` no box chose) gives zeros.

The arithmetic is eager's CPU kernel's (torchvision's
``csrc/ops/cpu/roi_align_kernel.cpp``): a box's corners are scaled in
double and rounded to the input's type, a sample's place is
``start + ph * bin + (iy + .5) * bin / grid``, a sample outside
``[-1, size]`` adds nothing, one below 0 is read at 0, one in the last row or
column reads it alone; the four bilinear weights are ``hy * hx``,
``hy * lx``, ``ly * hx``, ``ly * lx``; the bin is the mean over its grid, and
the backward adds ``grad * w / count`` into each corner. (torchvision's own
pure-Python ``_roi_align`` follows the CUDA kernel and keeps the samples
outside the map, so it is not used.)

An adaptive grid (``sampling_ratio <= 0``: its size per box is the box's
size, a value), an empty input and types other than float32 and
float64 run eager's kernel (counted fallbacks).
"""

from __future__ import annotations

import torch


def _ok(x, rois, sampling_ratio) -> bool:
    return sampling_ratio > 0 and x.dtype in (torch.float32, torch.float64) and rois.dtype == x.dtype and x.numel() > 0


def _axis(start, bin_size, pooled: int, grid: int, size: int):
    """Per box, bin and sample along one axis ([K, P, G] each): the low and
    high index read, their weights (0 for a sample outside ``[-1, size]``)."""
    dtype = start.dtype
    p = torch.arange(pooled, device=start.device).to(dtype)
    i = torch.arange(grid, device=start.device).to(dtype) + 0.5
    b = bin_size[:, None, None]
    v = (start[:, None, None] + p[None, :, None] * b) + (i[None, None, :] * b) / grid
    inside = (v >= -1.0) & (v <= size)
    v = v.clamp(min=0)
    low = v.to(torch.int64)
    last = low >= size - 1
    low = torch.where(last, size - 1, low)
    high = torch.where(last, size - 1, low + 1)
    v = torch.where(last, low.to(dtype), v)
    lw = v - low.to(dtype)
    hw = 1.0 - lw
    zero = torch.zeros((), dtype=dtype, device=start.device)
    return low, high, torch.where(inside, hw, zero), torch.where(inside, lw, zero), inside


def _samples(rois, dtype, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned, height, width):
    """The corners each sample reads and their weights, shaped to broadcast as
    [K, C, PH, PW, IY, IX]: ``(batch index, [(y, x, weight)] * 4)``."""
    offset = 0.5 if aligned else 0.0
    corners = (rois[:, 1:].to(torch.float64) * spatial_scale - offset).to(dtype)  # eager: double, then T
    start_w, start_h, end_w, end_h = corners.unbind(1)
    roi_w, roi_h = end_w - start_w, end_h - start_h
    if not aligned:
        roi_w, roi_h = roi_w.clamp(min=1.0), roi_h.clamp(min=1.0)
    yl, yh, wyl, wyh, yin = _axis(start_h, roi_h / pooled_height, pooled_height, sampling_ratio, height)
    xl, xh, wxl, wxh, xin = _axis(start_w, roi_w / pooled_width, pooled_width, sampling_ratio, width)

    def ys(t):  # [K, PH, IY] -> [K, 1, PH, 1, IY, 1]
        return t[:, None, :, None, :, None]

    def xs(t):  # [K, PW, IX] -> [K, 1, 1, PW, 1, IX]
        return t[:, None, None, :, None, :]

    both = ys(yin) & xs(xin)
    zero = torch.zeros((), dtype=dtype, device=rois.device)

    def w(a, b):  # eager's w = hy * hx, 0 outside
        return torch.where(both, ys(a) * xs(b), zero)

    batch = rois[:, 0].to(torch.int64)[:, None, None, None, None, None]
    return batch, [(ys(yl), xs(xl), w(wyl, wxl)), (ys(yl), xs(xh), w(wyl, wxh)),
                   (ys(yh), xs(xl), w(wyh, wxl)), (ys(yh), xs(xh), w(wyh, wxh))]


def roi_align(input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned):
    if not _ok(input, rois, sampling_ratio):
        return NotImplemented
    _, channels, height, width = input.shape
    if not rois.shape[0]:  # a level of MultiScaleRoIAlign no box chose
        return input.new_zeros((0, channels, pooled_height, pooled_width))
    batch, corners = _samples(rois, input.dtype, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned,
                              height, width)
    c = torch.arange(channels, device=input.device)[None, :, None, None, None, None]
    val = None
    for y, x, w in corners:
        term = w * input[batch, c, y, x]
        val = term if val is None else val + term
    return val.sum((-2, -1)) / max(sampling_ratio * sampling_ratio, 1)


def roi_align_backward(grad, rois, spatial_scale, pooled_height, pooled_width, batch_size, channels, height, width,
                       sampling_ratio, aligned):
    if not rois.shape[0] and grad.dtype in (torch.float32, torch.float64):  # no box: no gradient
        return grad.new_zeros((batch_size, channels, height, width))
    if not _ok(grad, rois, sampling_ratio):
        return NotImplemented
    batch, corners = _samples(rois, grad.dtype, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned,
                              height, width)
    c = torch.arange(channels, device=grad.device)[None, :, None, None, None, None]
    g = grad[:, :, :, :, None, None]
    count = max(sampling_ratio * sampling_ratio, 1)
    shape = (rois.shape[0], channels, pooled_height, pooled_width, sampling_ratio, sampling_ratio)
    out = torch.zeros((batch_size, channels, height, width), dtype=grad.dtype, device=grad.device)
    for y, x, w in corners:
        idx = tuple(t.expand(shape) for t in (batch, c, y, x))
        out = out.index_put(idx, ((g * w) / count).expand(shape), accumulate=True)
    return out


def decomposition(func):
    """The decomposition of a torchvision op here, or ``None``."""
    name = getattr(getattr(func, "_schema", None), "name", None)
    if name == "torchvision::roi_align":
        return roi_align
    if name == "torchvision::_roi_align_backward":
        return roi_align_backward
    return None
