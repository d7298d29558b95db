"""Batch norm as eager's CPU kernel gives it.

Two things the decompositions of the batch-norm ops get otherwise:

- Shapes and types. The meta kernels and ``torch._decomp``'s
  ``native_batch_norm_helper`` answer as CUDA does whenever the input is not
  on the CPU (the helper branches on ``input.device.type == "cpu"``): outside
  training they hand back the running mean and ``1/sqrt(var + eps)`` as
  ``save_mean`` / ``save_invstd``, where eager's CPU kernel returns empty
  (``(0,)``) tensors, and they keep the statistics in float32 for a
  float16/bfloat16 input, where eager's CPU kernel returns them in the input's
  element type. The dispatcher passes the meta result through :func:`as_eager`
  (so every handler sees eager's shapes and dtypes) and runs the
  decompositions wrapped by :func:`decomposition`.
- Roundings, in training on a CPU device (:func:`_statistics`, :func:`_transform`). The helper computes
  ``rsqrt(var + eps)`` and the running variance's ``var * (n / (n - 1))`` in
  float32, and the output as ``((x - mean) * rstd) * w + b``. Eager's kernel
  (aten/src/ATen/native/Normalization.cpp, ``batch_norm_cpu_update_stats_template``;
  cpu/batch_norm_kernel.cpp, ``batch_norm_cpu_collect_stats_*`` and
  ``batch_norm_cpu_*_impl``) takes other steps, each rounded where its C++ types
  round: the per-channel sum of squares rounded into the parameters' type, the
  variance ``var_sum / n`` and ``var_sum / (n - 1)`` divided in that type, the
  inverse deviation ``1 / sqrt(var + eps)`` in double, the running mean
  ``m * mean + (1 - m) * running_mean`` in the parameters' type with ``m`` the
  momentum in that type, the running variance's sum in ``acc_type`` (double for
  float32), and the output as ``x * alpha + beta`` with ``alpha = invstd * w``,
  ``beta = b - mean * alpha``. Their sums follow the input's layout: a contiguous
  input with more than one element per channel and image is summed per channel in
  ``acc_type`` (double for float32 and float64: a float64 sum here, rounded
  once, as nearly exact as eager's in any order), a channels-last input (or one
  image element per channel) row after row in the input's type within each of
  ``at::parallel_for``'s thread chunks (:func:`_row_sums`, in that order: a loop
  in the program), the chunks' sums then added in ``acc_type``.
"""

from __future__ import annotations

import torch

from lazycore.trace import control

from .ops.conv import per_channel_once
from .ops.eager_loops import threads
from .tensor import lc_device, read, wrap

aten = torch.ops.aten

_EVAL = False
_TRAIN = True

# op -> its mode when fixed (else its ``training`` argument decides)
TRAINING = {
    aten.native_batch_norm.default: None,
    aten._native_batch_norm_legit.default: None,
    aten._native_batch_norm_legit.no_stats: None,
    aten._native_batch_norm_legit_functional.default: None,
    aten._native_batch_norm_legit_no_training.default: _EVAL,
    aten._batch_norm_no_update.default: _EVAL,
    aten._batch_norm_with_update.default: _TRAIN,
    aten._batch_norm_with_update_functional.default: _TRAIN,
}
"""The ops whose results 1 and 2 are ``save_mean`` and ``save_invstd``."""

# functional op -> where its new running mean and variance are among its results
_NEW_RUNNING = {
    aten._native_batch_norm_legit_functional.default: 3,
    aten._batch_norm_with_update_functional.default: 4,
}

_PARAMS = ("weight", "bias", "running_mean", "running_var")


def _arg(func, args, kwargs, name):
    for i, a in enumerate(func._schema.arguments):
        if a.name == name:
            return args[i] if i < len(args) else kwargs.get(name)
    return None


