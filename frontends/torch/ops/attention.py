"""``F.scaled_dot_product_attention`` as eager's CPU computes it: the flash
kernel (``aten/src/ATen/native/cpu/FlashAttentionKernel.cpp``) wherever eager
picks it, one recorded op forward and one backward.

On the lazy device the composite would ask a dispatch stub the lazy device does
not have, take the math path and record about 60 ops a call in a different
order of roundings (the scale split over q and k, softmax before the product
with v). :func:`_attention` (the op's autograd kernel for lazy tensors) asks
eager's own choice (``torch._fused_sdp_choice`` on CPU stand-ins of the same
layouts, once per signature) and, where eager takes flash, calls
``_scaled_dot_product_flash_attention_for_cpu``, whose derivative is its
backward op: both lowered here.

The lowerings follow the kernel's float32 steps, per row of a block of keys
(512 keys a block; rows are independent, so the kernel's blocks of queries only
matter where its backward sums over them):

- forward: ``s = q @ k.T`` (its GEMM), the causal columns ``-inf``, then
  ``s * scale`` (with a mask: ``s * scale + mask``), the row's ``max``;
  ``p = exp(s - max)`` with ``Vectorized::exp_u20`` over the row's whole
  16-float vectors (:func:`exp_u20`) and glibc's ``expf`` over the rest; the
  row's sum is the vectors' lanes combined by halving, then the rest in order;
  ``out = (p @ v) * (1 / sum)``, ``logsumexp = max + log(sum)``. A later block
  of keys rescales by ``exp(old max - max)`` as the kernel does.
- backward: ``d = rowsum(dout * out)`` (16 lanes, halving), then per block of
  queries and keys ``p = exp(scale * (q @ k.T) + mask - logsumexp)`` with
  SLEEF's exp, the causal columns 0, ``dv += p.T @ dout``,
  ``ds = p * (dout @ v.T - d)``, ``dq += scale * (ds @ k)``,
  ``dk += scale * (ds.T @ q)``.

Other types keep these steps with XLA's exp (float64) or the float32 steps
rounded where the kernel stores its reduced-type buffers (half types).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from lazycore.ir.context import TRACE
from lazycore.ir.memo import Memo

from ..lowering import apply, broadcast, const, convert, fused_multiply_add, lowers, reshape
from . import eager_loops
from .lane_sums import kernel_lanes, row_sum
from .nn import _tail_exp

aten = torch.ops.aten

KV_SPLIT = 512
"""The kernel's block of keys (``kv_split_size``)."""


def q_split(q_len: int) -> int:
    """The kernel's block of queries for ``q_len`` queries (``flash_attention_kernel_impl``)."""
    return 256 if q_len >= 768 else 64 if q_len >= 192 else 32


_U20 = np.array([0.999999701, 0.499991506, 0.166676521, 0.0418978221, 0.00828929059], np.float32)
"""``exp_u20``'s ``1/factorial(1..5)`` coefficients."""

_U20_BITS = {"log2ef": 0x3fb8aa3b, "ln2": 0x3f317218, "ln_flt_min": 0xc2aeac50, "ln_flt_max": 0x42b17218}


def _f32(bits: int) -> float:
    return float(np.uint32(bits).view(np.float32))


