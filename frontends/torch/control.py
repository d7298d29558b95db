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
(dynamo's errors are RuntimeErrors).

Gradients: ``scan`` differentiates (:class:`_ScanGrad`: the backward is a
second loop, over the steps in reverse), so a stack of layers whose weights
are stacked and scanned trains as eager does; it refuses a step that reads a
tensor requiring grad other than through its arguments (torch's own eager
scan does not allow that either). ``cond`` (:class:`_CondGrad`) and
``while_loop`` (:class:`_WhileGrad`) differentiate with respect to their
inputs and to the parameters their bodies close over, which eager's lifts
through dynamo. The operator runs below autograd; the bodies are traced with
the caller's grad mode and dispatch state, so a body reading a tensor that
requires grad is seen.
"""

from __future__ import annotations

import functools

import torch
import torch.utils._pytree as pytree
from torch.utils import _python_dispatch

from lazycore.trace import control

from . import lowering
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


class _GradNeeded(RuntimeError):
    """A body's output requires grad where the loop cannot give it back."""


def _no_grad_needed(what: str, *trees) -> None:
    if torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad
                                       for tree in trees for x in pytree.tree_leaves(tree)):
        raise _GradNeeded(
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


def pure_step(fn):
    """Mark ``fn``, a scan step its caller keeps and hands to every call
    (``scan_op(fn, ...)``), as a function of its arguments alone: its loop
    bodies, forward and backward, are traced once and serve every later
    call with arguments of the same types (:data:`lazycore.trace.control.BODIES`);
    a traced LSTM layer otherwise traces its cell four times a call. Not for
    a step that reads anything else (a module's attributes, a closed-over
    tensor: those would be the first call's)."""
    fn.lazycore_pure_step = True
    return fn


def _key(fn, *parts):
    """The key under which a scan's bodies for ``fn`` are kept (with ``parts``,
    what else they depend on), or None where they are traced at every call:
    ``fn`` not a :func:`pure_step`, or a mode that could change its ops active."""
    if isinstance(fn, _FlatStep):
        if fn.eager:
            return None
        fn = fn.combine_fn
    if (not getattr(fn, "lazycore_pure_step", False) or torch._C._is_torch_function_mode_enabled()
            or _python_dispatch._get_current_dispatch_mode() is not None):
        return None
    return (fn, *parts, torch.is_grad_enabled(), CALLER.grad, repr(CALLER.include), repr(CALLER.exclude))


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


class _FlatStep:
    """A scan's ``combine_fn`` giving one flat list of leaves (carry, then y).
    Called from a graph, ``combine_fn`` gives that list already; called from
    ``torch.scan``'s eager path it is torch's ``wrap_combine_fn_flat``, which
    gives the user's ``(carry, y)`` pytrees, and that path expects the result
    as those pytrees too (the compiled call it replaces returns them)."""

    def __init__(self, combine_fn):
        from torch._higher_order_ops.scan import wrap_combine_fn_flat

        self.combine_fn = combine_fn
        self.eager = isinstance(combine_fn, functools.partial) and combine_fn.func is wrap_combine_fn_flat
        self.y_spec = None

    def __call__(self, *args):
        out = self.combine_fn(*args)
        if not self.eager:
            return list(out)
        carry, y = out
        y_leaves, self.y_spec = pytree.tree_flatten(y)
        return [*pytree.tree_leaves(carry), *y_leaves]

    def result(self, flat: list, n_init: int):
        if not self.eager:
            return list(flat)
        spec = self.combine_fn.keywords["spec_init"]
        return pytree.tree_unflatten(flat[:n_init], spec), pytree.tree_unflatten(flat[n_init:], self.y_spec)


def _scan_op(combine_fn, init, xs, additional_inputs):
    # torch's scan() moved the scanned dim first and flipped a reverse scan
    n = len(init)
    flat = _FlatStep(combine_fn)

    def step(carry, x):
        c, a = carry[:n], carry[n:]
        out = flat(*c, *x, *a)
        return list(out[:n]) + list(a), list(out[n:])

    key = _key(flat, "no grad", n, len(xs))
    carried = list(init) + list(additional_inputs)
    carry, ys = _as_runtime_error(lambda: control.scan(_checked("torch.scan", step), carried, list(xs), key=key))
    return flat.result(list(carry[:n]) + list(ys), n)


def _hop_compile_and_call(fn, args, kwargs=None):
    """torch's step that compiles an operator call with dynamo; with lazy
    tensors among the arguments, the call runs directly instead."""
    if not _any_lazy(args, kwargs):
        return CALLER.original(fn, args, kwargs)
    saved = (CALLER.grad, CALLER.include, CALLER.exclude)  # operators nest
    CALLER.grad = torch.is_grad_enabled()
    CALLER.include = torch._C._dispatch_tls_local_include_set()
    CALLER.exclude = torch._C._dispatch_tls_local_exclude_set()
    try:
        return fn(*args, **(kwargs or {}))
    finally:
        CALLER.grad, CALLER.include, CALLER.exclude = saved


# --- autograd --------------------------------------------------------------------------


def _needs_grad(*trees) -> bool:
    return torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad
                                           for tree in trees for x in pytree.tree_leaves(tree))


