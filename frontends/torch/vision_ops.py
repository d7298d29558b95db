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

``torchvision::deform_conv2d`` and its backward (DCNv1, and DCNv2 with a
mask) ran eager's kernel too: two counted fallbacks a training step. They
are decompositions now (:func:`deform_conv2d`, :func:`deform_conv2d_backward`)
with the arithmetic of ``csrc/ops/cpu/deform_conv2d_kernel.cpp``: the
sampled columns (bilinear reads, 0 outside ``(-1, size)``) times the weight
per group; col2im's scatter-add into the pixels within 1 of each sample and
col2im_coord's offset and mask gradients. The sums run in XLA's order, not
the kernel's (within float rounding of eager). Other types, an empty batch
and shapes eager refuses run eager's kernel (its errors).
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
    hw = (1.0 - lw.to(torch.float64)).to(dtype)  # eager: T hy = 1. - ly, a double difference
    zero = torch.zeros((), dtype=dtype, device=start.device)
    return low, high, torch.where(inside, hw, zero), torch.where(inside, lw, zero), inside


def _samples(rois, dtype, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned, height, width):
    """The corners each sample reads and their weights, shaped to broadcast as
    [K, C, PH, PW, IY, IX]: ``(batch index, [(y, x, weight)] * 4, inside)``, inside:
    which samples are within ``[-1, size]`` both ways."""
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
                   (ys(yh), xs(xl), w(wyh, wxl)), (ys(yh), xs(xh), w(wyh, wxh))], both


def roi_align(input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned):
    if not _ok(input, rois, sampling_ratio):
        return NotImplemented
    _, channels, height, width = input.shape
    if not rois.shape[0]:  # a level of MultiScaleRoIAlign no box chose
        return input.new_zeros((0, channels, pooled_height, pooled_width))
    batch, corners, _ = _samples(rois, input.dtype, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned,
                              height, width)
    c = torch.arange(channels, device=input.device)[None, :, None, None, None, None]
    val = None
    for y, x, w in corners:
        term = w * input[batch, c, y, x]
        val = term if val is None else val + term
    # eager's loop: output_val = 0, each sample added in turn (iy, then ix), then / count
    out = torch.zeros(val.shape[:-2], dtype=val.dtype, device=val.device)
    for iy in range(sampling_ratio):
        for ix in range(sampling_ratio):
            out = out + val[..., iy, ix]
    return out / max(sampling_ratio * sampling_ratio, 1)


def roi_align_backward(grad, rois, spatial_scale, pooled_height, pooled_width, batch_size, channels, height, width,
                       sampling_ratio, aligned):
    if not rois.shape[0] and grad.dtype in (torch.float32, torch.float64):  # no box: no gradient
        return grad.new_zeros((batch_size, channels, height, width))
    if not _ok(grad, rois, sampling_ratio):
        return NotImplemented
    batch, corners, inside = _samples(rois, grad.dtype, spatial_scale, pooled_height, pooled_width, sampling_ratio,
                                      aligned, height, width)
    c = torch.arange(channels, device=grad.device)[None, :, None, None, None, None, None]
    g = grad[:, :, :, :, None, None, None]
    count = max(sampling_ratio * sampling_ratio, 1)
    out = torch.zeros((batch_size, channels, height, width), dtype=grad.dtype, device=grad.device)
    # one scatter-add whose terms come in eager's order (box, channel, bin, sample, the four
    # corners): the additions into a pixel are eager's, in its order; a sample outside the
    # map adds nothing (eager skips it: not a zero weight times an infinite gradient).
    # The indices broadcast together ([K, C, PH, PW, IY, IX, 4], as the values): not
    # expanded first, so each index's bounds check reads the index itself, and none
    # slices a row out of the boxes' dimension (a padded count of boxes: such a slice
    # refused the padding, issue 39)
    y = torch.stack([y for y, _, _ in corners], -1)
    x = torch.stack([x for _, x, _ in corners], -1)
    w = torch.stack([w for _, _, w in corners], -1)
    terms = torch.where(inside[..., None], (g * w) / count, torch.zeros((), dtype=grad.dtype, device=grad.device))
    return out.index_put((batch[..., None], c, y, x), terms, accumulate=True)


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
    ``order[alive]``, whose count is the one value read.

    Where the number of boxes varies at the caller's line (Faster R-CNN's
    boxes left per image: a padded count, ops/indexing.py's columns), the
    pass runs over the boxes written into its bucket's size (:func:`_in_bucket`),
    so every count of a bucket is one program: the rows past the count have
    score ``-inf`` and come after every box in the stable order, and a later
    box suppresses nothing, so the boxes' visit and what they keep are the
    count's own; the rows past it are left out of the answer."""
    if not (dets.dtype in (torch.float32, torch.float64) and scores.dtype == dets.dtype and dets.dim() == 2
            and dets.shape[1] == 4 and scores.dim() == 1 and scores.shape[0] == dets.shape[0]
            and dets.shape[0] <= NMS_BOXES):
        return NotImplemented  # eager's checks and messages; many boxes: eager's kernel, O(N) memory
    import lazycore

    count = dets.shape[0]
    if count == 0:
        return torch.empty((0,), dtype=torch.int64, device=dets.device)
    dets, scores = _in_bucket(dets, scores)
    n = dets.shape[0]
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

    # the overlaps are carried, not closed over: a body's digest holds the values
    # it closes over, so the loop is then the same whatever graph computed them
    # (every count of a bucket one program)
    def visit(i, carried):
        alive, sup = carried
        row = sup.index_select(0, i.reshape(1))[0]
        return alive & ~(row & alive.index_select(0, i.reshape(1))), sup

    alive = lazycore.fori_loop(0, n, visit, (torch.ones(n, dtype=torch.bool, device=dets.device), suppresses))[0]
    if n != count:
        alive = alive & (order < count)  # (the rows past the count: not boxes)
    return order[alive]