def exp_u20(s):
    """``Vectorized<float>::exp_u20`` of the float32 ``s``: clamped to
    ``[ln(FLT_MIN), ln(FLT_MAX)]`` (``minps``/``maxps``: a NaN becomes the
    bound), ``n = floor(fma(s, log2(e), 0.5))``, ``r = fma(-n, ln2, s)``, a
    degree-5 polynomial by fused multiply-adds, times ``2**(n - 1)`` (zero
    below ``ln(FLT_MIN)``), times 2."""
    shape, device = s.shape, s.device

    def f(v, dtype="f32"):
        return const(v, dtype, device, shape)

    low, high = f(_f32(_U20_BITS["ln_flt_min"])), f(_f32(_U20_BITS["ln_flt_max"]))
    under = apply("compare", s, low, direction="LT")
    s = apply("select", apply("compare", s, high, direction="LT"), s, high)
    s = apply("select", apply("compare", s, low, direction="GT"), s, low)
    n = apply("floor", fused_multiply_add(s, f(_f32(_U20_BITS["log2ef"])), f(0.5)))
    r = fused_multiply_add(apply("neg", n), f(_f32(_U20_BITS["ln2"])), s)
    p = fused_multiply_add(r, f(float(_U20[4])), f(float(_U20[3])))
    for c in (_U20[2], _U20[1], _U20[0], np.float32(1)):
        p = fused_multiply_add(r, p, f(float(c)))
    power = apply("convert", apply("sub", n, f(1.0)), dtype="i32")
    scale = apply("bitcast_convert", apply("shift_left", apply("add", power, f(np.int32(127), "i32")),
                                           f(np.int32(23), "i32")), dtype="f32")
    scale = apply("select", under, f(0.0), scale)
    return apply("mul", apply("mul", p, scale), f(2.0))


def _log_scalar(x):
    """glibc's ``logf`` of a float32: float64's log rounded once."""
    return convert(apply("log", convert(x, "f64")), "f32")


def _cols(x, lo: int, hi: int):
    shape = x.shape
    return apply("slice", x, start=(0,) * (len(shape) - 1) + (lo,), limit=shape[:-1] + (hi,),
                 strides=(1,) * len(shape))


def _rows(x, lo: int, hi: int, d: int):
    shape = x.shape
    if lo == 0 and hi == shape[d]:
        return x  # (a whole dimension stays unsliced: a padded one may be)
    start = [0] * len(shape)
    limit = list(shape)
    start[d], limit[d] = lo, hi
    return apply("slice", x, start=tuple(start), limit=tuple(limit), strides=(1,) * len(shape))


def _concat(parts, d: int):
    out = parts[0]
    for part in parts[1:]:
        out = apply("concatenate", out, part, dim=d)
    return out


def _matmul(a, b, contract_a: int, contract_b: int, into=None):
    """``a . b`` batched over (B, H), contracted on ``contract_a`` of ``a`` and
    ``contract_b`` of ``b`` (each rank 4), the result ``(B, H, a's free, b's
    free)``; ``into``: a buffer the kernel's GEMM adds the product to
    (``beta = 1``), as ``addmm`` adds its bias.

    The kernel's GEMMs are MKL's ``sgemm``, as ``mm``'s are: the operands are
    laid out as ``(M, K)`` by ``(K, N)`` and the product summed in MKL's order
    by :func:`.eager_loops.ordered_dot` where XLA's dot can, else XLA's dot as
    it comes, behind a barrier either way (XLA's simplifier moves a scalar
    factor of a dot's result into the smaller operand: ``dot(q, k) * scale`` to
    ``dot(q * scale, k)``; the kernel scales the sum). (Written out as the
    fused chain the kernel's products are eager's bits at every size, but a
    GPT-2-small attention step compiled 49 s and ran 780 ms; eager 13 ms.)"""
    m, k, n = a.shape[5 - contract_a], a.shape[contract_a], b.shape[5 - contract_b]
    if eager_loops.ordered_plan(a.dtype, a.shape[0] * a.shape[1], m, k, n) is not None:
        flip = (0, 1, 3, 2)
        lhs = a if contract_a == 3 else apply("permute", a, dims=flip)
        rhs = b if contract_b == 2 else apply("permute", b, dims=flip)
        return eager_loops.ordered_dot(lhs, rhs, into)
    product = eager_loops.fenced(apply("dot_general", a, b, lhs_batch=(0, 1), rhs_batch=(0, 1),
                                       lhs_contract=(contract_a,), rhs_contract=(contract_b,)))
    return product if into is None else apply("add", product, into)


def _row_max(x):
    return apply("reduce_max", x, dims=(len(x.shape) - 1,))


def _expand_rows(v, shape):
    """A per-row value ``(B, H, L)`` against ``(B, H, L, n)``."""
    return apply("broadcast_in_dim", v, dims=(0, 1, 2), shape=shape)


