"""``torch.cond``, ``torch._higher_order_ops.while_loop`` and ``scan`` on the lazy device.

Called eagerly, these torch functions check their arguments, flatten them
and then run their higher-order operator (``cond_op``, ``while_loop_op``,
``scan_op``) compiled by dynamo (``torch._higher_order_ops.utils._hop_compile_and_call``).
Dynamo cannot trace a lazy tensor (a wrapper subclass whose value is a
lazycore handle, not an inner tensor): torch raises
``UncapturedHigherOrderOpError``. So, as for ``torch._lazy`` (:mod:`.hooks`),
that one step is wrapped when ``lazycore.torch`` is imported: a call with
lazy tensors runs the operator directly, as torch does under a dispatch mode
that dynamo skips, and any other call compiles as before. The operator
dispatches on the lazy tensor type to the rules registered here with
``HigherOrderOperator.py_impl(Tensor)`` (the "natural" calling convention
torch uses for subclasses: the operator's own arguments), which record one
loop or branch of the lazy graph (:mod:`lazycore.trace.control`, each body
traced once). A graph that calls the operators (an exported or FX program
run eagerly) records the same loops.

Errors are torch's types: torch's own argument checks run first, and a body
whose outputs do not match its inputs raises RuntimeError at the call
(dynamo's errors are RuntimeErrors). Gradients do not flow through these
loops yet: a call that autograd would have to differentiate (an input, or a
tensor a body reads, requires grad) raises instead of returning values
without history. The operator runs below autograd; the bodies are traced
with the caller's grad mode and dispatch state, so a body reading a tensor
that requires grad is seen.
"""

from __future__ import annotations

import torch
import torch.utils._pytree as pytree

from lazycore.trace import control

from .tensor import Tensor


class _Caller:
    """The grad mode and dispatch-key state of the call that ran an operator
    on lazy tensors (the operator itself runs below autograd)."""

    __slots__ = ("original", "grad", "include", "exclude")

    def __init__(self):
        self.original = None
        """torch's ``_hop_compile_and_call``."""
        self.grad = self.include = self.exclude = None

    def tracing(self):
        """Trace a body as the caller would run it: autograd on if it was."""
        if self.grad is None:
            return _Nothing()
        return _Restored(self)


class _Nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _Restored:
    def __init__(self, caller: _Caller):
        self.caller = caller

    def __enter__(self):
        c = self.caller
        self.grad_mode = torch.enable_grad() if c.grad else torch.no_grad()
        self.keys = torch._C._ForceDispatchKeyGuard(c.include, c.exclude)
        self.keys.__enter__()
        self.grad_mode.__enter__()
        return self

    def __exit__(self, *exc):
        self.grad_mode.__exit__(*exc)
        self.keys.__exit__(*exc)
        return False


CALLER = _Caller()


def _is_lazy(x) -> bool:
    return isinstance(x, Tensor)


def _any_lazy(*trees) -> bool:
    return any(_is_lazy(x) for tree in trees for x in pytree.tree_leaves(tree))


def _no_grad_needed(what: str, *trees) -> None:
    if torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad
                                       for tree in trees for x in pytree.tree_leaves(tree)):
        raise RuntimeError(
            f"{what} on the lazy device: gradients through its loop are not supported yet, and this call needs "
            "them (an input or a tensor its body reads requires grad); run it under torch.no_grad()")


def _checked(what: str, fn):
    """``fn`` for tracing, as the caller would run it; its outputs must not
    need autograd (a body that reads a tensor requiring grad), which the loop
    could not give back."""

    def traced(*args):
        with CALLER.tracing():
            out = fn(*args)
            _no_grad_needed(what, out)
        return out

    return traced


def _as_runtime_error(call):
    """Run ``call()``; lazycore's TypeError for mismatched bodies is torch's RuntimeError."""
    try:
        return call()
    except TypeError as e:
        raise RuntimeError(str(e)) from e


def _pred(pred) -> Tensor:
    if isinstance(pred, torch.Tensor):
        if pred.numel() != 1:
            raise RuntimeError(f"Expected pred to be bool or single-element tensor, but got {pred}.")
        if pred.dtype != torch.bool:
            raise RuntimeError(f"Expected pred to be bool or a boolean tensor with a single item, got {pred.dtype}")
        return pred.reshape(())
    return pred


# --- the operators, for graphs that call them -----------------------------------------


def _cond_op(pred, true_fn, false_fn, operands):
    return _as_runtime_error(lambda: control.cond(
        _pred(pred), _checked("torch.cond", true_fn), _checked("torch.cond", false_fn), *operands))


def _while_loop_op(cond_fn, body_fn, carried_inputs, additional_inputs):
    additional = tuple(additional_inputs)

    def c(state):
        return _pred(cond_fn(*state, *additional))

    def b(state):
        out = body_fn(*state, *additional)
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)

    return _as_runtime_error(lambda: tuple(control.while_loop(
        _checked("torch.while_loop", c), _checked("torch.while_loop", b), tuple(carried_inputs))))


def _scan_op(combine_fn, init, xs, additional_inputs):
    # torch's scan() moved the scanned dim first and flipped a reverse scan
    n = len(init)

    def step(carry, x):
        out = combine_fn(*carry, *x, *additional_inputs)
        return list(out[:n]), list(out[n:])

    carry, ys = _as_runtime_error(lambda: control.scan(_checked("torch.scan", step), list(init), list(xs)))
    return list(carry) + list(ys)


def _hop_compile_and_call(fn, args, kwargs=None):
    """torch's step that compiles an operator call with dynamo; with lazy
    tensors among the arguments, the call runs directly instead."""
    if not _any_lazy(args, kwargs):
        return CALLER.original(fn, args, kwargs)
    _no_grad_needed("this higher-order operator", args, kwargs)
    saved = (CALLER.grad, CALLER.include, CALLER.exclude)  # operators nest
    CALLER.grad = torch.is_grad_enabled()
    CALLER.include = torch._C._dispatch_tls_local_include_set()
    CALLER.exclude = torch._C._dispatch_tls_local_exclude_set()
    try:
        return fn(*args, **(kwargs or {}))
    finally:
        CALLER.grad, CALLER.include, CALLER.exclude = saved


def install() -> None:
    """Let operator calls with lazy tensors skip dynamo, and give the
    operators their lazy rules (once)."""
    if CALLER.original is not None:
        return
    import torch._higher_order_ops.utils as hop_utils
    from torch._higher_order_ops.cond import cond_op
    from torch._higher_order_ops.scan import scan_op
    from torch._higher_order_ops.while_loop import while_loop_op

    CALLER.original = hop_utils._hop_compile_and_call
    hop_utils._hop_compile_and_call = _hop_compile_and_call
    cond_op.py_impl(Tensor)(_cond_op)
    while_loop_op.py_impl(Tensor)(_while_loop_op)
    scan_op.py_impl(Tensor)(_scan_op)
