"""Ops real code reached the fallback with, as decompositions on lazy tensors.

Each had no lowering and no entry in ``torch._decomp``, so every call ran
eager's CPU kernel on materialized inputs (a counted fallback, a barrier):

- ``_pdist_forward`` (``torch.pdist``): the rows' differences for every pair
  ``i < j`` in eager's order (row-major over the upper triangle), then the
  p-norm eager's kernel takes for ``p`` (0: the count of differing
  coordinates, 1, 2, inf, else ``sum(|d|^p)^(1/p)``); ``_pdist_backward`` (its
  training step) with eager's per-pair gradient formulas.
- ``_cdist_backward`` (``torch.cdist``'s gradient: Chamfer losses, prototypical
  networks, an RBF kernel's lengthscale): the same per-pair formulas, summed over
  the second operand's rows in eager's order.
- ``unique_consecutive``: where each element (or slice along ``dim``) differs
  from the one before it is a lazy mask; its nonzero positions are the one
  number-dependent part, read as a boolean mask's are (the frontend's
  ``nonzero`` of a mask: one read, no fallback, see ``ops/indexing.py``); the
  values are a gather at those positions, the inverse a cumulative sum of the
  mask, the counts the gaps between the positions. Eager's outputs, also
  those it returns empty when not asked.
- ``grid_sampler_2d_backward`` (``F.grid_sample``'s gradient: RAFT's
  correlation lookups and flow warping, spatial transformers) for bilinear
  sampling with zero or border padding: eager's kernel's formulas (the four
  corners' weights, out-of-range corners adding nothing, the grid's
  gradient from the corner values' differences times the unnormalization's
  factor, 0 where border padding clipped the coordinate); other modes stay
  eager's kernel.
- ``_unique2`` (``torch.unique`` without ``dim``, and so array-api-compat's
  ``unique_values``/``unique_counts``/``unique_inverse`` that scikit-learn's
  label handling calls on torch arrays: 5-16 fallbacks a metric): as eager's
  CPU kernel, always sorted (a stable sort, NaN last), each NaN its own value
  with a count of 1, ``-0.0`` and ``0.0`` one value (the first in sorted
  order); the group starts are a mask's nonzero positions (one read, as
  ``unique_consecutive``'s), the inverse the starts' running count sent back
  through the sort's permutation; empty inverse and counts where not asked.
- ``bincount`` (``torch.bincount``: scikit-learn's ``f1_score``,
  ``confusion_matrix`` and class weights on torch arrays): the length,
  ``max(x) + 1`` or ``minlength``, is the one number-dependent part, read at
  the call with the smallest value (one read, as ``nonzero``'s count; a
  negative one raises eager's ``RuntimeError``); the counts (or the weights'
  sums) are a lazy ``index_add`` in the input's order, as eager's loop adds
  them. Eager's dtypes: ``int64`` counts, ``float32`` sums of ``float32``
  weights, ``float64`` sums of any other weights, and ``int64`` zeros of
  ``minlength`` for an empty input, weights or not; its errors in its order
  (an input not integral: ``NotImplementedError``; ``minlength < 0``, a
  non-1-D input, weights of another length: ``RuntimeError``). Complex
  weights (eager drops their imaginary parts with a warning) stay eager's
  kernel.
- ``rrelu_with_noise`` (``nn.RReLU``, ``F.rrelu``): in eval mode
  ``leaky_relu`` with slope ``(lower + upper) / 2`` (eager's kernel calls
  exactly that); in training mode ``noise`` gets a uniform draw in
  ``[lower, upper)`` where ``x <= 0`` and 1 elsewhere, and the result is
  ``x * noise``, as eager's kernel does (from the lazy device's generator:
  eager's own draws come from the CPU's).
- ``linalg_matrix_exp`` (``torch.linalg.matrix_exp``, and so
  ``parametrizations.orthogonal``'s default map for square weights, forward
  and backward: its derivative is the exponential of a block matrix): eager's
  CPU algorithm (``mexp`` in ``aten/src/ATen/native/LinearAlgebra.cpp``, Bader,
  Blanes and Casas' optimized Taylor polynomials of degree 1, 2, 4, 8, 12, 18
  with their coefficients). Eager picks a matrix's degree from its 1-norm on
  the host; here every degree is computed and each matrix takes its own with
  ``where`` (no read), and the squarings of the scaled degree-18 polynomial
  (as many as ``ceil(log2(norm / theta18))``, per matrix) are one
  ``lazycore.while_loop``.
- ``_trilinear`` (``nn.Bilinear``, ``F.bilinear``, forward and backward: its
  gradients are ``_trilinear`` calls too): eager's two contractions, the
  first two operands over the summed dimensions the third lacks, then that
  with the third over the rest (``sumproduct_pair``, a matrix product each,
  here an ``einsum`` of two operands), without eager's loop over
  ``unroll_dim``'s slices (each slice's product is the same numbers).
- ``multi_margin_loss`` is ``torch._decomp``'s, whose result for a 0-d
  target with ``reduction="none"`` has shape ``(1,)`` where eager's kernel
  returns a 0-d tensor (so do PyTorch's meta kernels); it is reshaped to
  eager's. ``multi_margin_loss_backward`` (its gradient): eager's kernel's formula, ``h = g`` for
  ``p = 1`` or ``2 * g * z`` for ``p = 2`` where ``z = margin - x[y] + x[d] > 0``
  (``g = 1 / (n * dim)`` for the mean, else ``1 / dim``), times the target's
  weight, the target's own entry minus the others' sum, times the output's
  gradient.
- ``adaptive_max_pool2d`` / ``adaptive_max_pool3d`` whose windows do not
  tile the input (``torch._decomp`` takes global and evenly divided ones, as
  ``max_pool*_with_indices``, and left these to eager's kernel): eager's
  windows (``floor(o * L / O)`` to ``ceil((o + 1) * L / O)``) one dimension at a
  time from the last, each window's elements gathered and scanned in order
  as eager's loop does (a later element wins if greater, or if it is NaN;
  from -inf, so a window of -inf keeps its first index): row-major order's
  first maximum (or last NaN) is the last dimension's within the earlier
  ones'. A global one (output size 1) is ``amax`` and the first ``argmax``,
  or the last NaN's index (``torch._decomp``'s took the first NaN's).
- ``adaptive_max_pool2d_backward`` / ``adaptive_max_pool3d_backward``
  (``nn.AdaptiveMaxPool1d/2d/3d``'s gradient; the forwards are
  ``torch._decomp``'s): each output's gradient added at its maximum's index
  within its plane, as eager's kernel does.
- ``logspace`` in float64 (``torch._decomp``'s is ``base ** linspace``, and
  eager's linspace kernel fuses its multiply-adds: a third of the values one
  ulp off): eager's logspace loop, ``pow(base, start + step * i)`` below
  ``steps // 2`` and ``pow(base, end - step * (steps - 1 - i))`` from there,
  each exponent a double product and sum rounded apart. Other types keep
  ``torch._decomp``'s (eager's float32 formula is not known here).
"""

