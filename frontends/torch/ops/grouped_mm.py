"""``torch._grouped_mm`` (``F.grouped_mm``) on lazy tensors, as the products it stands for.

transformers' mixture-of-experts layers (Mixtral, Qwen-MoE, ...) run their
experts through it by default (``experts_implementation="grouped_mm"``) on
every device but the CPU, and so on the lazy device: the tokens sorted by
expert, ``offs`` the running count of each expert's tokens. Eager's CPU
kernel takes float32; torch's meta function, which every lowering is checked
against, still refuses all but bfloat16 (it lists the CUDA kernel's fast
path's conditions, not the fallback both devices now have), so the op cannot
be lowered (it went to eager's kernel, a barrier per expert layer, forward and
backward). It is written here, below autograd's own formula and above the
per-op dispatch, as the products it stands for, in torch ops on the lazy
device: each group's product over every position, then each position's own
group's picked (as jax's ``ragged_dot`` off TPUs): G times the multiplies of
eager's per-group loop, but no size that depends on ``offs``' values. Values
outside a group are masked out before any product, so an infinity or NaN in
one expert's tokens or weights reaches no other's result or gradient, as in
eager's loop. Rows past ``offs[-1]``, which eager leaves unwritten, are zeros.

Eager's checks (dtypes, ``offs`` int32, 16-byte strides, no bias) run as its
CPU kernel on zero stand-ins of the arguments' layouts, once per layout.
Under ``torch.inference_mode`` autograd's keys are skipped and the op goes to
eager's kernel, a counted fallback, as before.
"""

from __future__ import annotations

import torch

from lazycore.ir.memo import Memo

aten = torch.ops.aten

_CHECKED = Memo("torch.grouped_mm_checks", 256)
"""The argument layouts eager's kernel accepted."""


def _layout(t):
    return None if t is None else (tuple(t.shape), tuple(t.stride()), t.dtype)


def _stand_in(t):
    if t is None:
        return None
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype).zero_()


def _check_as_eager(a, b, offs, bias, out_dtype):
    key = (_layout(a), _layout(b), _layout(offs), _layout(bias), out_dtype)
    if _CHECKED.get(key) is not None:
        return
    # zero offsets: every group empty, so the kernel checks and multiplies nothing
    aten._grouped_mm.default(_stand_in(a), _stand_in(b), _stand_in(offs), _stand_in(bias), out_dtype)
    _CHECKED.put(key, True)


def _groups(offs, n: int):
    """``(G, n)`` bool: position i belongs to group g (``offs[g-1] <= i < offs[g]``)."""
    pos = torch.arange(n, device=offs.device, dtype=torch.int32)
    group = (offs.to(torch.int32).unsqueeze(0) <= pos.unsqueeze(1)).sum(1)  # (n,): ends at or before i
    return group.unsqueeze(0) == torch.arange(offs.shape[0], device=offs.device).unsqueeze(1)


def _pick(every, mask, dim: int):
    """``every[g]`` where ``mask[g]`` along ``dim`` of the result, zero where no group's is."""
    out = torch.zeros_like(every[0])
    for g in range(every.shape[0]):
        out = torch.where(mask[g].unsqueeze(1 - dim), every[g], out)
    return out


def _grouped_mm(a, b, offs=None, bias=None, out_dtype=None):
    _check_as_eager(a, b, offs, bias, out_dtype)
    if offs is None:  # 3-D x 3-D: one product per group
        out = torch.bmm(a, b)
    elif a.dim() == 2 and b.dim() == 3:  # rows of a in groups: (S, K) x (G, K, N) -> (S, N)
        mask = _groups(offs.to(a.device), a.shape[0])  # (G, S)
        out = _pick(torch.bmm(torch.where(mask.unsqueeze(2), a, 0), b), mask, 0)
    elif a.dim() == 3 and b.dim() == 2:  # columns of b in groups: (G, M, K) x (K, N) -> (M, N)
        mask = _groups(offs.to(a.device), b.shape[1])  # (G, N)
        out = _pick(torch.bmm(a, torch.where(mask.unsqueeze(1), b, 0)), mask, 1)
    else:  # the contraction in groups: (M, K) x (K, N) -> (G, M, N), each group's terms alone
        mask = _groups(offs.to(a.device), a.shape[1])  # (G, K)
        out = torch.bmm(torch.where(mask.unsqueeze(1), a, 0), torch.where(mask.unsqueeze(2), b, 0))
    return out if out_dtype is None else out.to(out_dtype)


_LIB = torch.library.Library("aten", "IMPL")
_LIB.impl("_grouped_mm", _grouped_mm, "AutogradLazy")