def _training(func, args, kwargs) -> bool:
    training = TRAINING[func]
    if training is None:
        training = bool(_arg(func, args, kwargs, "training"))
    return training


def as_eager(func, args, kwargs, out):
    """The result ``out`` of ``func`` (meta tensors, or the decomposition's
    lazy ones) with eager CPU's saved statistics: in the parameters' element
    type where they are float32 beside a float16/bfloat16 input (eager's mixed
    type), else in the input's; empty outside training. A functional op's new
    running statistics keep the running statistics' element type."""
    x = _arg(func, args, kwargs, "input")
    params = [p for p in (_arg(func, args, kwargs, n) for n in _PARAMS) if p is not None]
    dtype = params[0].dtype if params and params[0].dtype != x.dtype else x.dtype
    if _training(func, args, kwargs):
        items = [out[0], out[1].to(dtype), out[2].to(dtype)]
    else:
        items = [out[0], x.new_empty((0,), dtype=dtype), x.new_empty((0,), dtype=dtype)]
    items += out[3:]
    at = _NEW_RUNNING.get(func)
    if at is not None:
        rm, rv = _arg(func, args, kwargs, "running_mean"), _arg(func, args, kwargs, "running_var")
        items[at:at + 2] = [out[at].to(rm.dtype), out[at + 1].to(rv.dtype)]
    return type(out)(*items) if hasattr(out, "_fields") else type(out)(items)  # (torch's return types are named)


def decomposition(func, decomp):
    """``func``'s decomposition ``decomp`` returning eager CPU's saved
    statistics; in training on a CPU device, eager CPU's roundings (:func:`_eager_cpu`)."""

    def run(*args, **kwargs):
        out = _eager_cpu(func, args, kwargs)
        if out is None:
            out = decomp(*args, **kwargs)
            if out is NotImplemented:
                return out
        return as_eager(func, args, kwargs, out)

    return run


# --- training on a CPU device, as eager's CPU kernel rounds -----------------------------------

_FLOATS = (torch.float32, torch.float64)
_HALVES = (torch.bfloat16, torch.float16)
_MUTATES = frozenset({aten.native_batch_norm.default, aten._native_batch_norm_legit.default,
                      aten._batch_norm_with_update.default})
"""The ops that write the new running statistics into their arguments."""
_RESERVE = frozenset({aten._batch_norm_with_update.default, aten._batch_norm_with_update_functional.default,
                      aten._batch_norm_no_update.default})
"""The ops with a reserve result (empty bytes on the CPU) after the saved statistics."""


def _eager_cpu(func, args, kwargs):
    """``func``'s results on a CPU device with eager CPU's roundings, or None
    where the decomposition answers: on other platforms, outside training
    without running statistics, and for an input eager's kernel takes through
    its non-contiguous path (neither contiguous nor channels-last)."""
    training = _training(func, args, kwargs)
    x = _arg(func, args, kwargs, "input")
    if lc_device(x.device).platform != "cpu" or x.dim() < 2 or x.numel() == 0:
        return None
    w, b, rm, rv = (_arg(func, args, kwargs, n) for n in _PARAMS)
    params = [p for p in (w, b, rm, rv) if p is not None]
    param = params[0].dtype if params else x.dtype
    if x.dtype not in _FLOATS + _HALVES or any(p.dtype != param for p in params):
        return None
    if param != x.dtype and not (x.dtype in _HALVES and param == torch.float32):
        return None
    if any(not p.is_contiguous() for p in params):  # (eager's TensorIterator path)
        return None
    layout = _layout(x)
    if layout is None:
        return None
    eps = float(_arg(func, args, kwargs, "eps"))
    if not training:
        if rm is None or rv is None:
            return None
        empty = x.new_empty((0,), dtype=rm.dtype)
        results = [_evaluated(x, w, b, rm, rv, eps), empty, empty]
        if func in _RESERVE:
            results.append(x.new_empty((0,), dtype=torch.uint8))
        if func in _NEW_RUNNING:
            results += [rm.clone(), rv.clone()]
        return tuple(results)
    momentum = float(_arg(func, args, kwargs, "momentum"))
    # float16's statistics are computed as eager's mixed type's (in float32) and rounded into
    # float16, which its output is then computed from (measured against eager: both bitwise)
    inner = torch.float32 if x.dtype == torch.float16 else param
    mean, invstd, new_rm, new_rv = _statistics(x, rm, rv, momentum, eps, inner, layout)
    if inner != param:
        mean, invstd = mean.to(param), invstd.to(param)
        new_rm = None if new_rm is None else new_rm.to(param)
        new_rv = None if new_rv is None else new_rv.to(param)
    out = _transform(x, w, b, mean, invstd)
    results = [out, mean, invstd]
    if func in _MUTATES:
        if rm is not None:
            rm.copy_(new_rm)
        if rv is not None:
            rv.copy_(new_rv)
    if func in _RESERVE:
        results.append(x.new_empty((0,), dtype=torch.uint8))
    if func in _NEW_RUNNING:
        results += [new_rm, new_rv]
    return tuple(results)