from __future__ import annotations

import math

import torch

aten = torch.ops.aten


# --- pdist ---------------------------------------------------------------------------------------


def _vector_lanes(dtype):
    """How many ``dtype`` elements eager's CPU vectors hold (``Vectorized<T>::size()``), and
    whether its full-vector sum is a halving tree (``VecReduceAllSIMD``: float on AVX2/AVX512)
    rather than lane by lane."""
    capability = torch.backends.cpu.get_cpu_capability()
    width = 64 if capability.startswith("AVX512") else 32
    return width // dtype.itemsize, dtype is torch.float32 and capability.startswith("AVX")


def _map2_reduce_sum(t):
    """``t`` (pairs, m) summed over its last dim in the order of eager's ``map2_reduce_all``
    (``aten/src/ATen/cpu/vec/functional_base.h``): under one vector, element after element;
    else lane-wise over whole vectors, the last partial one into its first lanes, then the
    vector's lanes (a halving tree, or lane after lane)."""
    pairs, m = t.shape
    lanes, tree = _vector_lanes(t.dtype)
    if m == 0:
        return torch.zeros((pairs,), dtype=t.dtype, device=t.device)
    if m < lanes:
        acc = t[:, 0]
        for k in range(1, m):
            acc = acc + t[:, k]
        return acc
    acc = t[:, :lanes]
    for c in range(1, m // lanes):
        acc = acc + t[:, c * lanes:(c + 1) * lanes]
    rest = m % lanes
    if rest:
        acc = torch.cat([acc[:, :rest] + t[:, m - rest:], acc[:, rest:]], dim=1)
    if tree:
        width = lanes
        while width > 1:
            width //= 2
            acc = acc[:, :width] + acc[:, width:2 * width]
        return acc[:, 0]
    total = acc[:, 0]
    for k in range(1, lanes):
        total = total + acc[:, k]
    return total


def _pdist_forward(x, p=2.0):
    n = x.shape[0]
    if n < 2:
        return torch.empty((0,), dtype=x.dtype, device=x.device)
    i, j = torch.triu_indices(n, n, offset=1).unbind(0)
    i, j = i.to(x.device), j.to(x.device)
    d = (x[i] - x[j]).abs()
    if p == float("inf"):
        return d.amax(-1) if x.shape[1] else torch.zeros((d.shape[0],), dtype=x.dtype, device=x.device)
    if p == 0:
        return _map2_reduce_sum(d.ceil().clamp(max=1))
    if p == 1:
        return _map2_reduce_sum(d)
    if p == 2:
        return _map2_reduce_sum(d * d).sqrt()
    # std::pow(agg, 1.0 / p): a float sum to a double power, rounded back
    return _map2_reduce_sum(d.pow(p)).double().pow(1.0 / p).to(x.dtype)


def _pdist_backward(grad, x, p, pdist):
    """Eager's per-pair gradient (``DistanceOpsKernel.cpp``'s ``backward`` of each norm), added
    to the first row of the pair and taken from the second; every formula is odd in the
    difference, so row ``t`` sums the pair terms of ``x[t] - x[s]`` over ``s != t`` (in
    XLA's order of that sum: eager adds them row after row)."""
    n, m = x.shape
    if n < 2 or p == 0:
        return torch.zeros_like(x)
    i, j = torch.triu_indices(n, n, offset=1).unbind(0)
    pair = torch.zeros((n, n), dtype=torch.int64)
    pair[i, j] = torch.arange(i.shape[0])
    pair[j, i] = torch.arange(i.shape[0])
    pair = pair.to(x.device)
    g, dist = grad[pair].unsqueeze(-1), pdist[pair].unsqueeze(-1)
    diff = x.unsqueeze(1) - x.unsqueeze(0)
    sign = torch.sign(diff)
    zero = torch.zeros_like(diff)
    if p == 1:
        r = g * sign
    elif p == 2:
        r = torch.where(dist == 0, zero, g * diff / dist)
    elif p == float("inf"):
        r = g * sign * (1 - torch.clamp((diff.abs() - dist).abs().ceil(), max=1))
    elif p < 2:
        r = torch.where(dist == 0, zero, sign * diff.abs().pow(p - 1) * g / dist.pow(p - 1))
    else:
        r = torch.where(dist == 0, zero, diff * diff.abs().pow(p - 2) * g / dist.pow(p - 1))
    off_diagonal = ~torch.eye(n, dtype=torch.bool, device=x.device).unsqueeze(-1)
    return torch.where(off_diagonal, r, zero).sum(1)


def _cdist_backward(grad, x1, x2, p, cdist):
    """``torch.cdist``'s gradient for ``x1`` (autograd asks again with the operands swapped for
    ``x2``): eager's per-pair formulas (``DistanceOpsKernel.cpp``'s ``backward`` of each norm, as
    :func:`_pdist_backward`) summed over ``x2``'s rows; the shape is ``x1``'s with the batch dims
    broadcast (``_cdist_backward``: autograd reduces the broadcast)."""
    *batch, r1, r2 = grad.shape
    m = x1.shape[-1]
    shape = (*batch, r1, m)
    if r1 == 0 or r2 == 0 or m == 0 or p == 0 or math.prod(batch) == 0:
        return torch.zeros(shape, dtype=x1.dtype, device=x1.device)
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    g, dist = grad.unsqueeze(-1), cdist.unsqueeze(-1)
    sign = torch.sign(diff)
    zero = torch.zeros((), dtype=diff.dtype, device=diff.device)
    if p == 1:
        r = g * sign
    elif p < 2:
        r = torch.where(dist == 0, zero, sign * diff.abs().pow(p - 1) * g / dist.pow(p - 1))
        if p < 1:
            r = torch.where(diff == 0, zero, r)
    elif p == 2:
        r = torch.where(dist == 0, zero, g * diff / dist)
    elif p == float("inf"):
        r = g * sign * (1 - torch.clamp((diff.abs() - dist).abs().ceil(), max=1))
    else:
        r = torch.where(dist == 0, zero, diff * diff.abs().pow(p - 2) * g / dist.pow(p - 1))
    if r2 > _CDIST_SEQUENTIAL_ROWS:
        return r.sum(-2).expand(shape)
    # eager adds x2's rows one after another into a zeroed result (backward_down_column_cdist)
    acc = torch.zeros((), dtype=r.dtype, device=r.device) + r.select(-2, 0)
    for j in range(1, r2):
        acc = acc + r.select(-2, j)
    return acc.expand(shape)


_CDIST_SEQUENTIAL_ROWS = 64  # x2's rows added in eager's order up to here (a node each), XLA's sum beyond


# --- unique_consecutive ----------------------------------------------------------------------


def _unique_consecutive(x, return_inverse=False, return_counts=False, dim=None):
    long = dict(dtype=torch.int64, device=x.device)
    if dim is None:
        flat = x.reshape(-1)
        n = flat.shape[0]
        if n == 0:
            empty = torch.empty((0,), **long)
            return flat, empty, empty
        change = torch.cat([torch.ones((1,), dtype=torch.bool, device=x.device), flat[1:] != flat[:-1]])
        starts = torch.nonzero(change).reshape(-1)
        values = flat[starts]
        inverse = (torch.cumsum(change, 0) - 1).reshape(x.shape) if return_inverse else torch.empty((0,), **long)
        counts = (torch.diff(starts, append=torch.full((1,), n, **long)) if return_counts
                  else torch.empty((0,), **long))
        return values, inverse, counts
    d = dim % max(x.dim(), 1)
    n = x.shape[d]
    if n == 0:
        return x, torch.empty((0,), **long), torch.empty((0,), **long)
    moved = x.movedim(d, 0).reshape(n, -1)
    differs = (moved[1:] != moved[:-1]).any(-1) if moved.shape[1] else torch.zeros((n - 1,), dtype=torch.bool,
                                                                                      device=x.device)
    change = torch.cat([torch.ones((1,), dtype=torch.bool, device=x.device), differs])
    starts = torch.nonzero(change).reshape(-1)
    values = x.index_select(d, starts)
    inverse = torch.cumsum(change, 0) - 1
    counts = torch.diff(starts, append=torch.full((1,), n, **long))
    return values, inverse, counts


def _unique2(x, sorted=True, return_inverse=False, return_counts=False):
    long = dict(dtype=torch.int64, device=x.device)
    flat = x.reshape(-1)
    n = flat.shape[0]
    empty = torch.zeros((0,), **long)
    if n == 0:
        return flat.clone(), (torch.zeros(x.shape, **long) if return_inverse else empty), empty
    keys = flat.to(torch.uint8) if x.dtype == torch.bool else flat
    ordered, perm = torch.sort(keys, stable=True)
    change = torch.cat([torch.ones((1,), dtype=torch.bool, device=x.device), ordered[1:] != ordered[:-1]])
    starts = torch.nonzero(change).reshape(-1)
    values = flat.index_select(0, perm.index_select(0, starts))
    inverse = empty
    if return_inverse:
        inverse = torch.zeros((n,), **long).scatter(0, perm, torch.cumsum(change, 0) - 1).reshape(x.shape)
    counts = torch.diff(starts, append=torch.full((1,), n, **long)) if return_counts else empty
    return values, inverse, counts


# --- bincount ------------------------------------------------------------------------------------

_BINCOUNT_INTS = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)
_NOT_BINCOUNTABLE = "bincount only supports 1-d non-negative integral inputs."