def _in_bucket(dets, scores):
    """``dets`` and ``scores`` written into the first rows of their count's
    bucket (zero boxes, ``-inf`` scores past it), once the count has varied
    at the caller's line and the bucket is at most :data:`NMS_BOXES`; else
    as they are. Written by ``index_put`` at ``arange(count)``: in a padded
    graph the count is a symbol and these rows' program is every count's."""
    from lazycore.runtime import buckets
    from lazycore.trace.scalar_policy import POLICY

    count = dets.shape[0]
    size = buckets.bucket(count) if count >= 2 else None
    if size is None or size == count or size > NMS_BOXES or not POLICY.varies(("nms", dets.dtype), (count,)):
        return dets, scores
    rows = (torch.arange(count, device=dets.device),)
    dets = dets.new_zeros((size, 4)).index_put(rows, dets)
    scores = scores.new_full((size,), float("-inf")).index_put(rows, scores)
    return dets, scores


def decomposition(func):
    """The decomposition of a torchvision op here, or ``None``."""
    name = getattr(getattr(func, "_schema", None), "name", None)
    if name == "torchvision::roi_align":
        return roi_align
    if name == "torchvision::_roi_align_backward":
        return roi_align_backward
    return _DEFORM.get(name)


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


# --- deform_conv2d ------------------------------------------------------------------------------


def _deform_ok(input, weight, offset, mask, bias, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, n_weight_grps,
               n_offset_grps, use_mask) -> bool:
    """The shapes eager's kernel accepts (its checks and messages otherwise), float32/float64, a batch."""
    if not (input.dtype in (torch.float32, torch.float64) and all(
            t.dtype == input.dtype for t in (weight, offset, mask, bias))):
        return False
    if input.dim() != 4 or offset.dim() != 4 or weight.dim() != 4 or (use_mask and mask.dim() != 4):
        return False
    b, cin, h, w = input.shape
    cout, _, kh, kw = weight.shape
    if min(kh, kw, stride_h, stride_w, dil_h, dil_w, n_weight_grps, n_offset_grps) <= 0 or min(pad_h, pad_w) < 0:
        return False
    oh = (h + 2 * pad_h - (dil_h * (kh - 1) + 1)) // stride_h + 1
    ow = (w + 2 * pad_w - (dil_w * (kw - 1) + 1)) // stride_w + 1
    return (b > 0 and oh > 0 and ow > 0 and weight.shape[1] * n_weight_grps == cin and cout % n_weight_grps == 0
            and cin % n_offset_grps == 0 and tuple(offset.shape) == (b, n_offset_grps * 2 * kh * kw, oh, ow)
            and bias.shape == (cout,)
            and (not use_mask or tuple(mask.shape) == (b, n_offset_grps * kh * kw, oh, ow)))