def _evaluated(x, w, b, rm, rv, eps):
    """Batch norm outside training (``batch_norm_cpu_collect_linear_and_constant_terms``
    with ``train`` false): the inverse deviation ``1 / std::sqrt(running_var + eps)``
    in ``opmath_t``, the running mean as the mean, then :func:`_transform`'s
    ``x * alpha + beta``."""
    opmath = torch.float32 if x.dtype in _HALVES else x.dtype
    var = rv.to(opmath) + torch.full((), eps, dtype=opmath, device=x.device)
    invstd = torch.ones_like(var) / torch.sqrt(var)
    return _transform(x, w, b, rm, invstd)


def _layout(x):
    """How eager's kernel sums ``x``: "planes" (contiguous, more than one element
    per channel and image: per channel in ``acc_type``), "rows" (channels-last,
    or contiguous with one element per channel and image: along the rows in the
    input's type), or None (its non-contiguous path)."""
    image = x.numel() // (x.shape[0] * x.shape[1])
    if x.is_contiguous():
        return "planes" if image != 1 else "rows"
    if x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last):
        return "rows"
    if x.dim() == 5 and x.is_contiguous(memory_format=torch.channels_last_3d):
        return "rows"
    return None


def _in(dtype, value: float) -> float:
    """``value`` rounded into ``dtype`` (a C++ ``static_cast<param_t>``)."""
    return float(torch.tensor(value, dtype=torch.float64).to(dtype))


def _statistics(x, rm, rv, momentum, eps, param, layout):
    """Training-mode batch norm's statistics of ``x`` as eager's CPU kernel
    computes them (``batch_norm_cpu_update_stats_template``): ``(save_mean,
    save_invstd, new_running_mean, new_running_var)`` (the new running
    statistics None where there are none), in ``param``, the statistics'
    element type (the input's, or float32 beside a half input)."""
    half = x.dtype in _HALVES
    acc = torch.float32 if half else torch.float64  # acc_type<scalar_t, false>
    opmath = torch.float32 if half else x.dtype
    n = x.numel() // x.shape[1]
    if layout == "rows" and _row_steps(n) > ROW_LOOP_STEPS:
        layout = "planes"  # (a long loop: correctly rounded sums instead of eager's chunked order)
    if layout == "planes":
        mean, var_sum = _plane_stats(x, n, param, opmath)
    else:
        mean, var_sum = _row_stats(x, n, param, opmath, acc)

    # batch_norm_cpu_update_stats_template: divisions in param_t, the inverse deviation in double
    var = var_sum / torch.full((), _in(param, n), dtype=param, device=x.device)
    root = torch.sqrt(var.to(torch.float64) + eps)
    invstd = torch.ones_like(root) / root
    if eps == 0:
        invstd = torch.where(var == 0, torch.zeros_like(invstd), invstd)  # (InvStd: 0 for a zero variance)
    invstd = invstd.to(acc).to(param)
    m = _in(param, momentum)
    keep = float(torch.tensor(1, dtype=param) - torch.tensor(m, dtype=param))  # (1 - momentum_) in param_t
    new_rm = new_rv = None
    if rm is not None:
        new_rm = mean * m + rm.to(param) * keep
    if rv is not None:
        unbiased = (var_sum / torch.full((), _in(param, n - 1), dtype=param, device=x.device)).to(acc)
        new_rv = (unbiased * m + (rv.to(param) * keep).to(acc)).to(param)
    return mean, invstd, new_rm, new_rv