def _bincount(x, weights=None, minlength=0):
    if x.dtype not in _BINCOUNT_INTS:  # (eager's AT_DISPATCH_INTEGRAL_TYPES, before its checks)
        raise NotImplementedError(f'"bincount_cpu" not implemented for \'{_dtype_name(x.dtype)}\'')
    if weights is not None and weights.is_complex():
        return NotImplemented
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if x.dim() == 1 and x.shape[0] == 0:
        return torch.zeros((minlength,), dtype=torch.int64, device=x.device)
    if x.dim() != 1:
        raise RuntimeError(_NOT_BINCOUNTABLE)
    low, high = torch.stack([x.min(), x.max()]).to(torch.int64).tolist()  # the one read
    if low < 0:
        raise RuntimeError(_NOT_BINCOUNTABLE)
    if weights is not None and (weights.dim() != 1 or weights.shape[0] != x.shape[0]):
        raise RuntimeError("weights should be 1-d and have the same length as input")
    bins = max(high + 1, minlength)
    x = x if x.dtype in (torch.int32, torch.int64) else x.to(torch.int64)  # (index_add's index types)
    if weights is None:
        ones = torch.ones(x.shape, dtype=torch.int64, device=x.device)
        return torch.zeros((bins,), dtype=torch.int64, device=x.device).index_add(0, x, ones)
    dtype = torch.float32 if weights.dtype == torch.float32 else torch.float64
    return torch.zeros((bins,), dtype=dtype, device=x.device).index_add(0, x, weights.to(dtype))