class _Deform:
    """Where deform_conv2d samples and what it reads there, as eager's CPU
    kernel (``csrc/ops/cpu/deform_conv2d_kernel.cpp``) computes it: a sample of
    kernel tap ``(i, j)`` at output ``(oy, ox)`` is at ``y = (oy * stride -
    pad + i * dilation) + offset_y`` (an integer, then the offset added in the
    input's type), likewise ``x``. Values per ``[B, offset group, channel in
    the group, tap, oh, ow]``."""

    def __init__(self, input, offset, kh, kw, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups):
        b, cin, h, w = input.shape
        oh, ow = offset.shape[-2:]
        dev, dtype = input.device, input.dtype
        self.shape = (b, groups, cin // groups, kh * kw, oh, ow)
        self.h, self.w = h, w
        k = torch.arange(kh * kw, device=dev)
        base_y = (torch.arange(oh, device=dev) * stride_h - pad_h)[None, :, None] + ((k // kw) * dil_h)[:, None, None]
        base_x = (torch.arange(ow, device=dev) * stride_w - pad_w)[None, None, :] + ((k % kw) * dil_w)[:, None, None]
        off = offset.reshape(b, groups, kh * kw, 2, oh, ow)
        self.y = (base_y.to(dtype) + off[:, :, :, 0])[:, :, None]  # [B, G, 1, K, oh, ow]
        self.x = (base_x.to(dtype) + off[:, :, :, 1])[:, :, None]
        self.y_low, self.x_low = torch.floor(self.y), torch.floor(self.x)
        # the four corners (low/high y, low/high x), read by one gather; 0 off the map
        yy = torch.stack([self.y_low, self.y_low, self.y_low + 1, self.y_low + 1])
        xx = torch.stack([self.x_low, self.x_low + 1, self.x_low, self.x_low + 1])
        ok = (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
        idx = (yy.clamp(0, h - 1) * w + xx.clamp(0, w - 1)).to(torch.int64).expand((4,) + self.shape)
        flat = input.reshape(1, b, groups, cin // groups, h * w).expand(4, -1, -1, -1, -1)
        v = torch.gather(flat, 4, idx.reshape(*idx.shape[:4], -1)).reshape(idx.shape)
        v = torch.where(ok, v, torch.zeros((), dtype=dtype, device=dev))
        self.corner = {(0, 0): v[0], (0, 1): v[1], (1, 0): v[2], (1, 1): v[3]}

    def bilinear(self):
        """bilinear_interpolate: 0 outside ``(-1, size)``, else the four
        corners' weighted sum in the kernel's order."""
        y, x = self.y, self.x
        lh, lw = y - self.y_low, x - self.x_low
        hh, hw = 1 - lh, 1 - lw
        c = self.corner
        val = hh * hw * c[0, 0] + hh * lw * c[0, 1] + lh * hw * c[1, 0] + lh * lw * c[1, 1]
        outside = (y <= -1) | (y >= self.h) | (x <= -1) | (x >= self.w)
        return torch.where(outside, torch.zeros((), dtype=val.dtype, device=val.device), val)

    def coordinate_weights(self):
        """get_coordinate_weight in y and in x (no outer bound: a corner inside the map counts)."""
        c = self.corner
        dx, dy = self.x - self.x_low, self.y - self.y_low
        wy = dx * (c[1, 1] - c[0, 1]) + (1 - dx) * (c[1, 0] - c[0, 0])
        wx = dy * (c[1, 1] - c[1, 0]) + (1 - dy) * (c[0, 1] - c[0, 0])
        return wy, wx


def _deform_columns(sample, mask, use_mask, shape):
    val = sample.bilinear()
    if use_mask:
        b, groups, _, taps, oh, ow = shape
        val = mask.reshape(b, groups, 1, taps, oh, ow) * val
    return val


def deform_conv2d(input, weight, offset, mask, bias, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, n_weight_grps,
                  n_offset_grps, use_mask):
    """``torchvision::deform_conv2d``: the sampled columns (eager's im2col
    values) times the weight per weight group, plus the bias."""
    if not _deform_ok(input, weight, offset, mask, bias, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, n_weight_grps,
                      n_offset_grps, use_mask):
        return NotImplemented
    b, cin = input.shape[:2]
    cout, _, kh, kw = weight.shape
    s = _Deform(input, offset, kh, kw, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, n_offset_grps)
    oh, ow = s.shape[-2:]
    cols = _deform_columns(s, mask, use_mask, s.shape).reshape(b, n_weight_grps, cin // n_weight_grps * kh * kw,
                                                                  oh * ow)
    w = weight.reshape(n_weight_grps, cout // n_weight_grps, -1)
    out = torch.matmul(w, cols).reshape(b, cout, oh, ow)
    return out + bias.reshape(1, cout, 1, 1)


def deform_conv2d_backward(grad, input, weight, offset, mask, bias, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w,
                           n_weight_grps, n_offset_grps, use_mask):
    """``torchvision::_deform_conv2d_backward``: the columns' gradient
    (weight transposed times the output's), then eager's col2im (each sample
    adds ``mask * (1 - |y - yp|) * (1 - |x - xp|) * column`` into the
    in-bounds pixels within 1 of it), col2im_coord (offsets: mask times the
    coordinate weight times the column, summed over the group's channels;
    mask: the column times the bilinear value) and the weight's gradient
    (the output's times the columns)."""
    if not _deform_ok(input, weight, offset, mask, bias, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, n_weight_grps,
                      n_offset_grps, use_mask) or grad.dtype != input.dtype:
        return NotImplemented
    b, cin, h, w = input.shape
    cout, _, kh, kw = weight.shape
    s = _Deform(input, offset, kh, kw, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, n_offset_grps)
    shape = s.shape
    oh, ow = shape[-2:]
    taps = kh * kw
    g = grad.reshape(b, n_weight_grps, cout // n_weight_grps, oh * ow)
    wt = weight.reshape(n_weight_grps, cout // n_weight_grps, -1)
    col_grad = torch.matmul(wt.transpose(1, 2), g).reshape(shape)
    m = mask.reshape(b, n_offset_grps, 1, taps, oh, ow) if use_mask else None

    wy, wx = s.coordinate_weights()
    gy = (wy * col_grad if m is None else m * wy * col_grad).sum(2)
    gx = (wx * col_grad if m is None else m * wx * col_grad).sum(2)
    grad_offset = torch.stack([gy, gx], 3).reshape(offset.shape)
    val = s.bilinear()
    grad_mask = (col_grad * val).sum(2).reshape(mask.shape) if use_mask else torch.zeros_like(mask)

    # col2im: each sample's column into the (up to four) pixels within 1 of it, one scatter-add
    zero = torch.zeros((), dtype=input.dtype, device=input.device)
    bc = (torch.arange(b, device=input.device)[:, None] * cin
          + torch.arange(cin, device=input.device)[None, :]).reshape(b, n_offset_grps, cin // n_offset_grps, 1, 1, 1)
    yp = torch.stack([s.y_low, s.y_low, s.y_low + 1, s.y_low + 1])
    xp = torch.stack([s.x_low, s.x_low + 1, s.x_low, s.x_low + 1])
    ay, ax = (s.y - yp).abs(), (s.x - xp).abs()
    ok = (yp >= 0) & (yp < h) & (xp >= 0) & (xp < w) & (ay < 1) & (ax < 1)
    weight_ = (1 - ay) * (1 - ax)
    term = weight_ * col_grad if m is None else m * weight_ * col_grad
    idx = (bc * h + yp.clamp(0, h - 1).to(torch.int64)) * w + xp.clamp(0, w - 1).to(torch.int64)
    flat = torch.zeros((b * cin * h * w,), dtype=input.dtype, device=input.device)
    flat = flat.index_put((idx.expand((4,) + shape).reshape(-1),), torch.where(ok, term, zero).reshape(-1),
                          accumulate=True)
    grad_input = flat.reshape(b, cin, h, w)

    cols = _deform_columns(s, mask, use_mask, shape).reshape(b, n_weight_grps, cin // n_weight_grps * taps, oh * ow)
    grad_weight = torch.matmul(g, cols.transpose(2, 3)).sum(0).reshape(weight.shape)
    grad_bias = torch.ones_like(bias) * grad.sum((0, 2, 3))
    return grad_input, grad_weight, grad_offset, grad_mask, grad_bias


_DEFORM = {"torchvision::deform_conv2d": deform_conv2d,
           "torchvision::_deform_conv2d_backward": deform_conv2d_backward}