def _transform(x, w, b, mean, invstd):
    """The output from the saved statistics: ``batch_norm_cpu_collect_linear_and_constant_terms``
    and the kernels' ``x * alpha + beta``, in ``opmath_t``, each a fused multiply-add as eager's
    compiler contracts them (addcmul: one rounding)."""
    opmath = torch.float32 if x.dtype in _HALVES else x.dtype
    c = x.shape[1]
    alpha = invstd.to(opmath) if w is None else invstd.to(opmath) * w.to(opmath)
    bias = torch.zeros_like(alpha) if b is None else b.to(opmath)
    beta = torch.addcmul(bias, mean.to(opmath), alpha, value=-1)
    if b is None:  # (eager's 0 - mean * alpha: a zero mean gives +0, where XLA drops the fma's add of 0)
        beta = beta + 0.0
    alpha, beta = _once(alpha, beta)
    shape = (1, c) + (1,) * (x.dim() - 2)
    return torch.addcmul(beta.reshape(shape), x.to(opmath), alpha.reshape(shape)).to(x.dtype)


def _once(*tensors):
    """``tensors`` (per-channel, lazy) with the same values, each computed once
    before the full-size loops read it (:func:`~.ops.conv.per_channel_once`)."""
    return [wrap(h, owned=True) for h in per_channel_once([read(t) for t in tensors])]


def _dims(x):
    return (0,) + tuple(range(2, x.dim()))


def _plane_stats(x, n, param, opmath):
    """``batch_norm_cpu_collect_stats_contiguous_impl``: per channel the sum in
    ``acc_type`` and the mean rounded once; the squared deviations from that
    mean in ``opmath_t``, summed in ``acc_type`` and rounded once (float64 sums
    here: eager's double sums in order, to the bit but where the two round to
    either side of a tie). Half inputs sum in float32 there: a float64 sum
    rounded to float32, then the mean divided in float32 (the deviations are
    from that unrounded mean)."""
    dims = _dims(x)
    shape = (1, x.shape[1]) + (1,) * (x.dim() - 2)
    total = _wide_sum(x, dims)
    if x.dtype in _HALVES:
        mean_f = total.to(torch.float32) / torch.full((), float(n), dtype=torch.float32, device=x.device)
        mean = mean_f.to(param)
    else:
        mean = mean_f = (total / n).to(x.dtype)
    (once,) = _once(mean_f)
    dev = x.to(opmath) - once.reshape(shape)
    var_sum = (dev * dev).to(torch.float64).sum(dims).to(opmath).to(param)
    return mean, var_sum


def _wide_sum(x, dims):
    """Per channel the float64 sum of ``x``, taken as ``0 - sum(-x)`` (the same
    bits: negation is exact and rounding symmetric; ``0 -`` gives an all-zero
    channel ``+0`` as the plain sum does). Were the sum's widening a value
    another float64 use of ``x`` shares (the output's fused multiply-add took
    one before it was a single ``lazy.fma``), XLA would keep one float64 copy
    of the whole input in memory for both (ResNet-50's (8, 256, 56, 56): 51 MB
    written and read back each step) instead of widening inside the
    reduction's own kernel."""
    return torch.zeros((), dtype=torch.float64, device=x.device) - (-x).to(torch.float64).sum(dims)


