"""torchvision's ``roi_align`` and its backward, and ``nms``, on the lazy device.

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

``torchvision::nms`` (``batched_nms``: Faster R-CNN's RPN, per image) ran
eager's kernel on the host: a counted fallback that read the boxes. Here it
is eager's greedy pass on the device (:func:`nms`): the pairs' overlaps in
the kernel's arithmetic, then a loop over the boxes in score order carrying
which are still alive, so the program has no shape of the answer and every
call with as many boxes runs it again; the kept indices' count is the one
value read (the result's shape is its values', as in eager). It is not a
decomposition through ``torch._decomp``'s path: torchvision's meta kernel
refuses meta tensors for a data-dependent shape, so dispatch takes it from
:func:`handler`.
"""

from __future__ import annotations

import torch

from . import fallback


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


def _max(a, b):  # std::max(a, b): (a < b) ? b : a
    return torch.where(a < b, b, a)


def _min(a, b):  # std::min(a, b): (b < a) ? b : a
    return torch.where(b < a, b, a)


NMS_BOXES = 2048
"""The most boxes :func:`nms` takes on the device (its overlaps are an
``[N, N]`` value: 4M pairs here); more run eager's kernel (a counted
fallback), which needs O(N) memory."""


def nms(dets, scores, iou_threshold):
    """``torchvision::nms`` on the device: eager's CPU kernel's greedy pass
    (``csrc/ops/cpu/nms_kernel.cpp``) with its arithmetic. Boxes are visited
    in ``scores.sort(stable=True, descending=True)``'s order; a visited box not
    suppressed is kept and suppresses every later box whose overlap
    ``inter / (area_i + area_j - inter)`` (float, compared in double with the
    threshold) is over it. The overlaps of all pairs are one ``[N, N]``
    value; the visit is a loop of N steps carrying which boxes are still
    alive (one program, no shape of the answer in it); the kept indices are
    ``order[alive]``, whose count is the one value read."""
    if not (dets.dtype in (torch.float32, torch.float64) and scores.dtype == dets.dtype and dets.dim() == 2
            and dets.shape[1] == 4 and scores.dim() == 1 and scores.shape[0] == dets.shape[0]
            and dets.shape[0] <= NMS_BOXES):
        return NotImplemented  # eager's checks and messages; many boxes: eager's kernel, O(N) memory
    import lazycore

    n = dets.shape[0]
    if n == 0:
        return torch.empty((0,), dtype=torch.int64, device=dets.device)
    order = torch.sort(scores, stable=True, descending=True).indices
    x1, y1, x2, y2 = dets.unbind(1)
    areas = (x2 - x1) * (y2 - y1)
    x1, y1, x2, y2, areas = (t[order] for t in (x1, y1, x2, y2, areas))
    zero = torch.zeros((), dtype=dets.dtype, device=dets.device)
    w = _max(zero, _min(x2[:, None], x2[None, :]) - _max(x1[:, None], x1[None, :]))
    h = _max(zero, _min(y2[:, None], y2[None, :]) - _max(y1[:, None], y1[None, :]))
    inter = w * h
    over = (inter / (areas[:, None] + areas[None, :] - inter)).to(torch.float64) > iou_threshold
    at = torch.arange(n, device=dets.device)
    suppresses = over & (at[None, :] > at[:, None])  # [i, j]: kept box i suppresses later box j

    def visit(i, alive):
        row = suppresses.index_select(0, i.reshape(1))[0]
        return alive & ~(row & alive.index_select(0, i.reshape(1)))

    alive = lazycore.fori_loop(0, n, visit, torch.ones(n, dtype=torch.bool, device=dets.device))
    return order[alive]


def decomposition(func):
    """The decomposition of a torchvision op here, or ``None``."""
    name = getattr(getattr(func, "_schema", None), "name", None)
    if name == "torchvision::roi_align":
        return roi_align
    if name == "torchvision::_roi_align_backward":
        return roi_align_backward
    return None


def _nms_handler(func, args, kwargs):
    out = nms(*args, **kwargs)
    if out is NotImplemented:
        return fallback.run(func, args, kwargs)
    return out


def handler(func):
    """The dispatch handler of a torchvision op whose result's shape is given
    by its values (``nms``): run here, with no meta call (torchvision's meta
    kernel refuses meta tensors) and no recording; ``None`` for other ops."""
    name = getattr(getattr(func, "_schema", None), "name", None)
    return _nms_handler if name == "torchvision::nms" else None