def _zeros_like(t):
    return torch.zeros(t.shape, dtype=t.dtype, device=t.device)


def _unrolled_grads(ctx, init, xs, add, grads) -> list:
    """The gradients of a scan's inputs as autograd differentiates its steps
    unrolled, recomputed from the saved inputs: for a backward that is itself
    differentiated (a gradient penalty through an LSTM), which the reverse
    loop, recorded below autograd, is not (its gradients would be missing)."""
    n_init = len(init)
    with torch.enable_grad():
        carry, ys = list(init), []
        for t in range(xs[0].shape[0]):
            out = ctx.combine_fn(*carry, *[x[t] for x in xs], *add)
            carry, y = list(out[:n_init]), list(out[n_init:])
            ys.append(y)
        outs = carry + [torch.stack([y[k] for y in ys]) for k in range(len(ys[0]))] if ys else carry
        pairs = [(o, g) for o, g in zip(outs, grads) if g is not None and o.requires_grad]
        inputs = [*init, *xs, *add]
        wanted = [t for t, want in zip(inputs, ctx.needs_input_grad[3:]) if want]
        found = iter(torch.autograd.grad([o for o, _ in pairs], wanted, [g for _, g in pairs], create_graph=True,
                                         allow_unused=True) if pairs and wanted else [])
    return [next(found) if want else None for want in ctx.needs_input_grad[3:]]


