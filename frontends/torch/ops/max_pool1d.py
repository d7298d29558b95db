"""``max_pool1d`` on lazy tensors refuses the element types eager's CPU refuses, with its message.

Eager's ``max_pool1d`` (a C++ composite) checks its arguments, then picks a
kernel by device: on the CPU, with no gradient to record, its own
``max_pool1d_impl``, which takes floating types only (``"max_pool1d_impl"
not implemented for 'Long'``, for 'Bool', for 'ComplexHalf'); on other
devices, and for a gradient, ``max_pool2d_with_indices`` of the input with a
unit dim, which takes integers too. The lazy device is given the latter, so
it pooled integer and boolean tensors that eager's CPU refuses, and refused
chalf with a message naming ``max_pool2d``.

Here, where eager's CPU would run its own kernel, an element type not yet
known to be taken is asked of eager first, in eager's order: the arguments'
checks on a meta stand-in of the input (eager's messages: the composite runs
them on any device), then ``max_pool1d_impl`` itself on a one-element CPU
tensor of the type. Then the composite runs on the lazy device as before.
"""

from __future__ import annotations

import torch

from lazycore.ir.memo import Memo

aten = torch.ops.aten

_TAKEN = Memo("torch.max_pool1d_types", 64)
"""The element types eager's CPU ``max_pool1d_impl`` took."""


def _max_pool1d(x, *args, **kwargs):
    if _TAKEN.get(x.dtype) is None and not (x.requires_grad and torch.is_grad_enabled()):
        aten.max_pool1d.default(torch.empty(x.shape, dtype=x.dtype, device="meta"), *args, **kwargs)
        with torch.no_grad():
            aten.max_pool1d.default(torch.zeros((1,) * x.dim(), dtype=x.dtype), [1])
        _TAKEN.put(x.dtype, True)
    return aten.max_pool1d.default._op_dk(torch._C.DispatchKey.CompositeImplicitAutograd, x, *args, **kwargs)


_LIB = torch.library.Library("aten", "IMPL")
_LIB.impl("max_pool1d", _max_pool1d, "AutogradLazy")