def _dtype_name(dtype) -> str:
    """The name eager's dispatch macros give ``dtype`` in their errors (``Float``, ``Bool``, ``ComplexFloat``)."""
    return {torch.bool: "Bool", torch.float16: "Half", torch.bfloat16: "BFloat16", torch.float32: "Float",
            torch.float64: "Double", torch.complex64: "ComplexFloat", torch.complex128: "ComplexDouble"}.get(
        dtype, str(dtype).removeprefix("torch."))


# --- grid_sampler_2d_backward --------------------------------------------------------------------


def _grid_sampler_2d_backward(grad_output, x, grid, interpolation_mode, padding_mode, align_corners,
                              output_mask):
    if interpolation_mode != 0 or padding_mode not in (0, 1):
        return NotImplemented
    n, c, h, w = x.shape
    oh, ow = grid.shape[1:3]

    def source(coord, size):
        # eager's grid_sampler_compute_source_index_set_grad (no reflection here)
        mult = (size - 1) / 2 if align_corners else size / 2
        at = ((coord + 1) / 2) * (size - 1) if align_corners else ((coord + 1) * size - 1) / 2
        if padding_mode == 1:  # border: clip_coordinates_set_grad
            low, high = at <= 0, at >= size - 1
            return torch.where(low, 0.0, torch.where(high, float(size - 1), at)).to(at.dtype), \
                torch.where(low | high, 0.0, mult).to(at.dtype)
        return at, torch.full_like(at, mult)

    ix, gx_mult = source(grid[..., 0], w)
    iy, gy_mult = source(grid[..., 1], h)
    x0, y0 = ix.floor(), iy.floor()
    x1, y1 = x0 + 1, y0 + 1
    corners = ((x0, y0, (x1 - ix) * (y1 - iy)), (x1, y0, (ix - x0) * (y1 - iy)),
               (x0, y1, (x1 - ix) * (iy - y0)), (x1, y1, (ix - x0) * (iy - y0)))
    flat = x.reshape(n, c, h * w)
    go = grad_output.reshape(n, c, oh * ow)
    grad_input = torch.zeros_like(flat) if output_mask[0] else None
    vals = []
    for cx, cy, weight in corners:
        inside = (cx >= 0) & (cx < w) & (cy >= 0) & (cy < h)
        at = torch.where(inside, cy * w + cx, torch.zeros_like(cx)).to(torch.int64).reshape(n, 1, oh * ow)
        at = at.expand(n, c, oh * ow)
        keep = inside.reshape(n, 1, oh * ow)
        vals.append(torch.where(keep, flat.gather(2, at), torch.zeros_like(go)))
        if grad_input is not None:
            add = torch.where(keep, weight.reshape(n, 1, oh * ow) * go, torch.zeros_like(go))
            grad_input = grad_input.scatter_add(2, at, add)
    nw, ne, sw, se = vals
    dx, dy = (t.reshape(n, 1, oh * ow) for t in (ix, iy))
    ex0, ey0, ex1, ey1 = (t.reshape(n, 1, oh * ow) for t in (x0, y0, x1, y1))
    gix = (-nw * (ey1 - dy) + ne * (ey1 - dy) - sw * (dy - ey0) + se * (dy - ey0)) * go
    giy = (-nw * (ex1 - dx) - ne * (dx - ex0) + sw * (ex1 - dx) + se * (dx - ex0)) * go
    grad_grid = None
    if output_mask[1]:
        grad_grid = torch.stack([gix.sum(1).reshape(n, oh, ow) * gx_mult, giy.sum(1).reshape(n, oh, ow) * gy_mult],
                                -1)
    return (grad_input.reshape(x.shape) if grad_input is not None else None), grad_grid