class _ScanGrad(torch.autograd.Function):
    """A scan over lazy tensors that autograd differentiates: the forward
    loop also stacks the carry each step started from; the backward is one
    loop too, over the steps in reverse, that runs the step again on them
    and takes its vector-Jacobian product with ``torch.autograd.grad`` (the
    step's own autograd formulas, traced once into the loop's body). The
    gradients of the additional inputs add up in its carry."""

    @staticmethod
    def forward(ctx, combine_fn, n_init, n_xs, *flat):
        init, xs, add = flat[:n_init], flat[n_init:n_init + n_xs], flat[n_init + n_xs:]

        def step(carry, x):  # (the additional inputs carried, not closed over: see _key)
            c, a = carry[:n_init], carry[n_init:]
            out = combine_fn(*c, *x, *a)
            return list(out[:n_init]) + list(a), list(out[n_init:]) + list(c)

        key = _key(combine_fn, "forward", n_init, n_xs)
        carry, stacked = _as_runtime_error(lambda: control.scan(_checked("torch.scan", step), list(init) + list(add),
                                                                list(xs), key=key))
        carry = carry[:n_init]
        n_y = len(stacked) - n_init
        ys, starts = stacked[:n_y], stacked[n_y:]
        ctx.save_for_backward(*xs, *add, *starts, *init)
        ctx.combine_fn = combine_fn
        ctx.counts = (n_init, n_xs, len(add))
        ctx.y_types = [(y.shape, y.dtype) for y in ys]
        return (*carry, *ys)

    @staticmethod
    def backward(ctx, *grads):
        n_init, n_xs, n_add = ctx.counts
        saved = ctx.saved_tensors
        xs, add, starts = saved[:n_xs], saved[n_xs:n_xs + n_add], saved[n_xs + n_add:n_xs + n_add + n_init]
        if torch.is_grad_enabled():  # a backward that is itself differentiated (create_graph=True)
            return (None, None, None, *_unrolled_grads(ctx, saved[n_xs + n_add + n_init:], xs, add, grads))
        device = starts[0].device if starts else xs[0].device
        g_carry = [g if g is not None else _zeros_like(s[0]) for g, s in zip(grads[:n_init], starts)]
        g_ys = [g if g is not None else torch.zeros(shape, dtype=dtype, device=device)
                for g, (shape, dtype) in zip(grads[n_init:], ctx.y_types)]
        combine_fn = ctx.combine_fn

        def step(carry, x):
            g_c, g_add, add = carry[:n_init], carry[n_init:n_init + n_add], carry[n_init + n_add:]
            x_t, c_t, g_y = x[:n_xs], x[n_xs:n_xs + n_init], x[n_xs + n_init:]
            with torch.enable_grad():
                ins = [t.detach().requires_grad_(t.is_floating_point()) for t in (*c_t, *x_t, *add)]
                out = combine_fn(*ins)
                pairs = [(o, g) for o, g in zip(out, (*g_c, *g_y)) if o.requires_grad]
                wrt = [t for t in ins if t.requires_grad]
                found = iter(torch.autograd.grad([o for o, _ in pairs], wrt, [g for _, g in pairs],
                                                 allow_unused=True) if pairs and wrt else [None] * len(wrt))
            g_in = [next(found) if t.requires_grad else None for t in ins]
            g_in = [g if g is not None else _zeros_like(t) for g, t in zip(g_in, ins)]
            g_c_prev, g_x, g_a = g_in[:n_init], g_in[n_init:n_init + n_xs], g_in[n_init + n_xs:]
            return list(g_c_prev) + [a + b for a, b in zip(g_add, g_a)] + list(add), list(g_x)

        carry, g_xs = control.scan(step, g_carry + [_zeros_like(a) for a in add] + list(add),
                                   list(xs) + list(starts) + g_ys, reverse=True,
                                   key=_key(combine_fn, "backward", n_init, n_xs, n_add))
        grads_init, grads_add = carry[:n_init], carry[n_init:n_init + n_add]

        # only what autograd asks for: a gradient handed back and dropped stays
        # pending (a program output) until it is collected
        wanted = ctx.needs_input_grad[3:]
        out = [g if want and t.is_floating_point() else None
               for g, t, want in zip([*grads_init, *g_xs, *grads_add], [*starts, *xs, *add], wanted)]
        return (None, None, None, *out)


def _grad_leaves(fns, operands) -> tuple[list, object]:
    """The leaf tensors requiring grad that the branches ``fns`` read other
    than through ``operands`` (parameters they close over), found by tracing
    each once with autograd on: eager torch's cond lifts them as inputs (dynamo
    does), so their gradients flow, zeros from the branch not taken. Also the
    structure of the first branch's result."""
    found: dict[int, torch.Tensor] = {}
    specs = []
    with torch.enable_grad():
        ins = [t.detach().requires_grad_(t.is_floating_point()) if isinstance(t, torch.Tensor) else t
               for t in operands]
        own = {id(t) for t in ins}
        for fn in fns:
            outs, spec = pytree.tree_flatten(fn(*ins))
            specs.append(spec)
            stack = [o.grad_fn for o in outs if isinstance(o, torch.Tensor) and o.grad_fn is not None]
            seen = set()
            while stack:
                node = stack.pop()
                if node is None or id(node) in seen:
                    continue
                seen.add(id(node))
                leaf = getattr(node, "variable", None)  # AccumulateGrad: a leaf's
                if leaf is not None:
                    if id(leaf) not in own:
                        found.setdefault(id(leaf), leaf)
                    continue
                stack.extend(n for n, _ in node.next_functions)
    return list(found.values()), specs[0]