def _modelled(acc: str) -> bool:
    """The float32 steps are eager's (its exp_u20, lanes and scalar tails); not
    while ``lazycore.export`` traces one program for every size."""
    return acc == "f32" and not TRACE.symbolic


def _exp_and_sum(shifted, acc: str):
    """``(p, sum)`` of one block's shifted scores, ``_exp_reduce_sum_fusion_kernel``:
    exp_u20 and lane sums over the whole vectors, then ``expf`` and a sum in order.

    Written without slicing the keys' dimension (columns picked by their index,
    the sum's order as a chain over the row), so that a key length padded to a
    shape bucket (a growing key-value cache) still makes one program: the
    split is then this length's, the values right at every length."""
    if not _modelled(acc):
        p = apply("exp", shifted)
        return p, apply("reduce_sum", p, dims=(3,))
    shape, device = shifted.shape, shifted.device
    n = shape[-1]
    lanes = kernel_lanes(torch.float32)
    col = apply("broadcast_in_dim", apply("iota", dim=0, shape=(n,), dtype="i64", device=device), dims=(3,),
                shape=shape)
    # the whole vectors' end, n - n % lanes, from n itself: a padded n is its size's parameter
    length = const(np.int64(n), "i64", device)
    # (the lanes a float made an integer: padding reads an integer constant equal to a
    # padded size as that size, and a kv length of 8 is AVX2's 8 lanes by chance)
    width = apply("convert", const(np.float32(lanes), "f32", device), dtype="i64")
    whole = apply("sub", length, apply("rem", length, width))
    whole = apply("broadcast_in_dim", whole, dims=(), shape=shape)
    zero = const(0.0, "f32", device, shape)
    in_vectors = apply("compare", col, whole, direction="LT")
    p = apply("select", in_vectors, exp_u20(shifted), _tail_exp(shifted))
    rows = reshape(apply("select", in_vectors, p, zero), (_count(shape[:-1]), n))
    ones = const(1.0, "f32", device, rows.shape)
    total = reshape(apply("lane_sum", rows, ones, lanes=lanes, halving=True, fused=False), shape[:-1])
    # the vectors' total, then the tail in order: one chain over the row holding
    # zeros, the total at the last vector position, then the tail's values
    last = apply("compare", col, apply("sub", whole, const(np.int64(1), "i64", device, shape)), direction="EQ")
    chain = apply("select", in_vectors, apply("select", last, _expand_rows(total, shape), zero), p)
    return p, reshape(_in_order(reshape(chain, (_count(shape[:-1]), n))), shape[:-1])


def _in_order(rows):
    """Each row's sum from zero in order (``tmp_sum += x``)."""
    return apply("lane_sum", rows, const(1.0, rows.dtype, rows.device, rows.shape), lanes=1, halving=False,
                 fused=False)