# --- rrelu_with_noise ----------------------------------------------------------------------------


def _rrelu_with_noise(x, noise, lower=0.125, upper=1.0 / 3.0, training=False, generator=None):
    if not training:
        return aten.leaky_relu.default(x, (lower + upper) / 2)
    draw = torch.empty_like(x).uniform_(lower, upper, generator=generator)
    noise.copy_(torch.where(x <= 0, draw, torch.ones_like(x)))
    return x * noise


# --- linalg_matrix_exp ---------------------------------------------------------------------------

# eager's degree bounds on the 1-norm (degrees 1, 2, 4, 8, 12, 18), for float and complex64; for double
_THETAS = {
    4: (1.192092800768788e-07, 5.978858893805233e-04, 5.116619363445086e-02, 5.800524627688768e-01,
        1.461661507209034e+00, 3.010066362817634e+00),
    8: (2.220446049250313e-16, 2.580956802971767e-08, 3.397168839976962e-04, 4.991228871115323e-02,
        2.996158913811580e-01, 1.090863719290036e+00),
}
_SQRT_177 = 0.1330413469565007072504e+2
_X3 = 2.0 / 3.0
# compute_T8's x1, x2, x4, x5, x6, x7, y2
_T8 = (_X3 * ((1.0 + _SQRT_177) / 88.0), _X3 * ((1.0 + _SQRT_177) / 352.0),
       (-271.0 + 29.0 * _SQRT_177) / (315.0 * _X3), (-11.0 + 11.0 * _SQRT_177) / (1260.0 * _X3),
       (-99.0 + 11.0 * _SQRT_177) / (5040.0 * _X3), (89.0 - _SQRT_177) / (5040.0 * _X3),
       (857.0 - 58.0 * _SQRT_177) / 630.0)