class _CondGrad(torch.autograd.Function):
    """A cond over lazy tensors that autograd differentiates: the backward is
    a cond too, on the same predicate, whose branches take the vector-Jacobian
    product of their forward branch (``torch.autograd.grad``, traced once
    into the branch) with respect to the operands and the parameters the
    branches close over; the branch not taken gives zeros for what it does
    not read, as eager's does."""

    @staticmethod
    def forward(ctx, pred, true_fn, false_fn, n_ops, *flat):
        ops, leaves = flat[:n_ops], flat[n_ops:]

        def branch(fn):
            return lambda *args: pytree.tree_leaves(fn(*args))

        got = _as_runtime_error(lambda: control.cond(_pred(pred), branch(true_fn), branch(false_fn), *ops))
        ctx.fns = (true_fn, false_fn)
        ctx.n_ops = n_ops
        ctx.pred = pred if not isinstance(pred, torch.Tensor) else None
        ctx.save_for_backward(*([pred] if isinstance(pred, torch.Tensor) else []), *ops, *leaves)
        ctx.out_types = [(o.shape, o.dtype) for o in got]
        return tuple(got)

    @staticmethod
    def backward(ctx, *grads):
        saved = ctx.saved_tensors
        if ctx.pred is None:
            pred, saved = saved[0], saved[1:]
        else:
            pred = ctx.pred
        n = ctx.n_ops
        ops, leaves = saved[:n], saved[n:]
        device = (ops or leaves)[0].device
        grads = [g if g is not None else torch.zeros(shape, dtype=dtype, device=device)
                 for g, (shape, dtype) in zip(grads, ctx.out_types)]

        def vjp(fn):
            def run(*args):
                o, gs = args[:n], args[n:]
                with torch.enable_grad():
                    ins = [t.detach().requires_grad_(t.is_floating_point()) for t in o]
                    outs = pytree.tree_leaves(fn(*ins))
                    pairs = [(out, g) for out, g in zip(outs, gs) if out.requires_grad]
                    wrt = [t for t in ins if t.requires_grad] + list(leaves)
                    found = iter(torch.autograd.grad([p for p, _ in pairs], wrt, [g for _, g in pairs],
                                                     allow_unused=True, retain_graph=True)
                                 if pairs and wrt else [None] * len(wrt))
                g_in = [next(found) if t.requires_grad else None for t in ins] + [next(found) for _ in leaves]
                return [g if g is not None else _zeros_like(t) for g, t in zip(g_in, [*ins, *leaves])]

            return run

        got = control.cond(_pred(pred), vjp(ctx.fns[0]), vjp(ctx.fns[1]), *ops, *grads)
        wanted = ctx.needs_input_grad[4:]
        out = [g if want and t.is_floating_point() else None for g, t, want in zip(got, [*ops, *leaves], wanted)]
        return (None, None, None, None, *out)


def _cond_with_grad(pred, true_fn, false_fn, operands):
    """``cond_op``'s call differentiated (an operand or a parameter a branch
    closes over requires grad)."""
    operands = tuple(operands)
    leaves, spec = _grad_leaves((true_fn, false_fn), operands)
    got = _CondGrad.apply(pred, true_fn, false_fn, len(operands), *operands, *leaves)
    return pytree.tree_unflatten(list(got), spec)