def _count(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _mask_block(mask, shape, lo: int, hi: int, acc: str):
    """The mask's columns ``lo:hi`` as ``(B, H, L, hi - lo)`` of ``acc`` (its dims
    of size 1 broadcast, as ``reshape_attn_mask_to_4d`` expands them)."""
    m = mask
    while len(m.shape) < 4:
        m = reshape(m, (1,) + m.shape)
    if m.shape[-1] != 1:
        m = _cols(m, lo, hi)
    return broadcast(convert(m, acc), shape)


def _scaled_plus_mask(s, factor, mask, acc: str):
    """``_scale_attn_mask_fusion_kernel``'s ``s * scale + mask``: one fused
    multiply-add, vectors and tail alike (GCC contracts ``_mm512_mul_ps`` into
    the ``_mm512_add_ps`` that takes it; rounded twice, 18-32% of 2x2x24x24
    outputs were off eager's)."""
    if not _modelled(acc):
        return apply("add", apply("mul", s, broadcast(factor, s.shape)), mask)
    return fused_multiply_add(s, broadcast(factor, s.shape), mask)


def _scale_value(scale, head: int, acc: str) -> float:
    """``sdp::calculate_scale`` (in double) as the kernel's ``accum_t``."""
    value = scale if scale is not None else 1.0 / math.sqrt(head)
    return float(np.float32(value)) if acc == "f32" else float(value)


def _acc_type(dtype: str) -> str:
    return "f64" if dtype == "f64" else "f32"


@lowers(aten._scaled_dot_product_flash_attention_for_cpu.default)
def _flash(ctx, query, key, value, dropout_p=0.0, is_causal=False, *, attn_mask=None, scale=None):
    dtype = query.dtype
    acc = _acc_type(dtype)
    q, k, v = convert(query, acc), convert(key, acc), convert(value, acc)
    b, h, length, head = q.shape
    k, v = _shared_heads(k, h), _shared_heads(v, h)
    keys = k.shape[2]
    factor = const(_scale_value(scale, head, acc), acc, ctx.device)
    reduced = acc != dtype
    top = None
    total = dst = None
    for lo in range(0, max(keys, 1), KV_SPLIT):
        hi = min(lo + KV_SPLIT, keys)
        kb, vb = _rows(k, lo, hi, 2), _rows(v, lo, hi, 2)
        s = _matmul(q, kb, 3, 3)
        shape = s.shape
        inf = const(-math.inf, acc, ctx.device, shape)
        if is_causal:
            s = apply("select", _causal_keep_rows(shape, 0, lo, ctx.device), s, inf)
        if attn_mask is not None:
            s = _scaled_plus_mask(s, factor, _mask_block(attn_mask, shape, lo, hi, acc), acc)
        else:
            s = apply("mul", s, broadcast(factor, shape))
        block_max = _row_max(s)
        new_max = block_max if top is None else apply(
            "select", apply("compare", top, block_max, direction="GT"), top, block_max)
        rows = new_max.shape
        dead = apply("compare", new_max, const(-math.inf, acc, ctx.device, rows), direction="EQ")
        p, block_sum = _exp_and_sum(apply("sub", s, _expand_rows(new_max, shape)), acc)
        zero_rows = const(0.0, acc, ctx.device, shape)
        p = apply("select", _expand_rows(dead, shape), zero_rows, p)
        if reduced:  # the kernel's p @ v reads its reduced-type copy of p
            p = convert(convert(p, dtype), acc)
        if total is None:
            total = apply("select", dead, const(0.0, acc, ctx.device, rows), block_sum)
            top = new_max
            dst = _matmul(p, vb, 3, 2)
        else:
            rescale = _tail_exp(apply("sub", top, new_max)) if _modelled(acc) else apply(
                "exp", apply("sub", top, new_max))
            total = apply("select", dead, total, fused_multiply_add(rescale, total, block_sum))
            dst = apply("mul", dst, _expand_rows(apply("select", dead, const(1.0, acc, ctx.device, rows), rescale),
                                                 dst.shape))
            dst = _matmul(p, vb, 3, 2, into=dst)
            top = apply("select", dead, top, new_max)
    rows = total.shape
    top = apply("select", apply("compare", top, const(-math.inf, acc, ctx.device, rows), direction="EQ"),
                const(0.0, acc, ctx.device, rows), top)
    total = apply("select", apply("compare", total, const(0.0, acc, ctx.device, rows), direction="EQ"),
                  const(1.0, acc, ctx.device, rows), total)
    inverse = apply("div", const(1.0, acc, ctx.device, rows), total)
    out = convert(apply("mul", dst, _expand_rows(inverse, dst.shape)), dtype)
    log = _log_scalar(total) if _modelled(acc) else apply("log", total)
    lse = apply("add", top, log)
    return out, lse


_flash.draws = False  # a seeded op (dropout_p), but eager takes it only without dropout, and so draws nothing


@lowers(aten._scaled_dot_product_flash_attention_for_cpu_backward.default)
def _flash_backward(ctx, grad_out, query, key, value, out, logsumexp, dropout_p, is_causal, *, attn_mask=None,
                    scale=None):
    dtype = query.dtype
    acc = _acc_type(dtype)
    reduced = acc != dtype
    q, k, v = convert(query, acc), convert(key, acc), convert(value, acc)
    g, o = convert(grad_out, acc), convert(out, acc)
    b, h, length, head = q.shape
    kv_heads = k.shape[1]
    k, v = _shared_heads(k, h), _shared_heads(v, h)
    keys = k.shape[2]
    factor = const(_scale_value(scale, head, acc), acc, ctx.device)
    if _modelled(acc):
        rows = reshape(g, (_count(g.shape[:-1]), head))
        dsum = reshape(row_sum(rows, reshape(o, rows.shape), kernel_lanes(torch.float32)), g.shape[:-1])
    else:
        dsum = apply("reduce_sum", apply("mul", g, o), dims=(3,))
    lse = convert(logsumexp, acc)
    split = q_split(length)
    dq_blocks, dk_blocks, dv_blocks = [], [], []
    for m_lo in range(0, max(length, 1), split):
        m_hi = min(m_lo + split, length)
        qm, gm = _rows(q, m_lo, m_hi, 2), _rows(g, m_lo, m_hi, 2)
        dq = None
        dk_row, dv_row = [], []
        for lo in range(0, max(keys, 1), KV_SPLIT):
            hi = min(lo + KV_SPLIT, keys)
            kb, vb = _rows(k, lo, hi, 2), _rows(v, lo, hi, 2)
            s = _matmul(qm, kb, 3, 3)
            shape = s.shape
            s = apply("mul", s, broadcast(factor, shape))
            if attn_mask is not None:
                s = apply("add", s, _rows(_mask_block(attn_mask, (b, h, length, hi - lo), lo, hi, acc), m_lo, m_hi, 2))
            shifted = apply("sub", s, _expand_rows(_rows(lse, m_lo, m_hi, 2), shape))
            p = apply("exp_sleef" if _modelled(acc) else "exp", shifted)
            if is_causal:
                p = apply("select", _causal_keep_rows(shape, m_lo, lo, ctx.device), p,
                          const(0.0, acc, ctx.device, shape))
            pr = convert(convert(p, dtype), acc) if reduced else p
            dv_part = _matmul(pr, gm, 2, 2)  # (B, H, keys, head)
            dp = _matmul(gm, vb, 3, 3)
            ds = apply("mul", p, apply("sub", dp, _expand_rows(_rows(dsum, m_lo, m_hi, 2), shape)))
            dsr = convert(convert(ds, dtype), acc) if reduced else ds
            dq_part = apply("mul", _matmul(dsr, kb, 3, 2), broadcast(factor, (b, h, m_hi - m_lo, head)))
            dk_part = apply("mul", _matmul(dsr, qm, 2, 2), broadcast(factor, (b, h, hi - lo, head)))
            dq = dq_part if dq is None else apply("add", dq_part, dq)
            dk_row.append(dk_part)
            dv_row.append(dv_part)
        dq_blocks.append(dq)
        dk_blocks.append(_concat(dk_row, 2))
        dv_blocks.append(_concat(dv_row, 2))
    dq = _concat(dq_blocks, 2)
    dk, dv = _into_shared(dk_blocks, kv_heads), _into_shared(dv_blocks, kv_heads)
    return convert(dq, dtype), convert(dk, dtype), convert(dv, dtype)


def _shared_heads(x, heads: int):
    """Key or value heads ``(B, Hk, S, D)`` as the ``heads`` query heads read
    them (grouped-query attention: head ``j`` reads ``j // (heads / Hk)``)."""
    b, hk, n, d = x.shape
    if hk == heads:
        return x
    group = heads // hk
    wide = apply("broadcast_in_dim", x, dims=(0, 1, 3, 4), shape=(b, hk, group, n, d))
    return reshape(wide, (b, heads, n, d))


def _into_shared(blocks, kv_heads: int):
    """The key or value gradient from each block of queries' ``(B, H, S, D)``
    part: eager's kernel adds each part into its key head's buffer, query heads
    in order and each head's blocks in order (``beta = 1``), probed against
    eager with two query heads a key head and two blocks of queries."""
    b, h, n, d = blocks[0].shape
    group = h // kv_heads
    parts = [reshape(x, (b, kv_heads, group, n, d)) for x in blocks]
    total = None
    for j in range(group):
        for part in parts:
            piece = reshape(apply("slice", part, start=(0, 0, j, 0, 0), limit=(b, kv_heads, j + 1, n, d),
                                  strides=(1,) * 5), (b, kv_heads, n, d)) if group > 1 else reshape(
                part, (b, kv_heads, n, d))
            total = piece if total is None else apply("add", total, piece)
    return total


def _causal_keep_rows(shape, row_lo: int, col_lo: int, device):
    """``(B, H, rows, n)`` bools: key ``col_lo + j`` is at or before query ``row_lo + i``."""
    rows = apply("iota", dim=0, shape=shape[2:], dtype="i64", device=device)
    if row_lo:
        rows = apply("add", rows, const(np.int64(row_lo), "i64", device, shape[2:]))
    cols = apply("add", apply("iota", dim=1, shape=shape[2:], dtype="i64", device=device),
                 const(np.int64(col_lo), "i64", device, shape[2:]))
    keep = apply("compare", cols, rows, direction="LE")
    return apply("broadcast_in_dim", keep, dims=(2, 3), shape=shape)


# --- which kernel eager takes ---------------------------------------------------------------

_CHOICES = Memo("torch.sdpa_choice", 256)
"""(layouts, arguments, enabled backends) -> whether eager's CPU takes the flash kernel."""

_FLASH_CHOICE = 1
"""``sdp::SDPBackend::flash_attention``."""


def _layout(t):
    if t is None:
        return None
    return (tuple(t.shape), tuple(t.stride()), t.dtype, t.requires_grad)


def _stand_in(layout):
    shape, stride, dtype, grad = layout
    x = torch.empty_strided(shape, stride, dtype=dtype)
    return x.requires_grad_(grad) if grad and dtype.is_floating_point else x


def eager_takes_flash(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa) -> bool:
    """Whether eager's CPU runs ``_scaled_dot_product_flash_attention_for_cpu``
    for these arguments: ``torch._fused_sdp_choice`` asked on CPU tensors of the
    same shapes, strides, types and gradient needs, once per signature."""
    layouts = tuple(_layout(t) for t in (query, key, value, attn_mask))
    key_ = (layouts, float(dropout_p), bool(is_causal), scale, bool(enable_gqa), torch.is_grad_enabled(),
            torch._C._get_flash_sdp_enabled(), torch._C._get_math_sdp_enabled())
    known = _CHOICES.get(key_)
    if known is None:
        q, k, v = (_stand_in(x) for x in layouts[:3])
        mask = None if layouts[3] is None else _stand_in(layouts[3])
        try:
            choice = torch._fused_sdp_choice(q, k, v, mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa)
        except RuntimeError:
            choice = -1  # eager's composite raises its own error for these arguments
        known = choice == _FLASH_CHOICE
        _CHOICES.put(key_, known)
    return known


def _attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """``aten::scaled_dot_product_attention`` for lazy tensors (its autograd
    kernel): eager's flash kernel where eager's CPU takes it (grouped-query
    heads too: ``enable_gqa``), else the composite."""
    if (query.dim() == 4 and key.dim() == 4 and value.dim() == 4
            and (attn_mask is None or isinstance(attn_mask, torch.Tensor))
            and eager_takes_flash(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)):
        if attn_mask is not None and attn_mask.dtype == torch.bool:  # sdp::convert_boolean_attn_mask
            attn_mask = torch.where(attn_mask.logical_not(), -math.inf,
                                    torch.zeros((), dtype=query.dtype, device=attn_mask.device))
        return aten._scaled_dot_product_flash_attention_for_cpu.default(
            query, key, value, dropout_p, is_causal, attn_mask=attn_mask, scale=scale)[0]
    return aten.scaled_dot_product_attention.default.decompose(
        query, key, value, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa)


_AUTOGRAD_LIB = torch.library.Library("aten", "IMPL")
_AUTOGRAD_LIB.impl("scaled_dot_product_attention", _attention, "AutogradLazy")