def _row_stats(x, n, param, opmath, acc):
    """``batch_norm_cpu_collect_stats_channels_last_impl``: the input as rows
    of channels (its memory's order), summed row after row in the buffer's type
    (the input's; float32 for halves) within each thread's chunk, the chunks'
    sums added in ``acc_type``; the mean rounded from that over ``n``; then the
    squared deviations from the rounded mean the same way."""
    c = x.shape[1]
    rows = (x.permute((0,) + tuple(range(2, x.dim())) + (1,)) if x.dim() > 2 else x).reshape(n, c)
    rows = rows.to(opmath)
    total = _row_sums(rows, acc)
    if x.dtype in _HALVES:  # param_t(sum / N) with a float sum
        mean = (total / torch.full((), float(n), dtype=torch.float32, device=x.device)).to(param)
    else:
        mean = (total.to(torch.float64) / n).to(x.dtype)
    (once,) = _once(mean.to(opmath))
    var_sum = _row_sums(rows - once, acc, squares=True).to(param)
    return mean, var_sum


_UNROLL = 8
"""Rows added per iteration of :func:`_row_sums`' loop."""

ROW_LOOP_STEPS = 128
"""The longest :func:`_row_sums` loop taken. Eager's row order is a
sequential loop over each thread's chunk; a large channels-last input
(ResNet-50's first batch norm at 224x224, batch 8: 6,272 steps on two
threads) would make every batch norm a loop of thousands of steps, so past
this the statistics take the contiguous path's float64 sums (rounded once:
within an ulp of eager's, and closer to the exact sum)."""


def _row_steps(m: int) -> int:
    """The steps of :func:`_row_sums`' loop over ``m`` rows."""
    used = max(1, min(threads(), m))
    return -(-(-(-m // used)) // _UNROLL)


def _row_sums(rows, acc, squares=False):
    """Per column, the sum of ``rows`` (``(M, C)``; with ``squares``, of their
    squares, each added in one fused multiply-add as eager's ``y + (x - mean) *
    (x - mean)`` is compiled) as ``at::parallel_for`` splits it over
    ``torch.get_num_threads()`` threads (chunks of ``ceil(M / T)`` rows, ``T =
    min(threads, M)``): each chunk added row after row in ``rows``' type (one
    loop in the program, :data:`_UNROLL` rows a step; a chunk ends with zero
    rows where it is padded, which leave its sum as it is), the chunks' sums
    then added in ``acc`` one after another. The thread count is the one at this call
    (:func:`~.ops.eager_loops.threads`: recordings of it are dropped when
    ``torch.set_num_threads`` changes it; a captured step keeps it as a guard)."""
    m, c = rows.shape
    chunk = -(-m // max(1, min(threads(), m)))
    used = -(-m // chunk)
    steps = -(-chunk // _UNROLL)
    pad = used * chunk - m
    if pad:
        rows = torch.cat([rows, rows.new_zeros((pad, c))])
    blocks = rows.reshape(used, chunk, c)
    if steps * _UNROLL != chunk:
        blocks = torch.cat([blocks, blocks.new_zeros((used, steps * _UNROLL - chunk, c))], dim=1)
    blocks = blocks.reshape(used, steps, _UNROLL, c).permute(1, 2, 0, 3)  # (steps, unroll, threads, C)

    def add(carry, block):
        for k in range(_UNROLL):
            carry = torch.addcmul(carry, block[k], block[k]) if squares else carry + block[k]
        return carry, None

    start = rows.new_zeros((used, c))
    if steps == 1:
        part, _ = add(start, blocks[0])
    else:
        part, _ = control.scan(add, start, blocks)
    total = part[0].to(acc)
    for t in range(1, used):
        total = total + part[t].to(acc)
    return total
