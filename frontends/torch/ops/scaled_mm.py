"""``torch._scaled_mm`` (float8 matrix products with scales) on lazy tensors.

The float8 training and inference recipes (torchao's ``Float8Linear``, a
hand-written per-tensor or per-row scaling) multiply float8 operands through
``torch._scaled_mm(a, b, scale_a, scale_b, bias=None, scale_result=None,
out_dtype=None, use_fast_accum=False)``. Torch's meta function has no CPU
rules for it, so the op went to eager's kernel: a counted fallback and a
barrier for every product (issue 43, item 5).

It is written here, below autograd and above the per-op dispatch (as
``_grouped_mm`` is), as the products eager's CPU kernel computes when it
emulates them (``_scaled_mm_out_cpu_emulated``, aten/native/Blas.cpp): each
operand converted to float32 and multiplied by its scale (one number, or
``scale_a`` per row of ``a`` and ``scale_b`` per column of ``b``), their
float32 product, plus ``bias``, times ``1 / scale_result`` when the result
is float8 (``out_dtype`` given as a float8 type), converted to ``out_dtype``
(``a``'s type by default; float8 saturates as c10 converts). A float8
product is exact in float32; what can differ from eager is the order XLA
sums a row's products in (and, on a CPU with AMX, eager's oneDNN kernel for
one scale per operand, which scales the sum instead of the operands).

Eager's checks (float8 operands, float32 scales of the right sizes and
strides, bias size) run as its own kernel on zero stand-ins of the
arguments, once per layout, so a bad call raises eager's error at the call.
"""

from __future__ import annotations

import torch

from lazycore.ir.memo import Memo

from .grouped_mm import _layout, _stand_in  # eager asked once per layout, on zeroed stand-ins, as for _grouped_mm

aten = torch.ops.aten

FLOAT8 = (torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz)

_CHECKED = Memo("torch.scaled_mm_checks", 256)
"""The argument layouts eager's kernel accepted."""


def _check_as_eager(a, b, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum):
    key = (_layout(a), _layout(b), _layout(scale_a), _layout(scale_b), _layout(bias), _layout(scale_result),
           out_dtype, bool(use_fast_accum))
    if _CHECKED.get(key) is not None:
        return
    aten._scaled_mm.default(_stand_in(a), _stand_in(b), _stand_in(scale_a), _stand_in(scale_b), _stand_in(bias),
                            _stand_in(scale_result), out_dtype, use_fast_accum)
    _CHECKED.put(key, True)


_OVERFLOW = Memo("torch.scaled_mm_overflow", 64)
"""(operand types, result type) -> what eager's kernel gives for a result past
the type's range, when that is not what ``.to()`` gives (else False)."""


def _overflow(a_dtype, b_dtype, out):
    """Eager's kernel with one number per operand may convert its float32
    result otherwise than ``.to()`` does: on a CPU with AMX it is oneDNN's
    kernel, whose float8 results overflow to NaN (or infinity) where c10's
    conversion saturates at the type's largest value. Asked of eager once per
    (operand types, result type): the (positive, negative) results of a
    product past the range, or False where ``.to()`` gives them."""
    key = (a_dtype, b_dtype, out, torch._C._get_mkldnn_enabled())
    found = _OVERFLOW.get(key)
    if found is None:
        a = torch.tensor([[1.0], [-1.0]]).mul(torch.finfo(a_dtype).max).to(a_dtype)  # (2, 1)
        b = torch.tensor([[torch.finfo(b_dtype).max]]).to(b_dtype)  # (1, 1): products past any float8 range
        one = torch.tensor(1.0)
        got = aten._scaled_mm.default(a, b, one, one, None, None, out, False).float()
        want = (a.float() @ b.float()).to(out).float()
        found = False if torch.equal(got, want) or out not in FLOAT8 else (float(got[0, 0]), float(got[1, 0]))
        _OVERFLOW.put(key, found)
    return found


def _scaled_mm(a, b, scale_a, scale_b, bias=None, scale_result=None, out_dtype=None, use_fast_accum=False):
    _check_as_eager(a, b, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum)
    out_type = a.dtype if out_dtype is None else out_dtype
    overflow = False
    if scale_a.numel() == 1 and scale_b.numel() == 1:  # one scale per operand
        scale_a, scale_b = scale_a.reshape(()).float(), scale_b.reshape(()).float()  # (eager: item<float>())
        overflow = _overflow(a.dtype, b.dtype, out_type)
    out = torch.mm(a.float() * scale_a, b.float() * scale_b)
    if bias is not None:
        out = out + bias.float()
    if out_dtype in FLOAT8 and scale_result is not None:  # (out_dtype not given: no result scale, as eager)
        out = out * (1 / scale_result.reshape(()).float())
    result = out.to(out_type)
    if overflow:
        # past the midpoint between the largest value and the next power's step: rounds out of range
        top = torch.tensor(torch.finfo(out_type).max).to(out_type)
        below = (top.view(torch.uint8) - 1).view(out_type)  # the next value down
        limit = float(top) + (float(top) - float(below)) / 2
        high = torch.full((), overflow[0], dtype=out_type, device=out.device)
        low = torch.full((), overflow[1], dtype=out_type, device=out.device)
        result = torch.where(out > limit, high, torch.where(out < -limit, low, result))
    return result


_LIB = torch.library.Library("aten", "IMPL")
_LIB.impl("_scaled_mm", _scaled_mm, "AutogradLazy")
