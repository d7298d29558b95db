"""``torch.autocast("lazy", dtype=...)``: PyTorch's autocast policy on lazy tensors.

PyTorch's autocast is a set of kernels on per-device dispatch keys
(``AutocastCPU``, ``AutocastCUDA``, ...) that cast the inputs of the ops in
its lists (lower precision for matmuls and convolutions, float32 for losses
and reductions, the widest type for ``cat``/``stack``, ...), above autograd so
the casts are differentiated. Those kernels only act on tensors of their own
device type, and there is no autocast key for the ``lazy`` type, so their
decisions are taken from them instead: for a call on lazy tensors inside
``torch.autocast("lazy")`` the same call runs once on fake mirrors of the
arguments (``FakeTensorMode``, on the policy's device: the CPU, or CUDA for a
GPU device when torch has CUDA) under that device's autocast and once
without, each recording the ATen calls that reach below autograd. When the
two recordings agree, autocast changes nothing for the call and it runs as
is; otherwise the autocast recording (its casts, and the op, or the pieces a
composite op decomposes into with their own casts) is replayed on the lazy
tensors from above autograd, so autograd differentiates it as eager's. The
decision is kept per call signature (:data:`_PLANS`), so a training step pays
for the two fake runs once per distinct call.

Calls reach this module through a ``TorchFunctionMode`` active while lazy
autocast is on in the thread; a torch function written in Python runs with
the mode still on, so the calls inside it are decided one by one (as autocast
sees the ops of a composite op without its own policy).

Entering the region is torch's own ``torch.autocast`` class: it reads and
sets a device type's state through ``torch.is_autocast_enabled``,
``torch.set_autocast_enabled``, ``torch.get_autocast_dtype`` and
``torch.set_autocast_dtype``, and checks ``is_autocast_available``; for
``"lazy"`` those answer from :data:`STATE` (:func:`install` wraps them; other
device types go to torch's), and turning lazy autocast on pushes the mode.
"""

from __future__ import annotations

import threading
import types as _types

import torch
from torch.overrides import TorchFunctionMode, redispatch_function
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_unflatten

from lazycore.trace.replayer import Replayer

from .tensor import Tensor

DEVICE_TYPE = "lazy"
SUPPORTED_DTYPES = (torch.bfloat16, torch.float16)


class _State(threading.local):
    """Lazy autocast in this thread (torch keeps its autocast state per thread too)."""

    def __init__(self):
        self.enabled = False
        self.dtype = torch.bfloat16
        self.mode = None  # the pushed _AutocastMode while enabled


STATE = _State()


# --- deciding one call -------------------------------------------------------------------

_PLANS = Replayer("torch.autocast_plans", 20_000)
"""Call signature -> its plan: :data:`_DIRECT`, a :class:`_Replay` or a :class:`_Refusal`,
each ``attempt(func, args, kwargs, tensors, device)`` (no guards: the key is the whole signature)."""
_SKIPPED_NAMES = frozenset({"__get__", "__set__", "__delete__"})  # tensor attribute access


def policy_device(tensors) -> str:
    """Whose autocast lists apply: CUDA's for a lazy device on a GPU when torch
    can make CUDA tensors (fake ones included), else the CPU's."""
    from .tensor import lc_device

    for t in tensors:
        if type(t) is Tensor:
            if lc_device(t.device).platform == "gpu" and torch.backends.cuda.is_built():
                return "cuda"
            break
    return "cpu"


def _leaf_key(x):
    if isinstance(x, torch.Tensor):
        return (type(x) is Tensor, tuple(x.shape), x.stride(), x.dtype, x.requires_grad, x.device)
    if type(x) is slice:  # unhashable before Python 3.12, and in every indexing call
        return (slice, x.start, x.stop, x.step)
    return x


class _Recording(TorchDispatchMode):
    """The ATen calls one run on fake tensors made below autograd, over numbered
    values: the inputs first, then each call's tensor results."""

    def __init__(self, inputs):
        super().__init__()
        self.slots = {id(t): i for i, t in enumerate(inputs)}
        self.keep = list(inputs)  # ids stay unique while recorded
        self.calls = []  # (op, flat argument leaves, spec, result slots, result spec)
        self.replayable = True

    def _leaf(self, x):
        if isinstance(x, torch.Tensor):
            slot = self.slots.get(id(x))
            if slot is None:
                self.replayable = False  # a tensor from nowhere (a constant made inside)
                return ("const", x)
            return ("slot", slot)
        return ("value", x)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func is torch.ops.prim.device.default:
            return out  # the fake tensor's own device query
        leaves, spec = tree_flatten((args, kwargs))
        outs, out_spec = tree_flatten(out)
        result_slots = []
        for o in outs:
            if isinstance(o, torch.Tensor):
                slot = self.slots.get(id(o))  # an in-place op returns a known tensor
                if slot is None:
                    slot = self.slots[id(o)] = len(self.keep)
                    self.keep.append(o)
                result_slots.append(slot)
            else:
                result_slots.append(("value", o))
        self.calls.append((func, [self._leaf(x) for x in leaves], spec, result_slots, out_spec))
        return out

    def signature(self) -> list:
        """The calls as comparable values: op, argument slots or values with
        their dtypes."""
        sig = []
        for func, leaves, _, results, _ in self.calls:
            sig.append((func, tuple(
                (kind, v, self.keep[v].dtype) if kind == "slot" else (kind, repr(v)) for kind, v in leaves
            ), len(results)))
        return sig