_T12_B = ((9.0198e-16, 0.46932117595418237389, -0.20099424927047284052, -0.04623946134063071740),
          (5.31597895759871264183, 1.19926790417132231573, 0.01179296240992997031, 0.01108844528519167989),
          (0.18188869982170434744, 0.05502798439925399070, 0.09351590770535414968, 0.00610700528898058230),
          (-2.0861320e-13, -0.13181061013830184015, -0.02027855540589259079, -0.00675951846863086359))
_T18_B = ((0.0, -1.00365581030144618291e-01, -8.02924648241156932449e-03, -8.92138498045729985177e-04, 0.0),
          (0.0, 3.97849749499645077844e-01, 1.36783778460411720168e+00, 4.98289622525382669416e-01,
           -6.37898194594723280150e-04),
          (-1.09676396052962061844e+01, 1.68015813878906206114e+00, 5.71779846478865511061e-02,
           -6.98210122488052056106e-03, 3.34975017086070470649e-05),
          (-9.04316832390810593223e-02, -6.76404519071381882256e-02, 6.75961301770459654925e-02,
           2.95552570429315521194e-02, -1.39180257516060693404e-05),
          (0.0, 0.0, -9.23364619367118555360e-02, -1.69364939002081722752e-02, -1.40086798182036094347e-05))


def _combination(mats, coefficients):
    """``sum_j c_j * mats[j]`` (eager's ``_compute_linear_combination``: the coefficients in the
    matrices' real type, added in order)."""
    out = None
    for m, c in zip(mats, coefficients):
        if c == 0.0:
            continue
        out = m * c if out is None else out + m * c
    return out


def _powers(a, count):
    """``[I, A, A^2, A^3, A^6][:count]`` as eager's ``_fill_matrix_powers`` builds them."""
    eye = torch.eye(a.shape[-1], dtype=a.dtype, device=a.device).expand(a.shape)
    out = [eye, a]
    if count > 2:
        out.append(a @ a)
    if count > 3:
        out.append(a @ out[2])
    if count > 4:
        out.append(out[3] @ out[3])
    return out[:count]


def _taylor(a, degree):
    """Eager's ``compute_T<degree>``."""
    if degree == 1:
        eye, a1 = _powers(a, 2)
        return eye + a1
    if degree == 2:
        eye, a1, a2 = _powers(a, 3)
        return eye + a1 + a2 / 2.0
    if degree == 4:
        eye, a1, a2 = _powers(a, 3)
        return eye + a1 + a2 @ _combination([eye, a1, a2], (1 / 2.0, 1 / 6.0, 1 / 24.0))
    if degree == 8:
        x1, x2, x4, x5, x6, x7, y2 = _T8
        eye, a1, a2 = _powers(a, 3)
        a4 = a2 @ _combination([a1, a2], (x1, x2))
        a8 = _combination([a2, a4], (_X3, 1.0)) @ _combination([eye, a1, a2, a4], (x4, x5, x6, x7))
        return eye + a1 + a2 * y2 + a8
    powers = _powers(a, 4 if degree == 12 else 5)
    b = [_combination(powers, row) for row in (_T12_B if degree == 12 else _T18_B)]
    if degree == 12:
        b2 = b[2] + b[3] @ b[3]
        return b[0] + (b[1] + b2) @ b2
    b3 = b[3] + b[0] @ b[4]
    return b[1] + (b[2] + b3) @ b3


def _squared(x, times):
    """``x`` squared ``times[i]`` times for each matrix ``i`` (eager's loop of ``matmul``s), as
    one loop of the program that runs until the largest count."""
    from lazycore.trace.control import while_loop

    def body(carry):
        m, k = carry
        return torch.where((k < times)[:, None, None], m @ m, m), k + 1

    m, _ = while_loop(lambda carry: carry[1] < times.max(), body,
                      (x, torch.zeros((), dtype=times.dtype, device=x.device)))
    return m