class _WhileGrad(torch.autograd.Function):
    """A while_loop over lazy tensors that autograd differentiates. Its trip
    count is a value, so the backward reads it (a barrier, as reading any
    value does), runs the loop again as a scan of that many steps to stack
    the carry each step started from, then scans those in reverse taking
    each step's vector-Jacobian product (``torch.autograd.grad``, traced
    once into the loop's body) with respect to the carry, the additional
    inputs and the parameters the body closes over (eager's while_loop lifts
    them), adding up the last two in the loop's carry."""

    @staticmethod
    def forward(ctx, cond_fn, body_fn, n_carry, n_add, *flat):
        carried, add = flat[:n_carry], flat[n_carry:n_carry + n_add]

        def c(state):
            return _pred(cond_fn(*state[1:], *add))

        def b(state):
            return (state[0] + 1, *_as_tuple(body_fn(*state[1:], *add)))

        count = torch.zeros((), dtype=torch.int64, device=flat[0].device)
        got = _as_runtime_error(lambda: tuple(control.while_loop(c, b, (count, *carried))))
        ctx.body_fn = body_fn
        ctx.counts = (n_carry, n_add)
        ctx.save_for_backward(got[0], *flat)
        return got[1:]

    @staticmethod
    def backward(ctx, *grads):
        count, *saved = ctx.saved_tensors
        n_carry, n_add = ctx.counts
        carried, add, leaves = saved[:n_carry], saved[n_carry:n_carry + n_add], saved[n_carry + n_add:]
        body_fn = ctx.body_fn
        g_carry = [g if g is not None else _zeros_like(c) for g, c in zip(grads, carried)]
        g_rest = [_zeros_like(t) for t in (*add, *leaves)]
        steps = int(count.item())  # the trip count decides the backward loop's length
        if steps:
            def forward_step(carry, x):
                return list(_as_tuple(body_fn(*carry, *add))), list(carry)

            with torch.no_grad():
                _, starts = control.scan(forward_step, list(carried), [torch.zeros(steps, device=count.device)])

            def backward_step(carry, x):
                g_c, g_acc = carry[:n_carry], carry[n_carry:]
                with torch.enable_grad():
                    ins = [t.detach().requires_grad_(t.is_floating_point()) for t in (*x, *add)]
                    out = _as_tuple(body_fn(*ins))
                    pairs = [(o, g) for o, g in zip(out, g_c) if o.requires_grad]
                    wrt = [t for t in ins if t.requires_grad] + list(leaves)
                    found = iter(torch.autograd.grad([o for o, _ in pairs], wrt, [g for _, g in pairs],
                                                     allow_unused=True) if pairs and wrt else [None] * len(wrt))
                g_in = [next(found) if t.requires_grad else None for t in ins] + [next(found) for _ in leaves]
                g_in = [g if g is not None else _zeros_like(t) for g, t in zip(g_in, [*ins, *leaves])]
                return g_in[:n_carry] + [a + b for a, b in zip(g_acc, g_in[n_carry:])], []

            carry, _ = control.scan(backward_step, g_carry + g_rest, list(starts), reverse=True)
            g_carry, g_rest = carry[:n_carry], carry[n_carry:]
        wanted = ctx.needs_input_grad[4:]
        out = [g if want and t.is_floating_point() else None
               for g, t, want in zip([*g_carry, *g_rest], [*carried, *add, *leaves], wanted)]
        return (None, None, None, None, *out)


def _as_tuple(out) -> tuple:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _while_with_grad(cond_fn, body_fn, carried, additional):
    """``while_loop_op``'s call differentiated (a carried or additional input
    or a parameter the body closes over requires grad)."""
    carried, additional = tuple(carried), tuple(additional)
    leaves, _ = _grad_leaves((lambda *a: _as_tuple(body_fn(*a)),), carried + additional)
    return tuple(_WhileGrad.apply(cond_fn, body_fn, len(carried), len(additional), *carried, *additional, *leaves))


def _autograd_rule(op, what: str, original):
    """The operator's autograd kernel: for lazy tensors that need gradients,
    ours (scan, cond) or a refusal (while_loop: its gradients would be
    dropped); torch's own for any other call."""

    def rule(*args):
        if not (_any_lazy(args) and torch.is_grad_enabled()):
            return original(*args)
        if op in ("cond", "while_loop"):
            differentiated = _cond_with_grad if op == "cond" else _while_with_grad
            if not _needs_grad(args):
                try:  # most calls: nothing to differentiate, traced once
                    return original(*args)
                except _GradNeeded:  # a body reads a parameter that requires grad
                    pass
            return differentiated(*args)
        if not _needs_grad(args):
            return original(*args)
        if op == "scan":
            combine_fn, init, xs, additional = args
            flat = _FlatStep(combine_fn)
            return flat.result(list(_ScanGrad.apply(flat, len(init), len(xs), *init, *xs, *additional)), len(init))
        _no_grad_needed(what, args)

    return rule


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
    for op, rule, what in ((cond_op, _cond_op, "torch.cond"), (while_loop_op, _while_loop_op, "torch.while_loop"),
                           (scan_op, _scan_op, "torch.scan")):
        op.py_impl(Tensor)(rule)
        key = torch._C.DispatchKey.Autograd
        op.py_kernels[key] = _autograd_rule(op.name(), what, op.py_kernels[key])
        op._dispatch_cache.clear()
    # (bodies traced through lowerings that changed: traced again)
    lowering.when_changed(lambda op: control.BODIES.clear())