def _own_saved_tensors():
    """The fake runs are lazycore's, not the user's: what autograd saves in
    them must not reach the user's ``saved_tensors_hooks``. Non-reentrant
    ``torch.utils.checkpoint`` counts the tensors its hooks pack in the forward
    and again in the recomputation, where the plan is known and nothing is
    recorded: the fake runs' packs made the counts differ (a CheckpointError
    in the backward). Identity hooks on top take them (none where hooks are
    disabled: pushing one raises there)."""
    import contextlib

    if not torch._C._autograd._saved_tensors_hooks_is_enabled():
        return contextlib.nullcontext()
    return torch.autograd.graph.saved_tensors_hooks(_same, _same)


def _same(t):
    return t


def _record(func, leaves, spec, policy: str, dtype, autocast_on: bool):
    from torch._subclasses.fake_tensor import FakeTensorMode

    fake_mode = FakeTensorMode()
    tensors = [x for x in leaves if isinstance(x, torch.Tensor)]
    mirrors = {}
    with fake_mode:
        for t in tensors:
            if type(t) is Tensor:
                m = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=policy)
            else:
                m = fake_mode.from_tensor(t.detach())
            if t.requires_grad:
                m.requires_grad_(True)
            mirrors[id(t)] = m
    inputs = [mirrors[id(t)] for t in tensors]
    fargs, fkwargs = tree_unflatten([mirrors.get(id(x), x) if isinstance(x, torch.Tensor) else x for x in leaves], spec)
    rec = _Recording(inputs)
    with _own_saved_tensors(), fake_mode, rec, \
            torch.autocast(policy, dtype=dtype, enabled=autocast_on, cache_enabled=False):
        out = func(*fargs, **fkwargs)
    outs, out_spec = tree_flatten(out)
    result = []
    for o in outs:
        if isinstance(o, torch.Tensor):
            slot = rec.slots.get(id(o))
            if slot is None:
                rec.replayable = False
            result.append(("slot", slot))
        else:
            result.append(("value", o))
    return rec, result, out_spec


class _Direct:
    """Autocast changes nothing for the call: it runs as is."""

    __slots__ = ()

    def attempt(self, func, args, kwargs, tensors, device):
        return func(*args, **kwargs)


_DIRECT = _Direct()


class _Refusal:
    """What autocast does to the call cannot be replayed: each call raises this."""

    __slots__ = ("error",)

    def __init__(self, error: Exception):
        self.error = error

    def attempt(self, func, args, kwargs, tensors, device):
        raise type(self.error)(*self.error.args)


class _Replay:
    """An autocast recording, replayed on real tensors from above autograd."""

    __slots__ = ("calls", "outputs", "out_spec", "policy")

    def __init__(self, rec: _Recording, outputs, out_spec, policy: str):
        self.outputs = outputs
        self.out_spec = out_spec
        self.policy = policy
        # only what the outputs need, and every call that writes into a tensor
        needed = {v for kind, v in outputs if kind == "slot"}
        kept = []
        for call in reversed(rec.calls):
            func, leaves, _, results, _ = call
            if getattr(getattr(func, "_schema", None), "is_mutable", True) or any(isinstance(s, int) and s in needed for s in results):
                kept.append(call)
                needed.update(v for kind, v in leaves if kind == "slot")
        self.calls = [(func, leaves, spec, results) for func, leaves, spec, results, _ in reversed(kept)]

    def attempt(self, func, args, kwargs, tensors, device):
        return self.run(tensors, device)

    def run(self, inputs: list, device: torch.device):
        values = dict(enumerate(inputs))
        policy = self.policy
        for func, leaves, spec, results in self.calls:
            args = []
            for kind, v in leaves:
                if kind == "slot":
                    args.append(values[v])
                elif isinstance(v, torch.device) and v.type == policy:
                    args.append(device)  # a tensor made inside the op: on the mirrors' device
                else:
                    args.append(v)
            a, k = tree_unflatten(args, spec)
            outs, _ = tree_flatten(func(*a, **k))
            for slot, o in zip(results, outs):
                if isinstance(slot, int):
                    values[slot] = o
        return tree_unflatten([values[v] if kind == "slot" else v for kind, v in self.outputs], self.out_spec)


