"""Where eager's CPU has no complex32 (chalf) kernel: eager's error, at the call.

Eager's CPU computes chalf in a few kernels only (copies and fills, the
arithmetic, comparisons, views, ``sum``, ``mm``...): each kernel's dispatch
macro lists the element types it takes, and any other kernel refuses with
``NotImplementedError: "<kernel>" not implemented for 'ComplexHalf'``. The
lazy device stores chalf as complex<f32> and could compute nearly every op,
which would be an answer where eager's is an error. Torch publishes no table
of a kernel's element types (the macros are C++; OpInfo's ``dtypesIfCPU``
covers OpInfos, not ATen ops, and is test data), so eager's kernel is asked
itself: once per call signature (where the dispatcher checks an op's
arguments, :func:`refuse`), an ATen op given a chalf tensor (or asked for a
chalf result) runs eager's CPU kernel on stand-ins of its arguments, and a
refusal of the element type is the user's exception, with eager's message.

Which exception is a refusal of the element type, rather than of the
stand-ins' values (ones; zeros in integer and boolean tensors, an index valid
in any non-empty dim), is eager's to say too: the call fails with chalf and
succeeds with the chalf tensors in float32 or complex64 (eager's CPU sorts
float32, refuses every complex type: "Sort does not support complex dtypes",
a RuntimeError). The stand-ins have the arguments' full sizes and stride
order (a kernel may take one layout and refuse another, or skip a dim of one
element, or pick another kernel by size: ``isin``); a large read-only one
repeats one element. A draw runs with the CPU generator's state saved and
restored, and no generator of the user's is touched.
"""

from __future__ import annotations

import torch

CHALF = torch.complex32
_FULL_LIMIT = 1 << 22
"""Elements a read-only stand-in holds at most; a larger one repeats one element."""
_REAL_TYPES = (torch.float32, torch.complex64)
"""What a chalf argument becomes for the second question: does eager take the call then?"""


def _holds_chalf(x) -> bool:
    if isinstance(x, torch.Tensor):
        return x.dtype is CHALF
    if isinstance(x, (list, tuple)):
        return any(_holds_chalf(v) for v in x)
    return x is CHALF


def involves_chalf(margs, mkwargs) -> bool:
    """A chalf tensor among the (meta) arguments, or a chalf ``dtype=``."""
    return any(_holds_chalf(x) for x in margs) or any(_holds_chalf(v) for v in mkwargs.values())


def _stand_in(x, written: bool, chalf_as):
    if isinstance(x, torch.Tensor):
        dtype = chalf_as if x.dtype is CHALF else x.dtype
        fill = 1 if (dtype.is_floating_point or dtype.is_complex) else 0
        if not written and x.numel() > _FULL_LIMIT:
            return torch.full((1,) * x.dim(), fill, dtype=dtype).expand(x.shape)
        # (empty_like keeps the strides of a dense tensor, the stride order of another)
        return torch.empty_like(x, dtype=dtype, device="cpu").fill_(fill)
    if isinstance(x, (list, tuple)):
        return type(x)(_stand_in(v, written, chalf_as) for v in x)
    if x is CHALF:
        return chalf_as
    if isinstance(x, torch.device) and x.type == "meta":
        return torch.device("cpu")
    if isinstance(x, torch.Generator):
        return None  # (the default CPU generator, whose state is restored)
    return x


def _probe(func, margs, mkwargs, written, chalf_as=CHALF) -> None:
    args = [_stand_in(x, w, chalf_as) for x, w in zip(margs, written)]
    kwargs = {k: _stand_in(v, k == "out", chalf_as) for k, v in mkwargs.items()}
    cpus = _CPUS.get(func)
    if cpus is not None:
        func, args, kwargs = cpus(*args, **kwargs)
    func(*args, **kwargs)


def _dropouts(input, p, train=None):
    # (dropout's composite hands an accelerator native_dropout only with 0 < p < 1, training)
    return torch.ops.aten.dropout.default, (input, p, True if train is None else train), {}


_CPUS = {torch.ops.aten.native_dropout.default: _dropouts}
"""ATen ops that torch's composites hand the lazy device (a device they treat
as an accelerator) where eager's CPU runs another, by the call eager's CPU
makes: ``dropout`` in training picks ``native_dropout`` for accelerators
(``is_fused_kernel_acceptable``), and ``bernoulli_`` on the CPU, which
refuses chalf where ``native_dropout`` takes it. (A ``native_dropout`` the
user calls on chalf is refused with dropout's message: the lazy device
computes none.)"""


def refuse(func, margs, mkwargs) -> None:
    """Raise eager's exception where eager's CPU kernel for ``func`` refuses the chalf
    element type of these (meta) arguments; return where it takes them. Call once per
    call signature (its answer is the signature's), after the meta kernel took it."""
    if func.namespace != "aten" or not involves_chalf(margs, mkwargs):
        return
    schema = func._schema.arguments
    written = [i < len(schema) and schema[i].alias_info is not None and schema[i].alias_info.is_write
               for i in range(len(margs))]
    seeded = torch.Tag.nondeterministic_seeded in func.tags
    state = torch.random.get_rng_state() if seeded else None
    try:
        try:
            _probe(func, margs, mkwargs, written)
            return
        except Exception as e:
            refused = e
        for real in _REAL_TYPES:
            try:
                _probe(func, margs, mkwargs, written, real)
            except Exception:
                continue
            raise refused
    finally:
        if seeded:
            torch.random.set_rng_state(state)