def _linalg_matrix_exp(a):
    n = a.shape[-1]
    if n == 0:
        return a.clone()
    if n == 1:
        return a.exp()
    a3 = a.reshape(-1, n, n)
    real = a.real.dtype if a.is_complex() else a.dtype
    thetas = _THETAS[8 if real == torch.float64 else 4]
    norm = a3.abs().sum(-2).amax(-1)  # eager's operator_1_norm
    # the largest norms: degree 18 on A / 2^s, squared s times
    s = torch.ceil(torch.log2(norm / thetas[5])).clamp(min=0)
    s = torch.where(torch.isfinite(s), s, torch.zeros_like(s))  # (a NaN or infinite norm: no squaring)
    big = _squared(_taylor(a3 / torch.pow(2.0, s).to(real)[:, None, None], 18), s.to(torch.int64))
    out = torch.where((norm >= thetas[4])[:, None, None], big, torch.full_like(a3, float("nan")))
    lower = -1.0
    for theta, degree in zip(thetas[:5], (1, 2, 4, 8, 12)):
        inside = (norm > lower) & (norm <= theta) & (norm < thetas[4])
        out = torch.where(inside[:, None, None], _taylor(a3, degree), out)
        lower = theta
    return out.reshape(a.shape)


# --- _trilinear ----------------------------------------------------------------------------------


def _trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim=1):
    total = i1.dim() + len(expand1)
    e1, e2, e3, summed = ({d % total for d in ds} for ds in (expand1, expand2, expand3, sumdim))
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"[:total]

    def sub(expanded):
        return "".join(c for i, c in enumerate(letters) if i not in expanded)

    sizes = [next((t.shape[len([j for j in range(i) if j not in e])]
                   for t, e in ((i3, e3), (i2, e2), (i1, e1)) if i not in e), 0) for i in range(total)]
    out_shape = [n for i, n in enumerate(sizes) if i not in summed]
    if any(i not in summed and i in e1 and i in e2 and i in e3 for i in range(total)):
        return i1.new_zeros(out_shape)  # eager's output size for a dimension none of them has: 0
    # eager's sum_dims_12: summed dimensions the third operand lacks, contracted with the first pair
    first = "".join(c for i, c in enumerate(letters)
                    if (i not in e1 or i not in e2) and not (i in summed and i in e3))
    buf = torch.einsum(f"{sub(e1)},{sub(e2)}->{first}", i1, i2)
    out = "".join(c for i, c in enumerate(letters) if i not in summed and (c in first or i not in e3))
    return torch.einsum(f"{first},{sub(e3)}->{out}", buf, i3)


# --- multi_margin_loss_backward ------------------------------------------------------------------


def _multi_margin_loss(x, target, p=1, margin=1, weight=None, reduction=1):
    from torch._decomp import decomposition_table

    out = decomposition_table[aten.multi_margin_loss.default](x, target, p, margin, weight, reduction)
    return out.reshape(()) if reduction == 0 and target.dim() == 0 else out


def _multi_margin_loss_backward(grad_output, x, target, p, margin, weight=None, reduction=1):
    dim = x.shape[-1] if x.dim() else 1
    x2 = x.reshape(-1, dim)
    nframe = x2.shape[0]
    t = target.reshape(-1, 1)
    g = 1.0 / (nframe * dim) if reduction == 1 else 1.0 / dim  # Reduction::Mean
    z = (margin - x2.gather(1, t)) + x2
    h = torch.full_like(x2, g) if p == 1 else (2 * g) * z
    if weight is not None:
        h = h * weight[t]
    is_target = torch.arange(dim, device=x.device)[None, :] == t
    h = torch.where((z > 0) & ~is_target, h, torch.zeros_like(h))
    grad = torch.where(is_target, -h.sum(1, keepdim=True), h)
    if reduction != 0 or grad_output.dim() == 0:
        grad = grad * grad_output
    else:
        grad = grad * grad_output.reshape(-1, 1)
    return grad.reshape(x.shape)


# --- adaptive max pooling's backward ---------------------------------------------------------------