def _plan(func, leaves, spec, tensors, dtype):
    """:data:`_DIRECT`, a :class:`_Replay`, or a :class:`_Refusal`."""
    policy = policy_device(tensors)
    try:
        cast, outputs, out_spec = _record(func, leaves, spec, policy, dtype, True)
    except Exception as e:  # noqa: BLE001 - which failure it is decides below
        cast_error = e
    else:
        cast_error = None
    try:
        plain, _, _ = _record(func, leaves, spec, policy, dtype, False)
    except Exception:  # noqa: BLE001 - the real call raises eager's error, or needs values fakes lack
        plain = None
    if cast_error is not None:
        if plain is None:
            return _DIRECT  # fails without autocast too (the user's error) or needs values: eager decides
        return _Refusal(NotImplementedError(
            f"lazycore: torch.autocast('lazy') cannot find what autocast does to {_name(func)} here "
            f"({type(cast_error).__name__}: {cast_error})"
        ))
    if plain is not None and plain.signature() == cast.signature():
        return _DIRECT
    if not cast.replayable or any(kind == "slot" and v is None for kind, v in outputs):
        return _Refusal(NotImplementedError(
            f"lazycore: torch.autocast('lazy') cannot replay what autocast does to {_name(func)}"
        ))
    return _Replay(cast, outputs, out_spec, policy)


def _name(func) -> str:
    return getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)


class _AutocastMode(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if STATE.mode is not self:  # lazy autocast was turned off (or on again, by another mode)
            return func(*args, **kwargs)
        leaves, spec = tree_flatten((args, kwargs))
        tensors = [x for x in leaves if isinstance(x, torch.Tensor)]
        lazy = next((t for t in tensors if type(t) is Tensor), None)
        if lazy is None or getattr(func, "__name__", None) in _SKIPPED_NAMES:
            return func(*args, **kwargs)
        if isinstance(func, _types.FunctionType):
            # written in Python: the torch calls inside are decided one by one
            with self:
                return redispatch_function(func, types, args, kwargs)
        dtype = STATE.dtype
        try:
            key = (func, spec, tuple(_leaf_key(x) for x in leaves), dtype, torch.is_grad_enabled(),
                   torch.is_inference_mode_enabled())
            plan = _PLANS.find(key)
        except TypeError:  # an unhashable argument: decided for this call alone
            key, plan = None, None
        if plan is None:
            plan = _plan(func, leaves, spec, tensors, dtype)
            if key is not None:
                _PLANS.add(key, plan)
        return plan.attempt(func, args, kwargs, tensors, lazy.device)


# --- torch's autocast state functions, answering for "lazy" ---------------------------------


def _set_enabled(enabled: bool) -> None:
    enabled = bool(enabled)
    if enabled == STATE.enabled:
        return
    STATE.enabled = enabled
    if enabled:
        mode = STATE.mode = _AutocastMode()
        mode.__enter__()
    else:
        mode, STATE.mode = STATE.mode, None
        _pop(mode)


def _pop(mode) -> None:
    """Take ``mode`` off this thread's torch function mode stack, wherever it is
    (modes entered after it and still on stay, in their order)."""
    from torch.overrides import _get_current_function_mode_stack, _pop_mode, _push_mode

    if not any(m is mode for m in _get_current_function_mode_stack()):
        return  # off the stack for now (inside its own handler): it passes calls through from now on
    above = []
    while torch._C._len_torch_function_stack() > 0:
        top = _pop_mode()
        if top is mode:
            break
        above.append(top)
    for m in reversed(above):
        _push_mode(m)


def _set_dtype(dtype) -> None:
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype must be a torch.dtype, got {type(dtype).__name__}")
    STATE.dtype = dtype


def _get_enabled() -> bool:
    return STATE.enabled


def _get_dtype():
    return STATE.dtype


def _answering_for_lazy(original, lazy):
    """``original`` (one of torch's autocast state functions, ``device_type``
    first), with ``lazy(*the other arguments)`` answering for ``"lazy"``."""

    def fn(*args, **kwargs):
        device_type = args[0] if args else kwargs.get("device_type")
        if type(device_type) is str and device_type == DEVICE_TYPE:
            rest = [v for k, v in kwargs.items() if k != "device_type"]
            return lazy(*args[1:], *rest)
        return original(*args, **kwargs)

    fn._lazycore = True
    fn.__name__, fn.__qualname__, fn.__doc__ = original.__name__, original.__name__, original.__doc__
    return fn


def install() -> None:
    """Make torch's autocast state functions answer for ``"lazy"``."""
    if getattr(torch.is_autocast_enabled, "_lazycore", False):
        return
    torch.is_autocast_enabled = _answering_for_lazy(torch.is_autocast_enabled, _get_enabled)
    torch.set_autocast_enabled = _answering_for_lazy(torch.set_autocast_enabled, _set_enabled)
    torch.get_autocast_dtype = _answering_for_lazy(torch.get_autocast_dtype, _get_dtype)
    torch.set_autocast_dtype = _answering_for_lazy(torch.set_autocast_dtype, _set_dtype)
    available = torch.amp.autocast_mode.is_autocast_available

    def is_autocast_available(device_type: str) -> bool:
        return device_type == DEVICE_TYPE or available(device_type)

    is_autocast_available.__doc__ = available.__doc__
    torch.amp.autocast_mode.is_autocast_available = is_autocast_available
    torch.amp.is_autocast_available = is_autocast_available