def _adaptive_windows(size, out):
    starts = [(o * size) // out for o in range(out)]
    ends = [-(-((o + 1) * size) // out) for o in range(out)]
    return starts, ends


def _adaptive_max_pool(n):
    def forward(x, output_size):
        from torch._decomp import decomposition_table

        sizes, outs = x.shape[-n:], list(output_size)
        if all(o == 1 for o in outs):
            # global: torch._decomp's argmax takes the first NaN where eager's loop ends on the last
            flat = x.flatten(-n)
            nan = torch.isnan(flat)
            last_nan = flat.shape[-1] - 1 - nan.flip(-1).to(torch.int32).argmax(-1)
            index = torch.where(nan.any(-1), last_nan, flat.argmax(-1))
            return flat.amax(-1).reshape(x.shape[:-n] + (1,) * n), index.reshape(x.shape[:-n] + (1,) * n)
        if (all(o > 0 for o in outs) and all(s % o == 0 for s, o in zip(sizes, outs))) or not all(
                o > 0 for o in outs):
            if n == 2:
                return decomposition_table[aten.adaptive_max_pool2d.default](x, output_size)
            if all(o > 0 for o in outs):
                return aten.max_pool3d_with_indices.default(x, [s // o for s, o in zip(sizes, outs)])
            return NotImplemented
        values, index = x, None
        stride = 1
        for d in range(x.dim() - 1, x.dim() - n - 1, -1):
            size, out = x.shape[d], outs[d - x.dim()]
            starts, ends = _adaptive_windows(size, out)
            k_max = max(e - b for b, e in zip(starts, ends))
            pos = torch.tensor([[min(b + k, size - 1) for k in range(k_max)] for b in starts], device=x.device)
            valid = [[b + k < e for b, e in zip(starts, ends)] for k in range(k_max)]
            shape = list(values.shape)
            shape[d:d + 1] = [out, k_max]

            def gather(t):
                return t.index_select(d, pos.reshape(-1)).reshape(shape)

            got = gather(values)
            at = pos * stride
            at = at.reshape([1] * d + [out, k_max] + [1] * (values.dim() - d - 1))
            if index is not None:
                at = at + gather(index)
            best = torch.full_like(got.select(d + 1, 0), float("-inf"))
            best_at = (at.select(d + 1, 0) + torch.zeros_like(best, dtype=torch.int64))
            for k in range(k_max):
                v = got.select(d + 1, k)
                take = (v > best) | torch.isnan(v)
                if not all(valid[k]):
                    take = take & torch.tensor(valid[k], device=x.device).reshape([out] + [1] * (v.dim() - d - 1))
                best = torch.where(take, v, best)
                best_at = torch.where(take, at.select(d + 1, k), best_at)
            values, index = best, best_at
            stride *= size
        return values, index

    return forward


def _adaptive_max_pool_backward(n):
    def backward(grad_output, x, indices):
        flat = torch.zeros_like(x, memory_format=torch.contiguous_format).flatten(-n)
        return flat.scatter_add(-1, indices.flatten(-n), grad_output.flatten(-n)).reshape(x.shape)

    return backward


# --- logspace -------------------------------------------------------------------------------------


def _logspace_out(start, end, steps, base=10.0, *, out):
    """``torch.logspace`` (its factory writes an empty tensor of ``steps`` through this)."""
    if out.dtype is not torch.float64 or steps < 2 or not all(isinstance(v, (int, float)) for v in (start, end, base)):
        return torch._decomp.decomposition_table[aten.logspace.out](start, end, steps, base, out=out)
    start, end = float(start), float(end)
    step = (end - start) / (steps - 1)
    i = torch.arange(steps, dtype=torch.float64, device=out.device)
    up = start + step * i
    down = end - step * (steps - 1 - i)
    return out.copy_(torch.pow(float(base), torch.where(i < steps // 2, up, down)))


_DECOMPOSITIONS = {
    aten.logspace.out: _logspace_out,
    aten._trilinear.default: _trilinear,
    aten.multi_margin_loss.default: _multi_margin_loss,
    aten.multi_margin_loss_backward.default: _multi_margin_loss_backward,
    aten.adaptive_max_pool2d.default: _adaptive_max_pool(2),
    aten.adaptive_max_pool3d.default: _adaptive_max_pool(3),
    aten.adaptive_max_pool2d_backward.default: _adaptive_max_pool_backward(2),
    aten.adaptive_max_pool3d_backward.default: _adaptive_max_pool_backward(3),
    aten.linalg_matrix_exp.default: _linalg_matrix_exp,
    aten._pdist_forward.default: _pdist_forward,
    aten._pdist_backward.default: _pdist_backward,
    aten._cdist_backward.default: _cdist_backward,
    aten.unique_consecutive.default: _unique_consecutive,
    aten._unique2.default: _unique2,
    aten.bincount.default: _bincount,
    aten.grid_sampler_2d_backward.default: _grid_sampler_2d_backward,
    aten.rrelu_with_noise.default: _rrelu_with_noise,
}


def decomposition(func):
    """The decomposition here for ``func``, or ``None``."""
    return _DECOMPOSITIONS.get(func)
