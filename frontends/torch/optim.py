"""torch.optim on the lazy device: a capturable device, so step counters live on it.

An optimizer that is not capturable keeps its step counter on the CPU and
turns the bias corrections into Python numbers (``step_t.item()``, then
``1 - beta1 ** step``), new numbers every step. Traced, they become program
parameters; captured, they are Python work a replay cannot redo, so a step
with Adam never replays. Capturable, the counter and the bias corrections are
device tensors computed in the program, as on CUDA graphs, and the step is
the same graph every call.

torch names the capturable device types in one function
(``torch.optim.optimizer._get_capturable_supported_devices``, "xla" among
them) that each optimizer module imports by name, so the lazy type is added
where each module looks it up. An optimizer over lazy parameters is made
capturable at its first step (a step counter already on the CPU, from
``load_state_dict`` or earlier steps, moves to the parameter's device); its
``capturable`` entry in ``param_groups`` then reads True, while its
``state_dict()`` reports the user's own value, so a checkpoint resumes on the
CPU (:func:`_users_capturable`).

Capturable is where the state lives, not which formulas run: torch's
capturable branches are written for CUDA graphs, and some fold the step
size into a divisor (Adam and AdamW divide the denominator by ``-lr /
bias_correction1``, Adamax divides by ``lr``), so a learning rate of 0, the
first value of a warm-up schedule, makes 0/0 = NaN of every element whose
second moment is 0, where eager leaves it unchanged; and they compute
``beta ** step`` in the float32 of the step counter, where eager computes it
in Python floats. On the lazy device the optimizers whose eager
(non-capturable) branch computes with its step values without deciding
anything from them in Python run that branch instead (:data:`_EAGER_BRANCH`):
``_get_value`` gives the step counter (and NAdam's ``mu_product``) as a
float64 device value rather than a Python number, so the hyperparameter math
(``lr / (1 - beta1 ** step)``) runs in float64 in the program, as Python runs
it, rounded once where it meets a float32 tensor; a device value given where
torch takes a Python number (``addcdiv_``'s ``value``, ``add_``'s ``alpha``)
becomes a tensor operand of the same formula (:class:`_DeviceScalars`). Adam,
AdamW, Adamax, NAdam and RAdam run that branch's formulas in multi-tensor
forms instead (:mod:`.optim_foreach`: the group's hyperparameter math once,
not per parameter; RAdam's ``rho_t > 5``, which its eager branch asks in
Python, decided on the device; :data:`_MULTI_TENSOR`). The device learning
rates are float64 as well. The others keep the capturable branch, whose
formulas are eager's (ASGD and Rprop decide on the step count or on masks in
Python in their eager branch), given float64 copies of their step counters
while it runs, so their step math is float64 too
(:func:`_device_step_values`).

A group's float learning rate is a float64 device parameter while its
optimizer steps (:class:`_Rate`), so a scheduler's new rate is a new input,
not a new program nor, captured, a retrace. It is made with the optimizer
when its parameters are on the lazy device already (``add_param_group``):
then no captured first call made it, and a first step reads it as every later
step does. SGD, RMSprop, Adagrad and Adadelta give the rate to ``add_``'s
``alpha`` or ``addcdiv_``'s ``value``, which would read it back; their
single-tensor loop runs with it as a tensor operand of eager's formula
instead (:func:`_lr_operand`; eager's ``add_(g, alpha=-lr)`` is one fused
multiply-add of ``float32(-lr)``, as the program's ``g * -lr + p`` is), and
Adagrad's step counters move to the device. The ``momentum`` of SGD and
RMSprop, which OneCycleLR and CyclicLR cycle as they cycle Adam's
``betas[0]``, is a device value of the same loop while torch's Python takes
its momentum branch (:data:`_TENSOR_MOMENTUM`). ``fused=True`` (SGD, Adam,
AdamW, Adagrad: the CPU's fused kernels) runs the unfused formulas
(:func:`_unfused`).
"""

from __future__ import annotations

import inspect
import sys
import weakref

import numpy as np
import torch
import torch.optim  # noqa: F401  (loads the optimizer modules patched below)
import torch.optim.optimizer as _optimizer

from lazycore.ir.context import TRACE
from lazycore.trace import core

from . import optim_foreach
from .tensor import MADE
from .tensor import Tensor as _LazyTensor

_LAZY = "lazy"
_TENSOR_LR = (torch.optim.Adam, torch.optim.Adamax, torch.optim.NAdam, torch.optim.RAdam, torch.optim.ASGD,
              torch.optim.Rprop, torch.optim.SGD, torch.optim.RMSprop, torch.optim.Adagrad, torch.optim.Adadelta)
"""Optimizers whose step takes its learning rate as a device tensor without
reading it back: the Adam family, ASGD and Rprop in their capturable step;
SGD, RMSprop, Adagrad and Adadelta (whose steps give the rate to ``add_``'s
``alpha`` or ``addcdiv_``'s ``value``, which would read it back) through
:func:`_lr_operand`."""
_TENSOR_BETA1 = (torch.optim.Adam, torch.optim.Adamax, torch.optim.NAdam, torch.optim.RAdam)
"""Optimizers whose step takes ``betas[0]`` as a device tensor without reading
it back (Adam, AdamW, and the multi-tensor forms of Adamax, NAdam and RAdam,
:mod:`.optim_foreach`): the beta a scheduler cycles (OneCycleLR, CyclicLR with
``cycle_momentum``; transformers' schedulers set only the rate) is a program
input like the learning rate. (``beta2`` goes to ``addcmul_``'s ``value``, a
Python number, and no scheduler changes it: it stays one.)"""

_TENSOR_MOMENTUM = (torch.optim.SGD, torch.optim.RMSprop)
"""Optimizers whose step takes the ``momentum`` a scheduler cycles (OneCycleLR,
CyclicLR with ``cycle_momentum``) as a device value while torch's Python,
which asks it whether to take the momentum branch (SGD: ``momentum != 0``,
RMSprop: ``momentum > 0``), takes it in every group
(:func:`_momentum_on_device`): the group holds a :class:`_DeviceFloat` while
the optimizer steps, and a captured step guards the branch, not the value
(:func:`read_as_input`). Where the branch is not taken, the momentum stays a
number, guarded by value, and torch's step runs as eager's: SGD makes no
buffer, or leaves the one it has untouched, and so does RMSprop."""

_BETA1_FORMS_ONLY = (torch.optim.Adamax, torch.optim.NAdam, torch.optim.RAdam)
"""Of those, the ones that take a device ``betas[0]`` only in their
multi-tensor forms: torch's own branches, which a complex parameter's group
runs (:func:`.optim_foreach.supports`), take a Python number."""


def _beta1_on_device(opt) -> bool:
    if not isinstance(opt, _TENSOR_BETA1):
        return False
    # (any group's: a captured step's guards leave out every group's betas[0] or none, .capture._groups)
    return not (isinstance(opt, _BETA1_FORMS_ONLY)
                and any(torch.is_complex(p) for g in opt.param_groups for p in g["params"]))


def _torchs_step(opt) -> bool:
    """Whether ``opt``'s ``step`` is torch's own (SGD's or RMSprop's), not a
    subclass's: a step of its own could compute with the momentum in Python
    (``1 - momentum``), which would make a number of the device value's float
    and bake it into the program."""
    base = torch.optim.RMSprop if isinstance(opt, torch.optim.RMSprop) else torch.optim.SGD
    torchs = _unwrapped(vars(base)["step"])
    for cls in type(opt).__mro__:
        if cls is base:
            return True
        step = vars(cls).get("step")
        # (a subclass's first instance sets its class's step to torch's, wrapped in the profiler's hook)
        if step is not None and _unwrapped(step) is not torchs:
            return False
    return False


def _unwrapped(fn):
    while True:
        inner = getattr(fn, "__wrapped__", None) or getattr(fn, "lazycore_wraps", None)
        if inner is None:
            return fn
        fn = inner


def _momentum_on_device(opt) -> bool:
    """Whether ``opt`` (SGD or RMSprop) reads its groups' ``momentum`` as
    device values: torch's own step (:func:`_torchs_step`), every group on
    the lazy device, its momentum a float at which torch's step takes the
    momentum branch. (A complex parameter's ``buf.mul_(m)`` multiplies by the
    device value bit for bit as by the number on the lazy device, signed zeros
    and infinities included.)"""
    if not _torchs_step(opt):
        return False
    rmsprop = isinstance(opt, torch.optim.RMSprop)
    for g in opt.param_groups:
        m = g.get("momentum")
        if not isinstance(m, float) or not (m > 0 if rmsprop else m != 0) or g.get("differentiable") \
                or not _on_lazy(g):
            return False
    return True


def _cycled_key(opt) -> str | None:
    """The hyperparameter of ``opt`` that OneCycleLR and CyclicLR cycle and its
    program may read as a device value: ``"betas"`` (the first), ``"momentum"``,
    or None."""
    return "betas" if isinstance(opt, _TENSOR_BETA1) else "momentum" if isinstance(opt, _TENSOR_MOMENTUM) else None


def _cycled(opt) -> str | None:
    """:func:`_cycled_key` where the program reads it as a device value now."""
    key = _cycled_key(opt)
    if key == "betas":
        return key if _beta1_on_device(opt) else None
    return key if key and _momentum_on_device(opt) else None


def _cycled_value(group, key: str):
    return group["betas"][0] if key == "betas" else group["momentum"]


class _DeviceFloat(float):
    """A group's ``momentum`` while its optimizer steps: the user's number to
    torch's Python, which branches on it (``if momentum != 0``), and a device
    value to the ops it is given to (:class:`_DeviceScalars`: ``buf.mul_(m)``
    multiplies by the tensor), so the program reads it as an input."""

    __slots__ = ("tensor",)

    def __new__(cls, value: float, tensor):
        self = super().__new__(cls, value)
        self.tensor = tensor
        return self


def _with_lazy(original):
    def supported(*args, **kwargs):
        return [*original(*args, **kwargs), _LAZY]

    supported.lazycore_wraps = original
    return supported


_LR_OPERAND = ("sgd", "rmsprop", "adagrad", "adadelta")
"""torch.optim modules whose functional step runs with a device learning rate
as a tensor operand (:func:`_lr_operand`)."""

_FUSED = ("sgd", "adam", "adagrad")
"""torch.optim modules whose functional step has a ``fused`` CPU kernel
(AdamW's is Adam's): over lazy parameters the unfused formulas run instead
(:func:`_unfused`)."""

_FUNCTIONALS = ("adam", "adamax", "nadam", "radam", "asgd", "rprop", "rmsprop", "adadelta")
"""torch.optim modules whose functional step (``torch.optim.adam.adam``)
takes a ``capturable`` flag and the step counters (:func:`_device_step_values`)."""

_EAGER_BRANCH = ("adam", "adamax", "nadam")
"""Of those, the ones whose eager branch runs on the lazy device with device
step values: it decides nothing from them in Python (RAdam's eager branch
asks ``rho_t > 5``, ASGD's ``mu.item() != 1``, Rprop's indexes by masks)."""


_MULTI_TENSOR = {"torch.optim.adam": optim_foreach.adam, "torch.optim.adamax": optim_foreach.adamax,
                 "torch.optim.nadam": optim_foreach.nadam, "torch.optim.radam": optim_foreach.radam}
"""Of those, the ones whose eager branch has a multi-tensor form here that
computes the group's hyperparameter math once (:mod:`.optim_foreach`), by
the module of torch's functional step."""


class _DeviceScalars(torch.overrides.TorchFunctionMode):
    """While an eager branch runs on the lazy device: a device value in an
    argument torch takes as a Python number (it would read it back with
    ``.item()``) becomes a tensor operand of the same formula, rounded to the
    tensor's dtype where eager rounds the number (``addcdiv_(a, b,
    value=s)`` computes ``(s * a) / b``, as ``addcdiv_(s * a, b)``). And a
    float64 device value converted to a parameter's float dtype (Adam's
    ``beta1.to(dtype=param.dtype)`` of a device ``betas[0]``) stays float64:
    eager's beta is a Python float, so ``1 - beta1`` is computed in float64
    and rounded once where it meets the tensor (``1 - float32(0.9999)`` is
    1.66e-4 off)."""

    _KEYWORD = {"add": "alpha", "add_": "alpha", "sub": "alpha", "sub_": "alpha",
                "addcdiv": "value", "addcdiv_": "value", "addcmul": "value", "addcmul_": "value"}

    _NEGATIONS = (torch.Tensor.__neg__, torch.Tensor.neg, torch.neg)

    def __init__(self):
        super().__init__()
        self._made = {}
        """The group's number work done once per step, not once per parameter
        (torch's loop writes ``alpha=-lr`` for each): ``(what, id(value),
        version, dtype)`` to ``(value, result)``, the value kept so its id is
        not reused while the mode lives (one functional step), its version
        so a value written in place since is computed again."""

    def _once(self, what, value, dtype, make):
        key = (what, id(value), value._version, dtype)
        hit = self._made.get(key)
        if hit is None:
            hit = self._made[key] = (value, make())
        return hit[1]

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in self._NEGATIONS and len(args) == 1 and not kwargs and type(args[0]) is _LazyTensor \
                and args[0].dim() == 0 and not args[0].requires_grad:
            return self._once("neg", args[0], None, lambda: func(args[0]))
        if func is torch.Tensor.to and type(args[0]) is _LazyTensor and args[0].dtype == torch.float64 \
                and args[0].dim() == 0:
            dtypes = [a for a in (*args[1:], kwargs.get("dtype")) if isinstance(a, torch.dtype)]
            devices = [a for a in (*args[1:], kwargs.get("device")) if isinstance(a, (torch.device, str))]
            if dtypes and dtypes[0].is_floating_point and all(torch.device(d) == args[0].device for d in devices):
                return args[0]
        if any(type(a) is _DeviceFloat for a in args):
            # (buf.mul_(momentum): the tensor, a 0-d float64 operand, rounds to buf's dtype as the number does)
            args = tuple(a.tensor if type(a) is _DeviceFloat else a for a in args)
        key = self._KEYWORD.get(getattr(func, "__name__", None))
        scalar = kwargs.get(key) if key else None
        if type(scalar) is _DeviceFloat:
            scalar = scalar.tensor
        if type(scalar) is _LazyTensor and scalar.dim() == 0 and len(args) >= 2:
            kwargs = {k: v for k, v in kwargs.items() if k != key}
            if key == "alpha" and self._fused(args):
                # self +- alpha * other: eager's one fused multiply-add, fmadd(other, +-alpha, self),
                # alpha rounded to self's dtype as eager's kernel takes it (once for the group)
                name = func.__name__
                fused = torch.Tensor.addcmul_ if name.endswith("_") else torch.addcmul
                if name.startswith("sub"):
                    scalar = self._once("neg", scalar, None, lambda: -scalar)
                if not scalar.requires_grad:
                    dtype = args[0].dtype
                    scalar = self._once("to", scalar, dtype, lambda: scalar.to(dtype))
                return fused(args[0], args[1], scalar, **kwargs)
            # self + value * t1 (* or /) t2: the scalar scales the first operand
            return func(args[0], args[1] * scalar, *args[2:], **kwargs)
        return func(*args, **kwargs)

    @staticmethod
    def _fused(args) -> bool:
        """``add``/``sub`` of two real float tensors of one dtype, as
        ``addcmul`` computes them with alpha rounded to their dtype first: in
        their own type (a half's in float32, where the product of two halves
        is exact) and rounded once, as eager's kernel (a half's ``b * alpha``
        rounded apart was 10% of bfloat16 SGD updates off)."""
        return (len(args) == 2 and all(isinstance(a, torch.Tensor) for a in args)
                and args[0].dtype == args[1].dtype and args[0].dtype in _REAL_FLOATS)


_REAL_FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


_DEVICE_VALUES: list = []
"""Non-empty while an eager branch runs on the lazy device."""


def _get_value_on_device(original):
    def get_value(x):
        if _DEVICE_VALUES and type(x) is _LazyTensor:
            return x.to(torch.float64)  # (eager: x.item(), a Python float)
        return original(x)

    get_value.lazycore_wraps = original
    return get_value


def _device_step_values(functional, eager_branch: bool):
    """torch's functional step (``torch.optim.adam.adam``) over lazy
    parameters whose optimizer made them capturable: its step counters are
    float64 device values while it runs, so what it computes from them
    (``1 - beta2 ** step``) is computed as Python computes it, in float64,
    not in the counters' float32 (``1 - 0.9999 ** 1`` is 1.66e-4 off in
    float32, and RAdam's rectification term turns that into a different
    update); with ``eager_branch``, it runs its eager branch (module doc)."""
    signature = inspect.signature(functional)
    steps_at = list(signature.parameters).index("state_steps")

    def step(params, *args, **kwargs):
        if (not kwargs.get("capturable") or kwargs.get("differentiable") or kwargs.get("fused")
                or not params or type(params[0]) is not _LazyTensor):
            return functional(params, *args, **kwargs)
        multi_tensor = _MULTI_TENSOR.get(functional.__module__)
        if multi_tensor is not None:
            given = signature.bind(params, *args, **kwargs).arguments
            if optim_foreach.supports(**given):
                return multi_tensor(**given)
        if eager_branch:
            # (the eager branch takes a device learning rate only one parameter at a time)
            kwargs = {**kwargs, "capturable": False, "foreach": False}
            _DEVICE_VALUES.append(True)
            try:
                with _DeviceScalars():
                    return functional(params, *args, **kwargs)
            finally:
                _DEVICE_VALUES.pop()
        args = list(args)
        if steps_at - 1 < len(args):
            counters = args[steps_at - 1]
            wide = args[steps_at - 1] = [t.to(torch.float64) for t in counters]
        else:
            counters = kwargs["state_steps"]
            wide = kwargs["state_steps"] = [t.to(torch.float64) for t in counters]
        try:
            return functional(params, *args, **kwargs)
        finally:
            with torch.no_grad():
                for t, w in zip(counters, wide):
                    t.copy_(w)  # (a whole number: exact in float32 up to 2**24 steps)

    step.lazycore_wraps = functional
    return step


def _lr_operand(functional):
    """torch's functional step of SGD, RMSprop, Adagrad or Adadelta over lazy
    parameters with a device learning rate (a :class:`_Rate`) or a device
    ``momentum`` (a :class:`_DeviceFloat`, SGD and RMSprop): its
    single-tensor loop runs with the rate as a tensor operand of eager's
    formula (``param.add_(grad, alpha=-lr)`` as ``param.add_(grad * -lr)``,
    :class:`_DeviceScalars`), and Adagrad's step counter, on the device, as a
    float64 device value (:func:`_get_value_on_device`), instead of reading
    them back. The single-tensor loop, not the multi-tensor one: eager's
    foreach kernels on the CPU run the single-tensor ops per tensor (the same
    numbers), while torch's multi-tensor forms for a tensor rate are written
    for CUDA graphs and reorder the arithmetic (RMSprop divides ``avg`` by
    ``-lr``)."""

    def step(params, *args, **kwargs):
        lr = kwargs.get("lr")
        # (differentiable too: the operand form is the same formula to autograd)
        if (type(lr) is not _LazyTensor and type(kwargs.get("momentum")) is not _DeviceFloat) or kwargs.get("fused") \
                or not params or type(params[0]) is not _LazyTensor:
            return functional(params, *args, **kwargs)
        _DEVICE_VALUES.append(True)
        try:
            with _DeviceScalars():
                return functional(params, *args, **{**kwargs, "foreach": False})
        finally:
            _DEVICE_VALUES.pop()

    step.lazycore_wraps = functional
    return step


def _unfused(functional):
    """torch's functional step given ``fused=True`` over lazy parameters: the
    unfused step's formulas (eager's fused CPU kernels compute the same
    update, rounded in their own order: within float tolerance of them), so
    the lazy device takes ``fused=True`` where the CPU does."""

    def step(params, *args, **kwargs):
        if not kwargs.get("fused") or not params or type(params[0]) is not _LazyTensor:
            return functional(params, *args, **kwargs)
        if kwargs.get("grad_scale") is not None or kwargs.get("found_inf") is not None:
            raise NotImplementedError("lazycore: a fused optimizer step with a gradient scaler (grad_scale, "
                                      "found_inf) on the lazy device")
        return functional(params, *args, **{**kwargs, "fused": False, "foreach": False})

    step.lazycore_wraps = functional
    return step


def _lbfgs_step(step):
    """``torch.optim.LBFGS.step`` over lazy parameters: its two-loop recursion
    and its moves give device values where torch takes a Python number
    (``q.add_(old_dirs[i], alpha=-al[i])``, ``r.add_(old_stps[i], alpha=al[i]
    - be_i)``, ``p.add_(update, alpha=t)`` with a tensor ``t``), which torch
    reads back with ``.item()``: each a program of its own and a host read
    that only scales a vector (strong-Wolfe, 4 iterations and history 3: 39 +
    39 of 200 reads in 4 steps). They run under :class:`_DeviceScalars`, as
    eager's one fused multiply-add of the number. The reads that decide
    (``float(closure())``, the line search's tests) stay; the user's closure
    runs outside the mode."""

    def wrapped(self, closure):
        groups = self.param_groups
        if not groups or not _on_lazy(groups[0]):
            return step(self, closure)

        def users(closure=closure):
            with torch.overrides._pop_mode_temporarily():
                return closure()

        with _DeviceScalars():
            return step(self, users)

    wrapped.lazycore_wraps = step
    wrapped.lazycore_lbfgs = True
    wrapped.__doc__ = step.__doc__
    return wrapped


def _on_lazy(group) -> bool:
    return bool(group["params"]) and group["params"][0].device.type == _LAZY


def _torchs_own_step(opt) -> bool:
    """Whether ``opt.step`` is torch.optim's: only torch's own step functions
    know the lazy device among capturable ones. Another library's optimizer
    with a ``capturable`` flag (timm's NAdamW, Muon) checks its own list of
    devices and refuses a capturable step on ours, so it keeps its step
    counters where it made them."""
    for cls in type(opt).__mro__:
        if "step" in cls.__dict__:
            return cls.__module__.startswith("torch.optim.")
    return False


def _make_capturable(opt) -> None:
    if isinstance(opt, torch.optim.Adagrad):
        _counters_on_device(opt)
    if not _torchs_own_step(opt):
        return
    for group in opt.param_groups:
        if group.get("capturable", True) or not _on_lazy(group):
            continue  # capturable already, an optimizer without the notion (SGD), or not ours
        for p in group["params"]:
            step = opt.state.get(p, {}).get("step")
            if isinstance(step, torch.Tensor) and step.device != p.device:
                opt.state[p]["step"] = step.to(p.device)
        made = _MADE_CAPTURABLE.get(opt)
        if made is None:
            made = _MADE_CAPTURABLE[opt] = {}
            opt.register_state_dict_post_hook(_users_capturable)
        made[id(group)] = (group, group["capturable"])
        group["capturable"] = True


_MADE_CAPTURABLE: "weakref.WeakKeyDictionary[torch.optim.Optimizer, dict]" = weakref.WeakKeyDictionary()
"""The parameter groups :func:`_make_capturable` made capturable, with the
user's own value, by the group's id (the group itself kept with it: a
group ``load_state_dict`` replaced is another dict)."""


def _users_capturable(opt, state_dict) -> None:
    """``state_dict()``'s ``capturable`` is the user's, not the one the lazy
    device runs with: a checkpoint saved here resumes on the CPU, where a
    capturable Adam refuses to step (as PyTorch/XLA's checkpoints resume
    there), and a lazy optimizer that loads it is made capturable again at
    its first step."""
    made = _MADE_CAPTURABLE.get(opt, {})
    for group, saved in zip(opt.param_groups, state_dict["param_groups"]):
        group_and_value = made.get(id(group))
        if group_and_value is not None and group_and_value[0] is group and saved.get("capturable") is True:
            saved["capturable"] = group_and_value[1]


def _counters_on_device(opt) -> None:
    """Adagrad (which has no capturable flag) keeps its step counters on the
    CPU and reads them back as Python numbers: on the lazy device they move
    to the parameter's device, made there (a constant, not an upload), so its
    step's math reads them as device values (:func:`_lr_operand`) and a
    captured step can replay."""
    for group in opt.param_groups:
        if not _on_lazy(group):
            continue
        for p in group["params"]:
            state = opt.state.get(p)
            step = state.get("step") if state else None
            if isinstance(step, torch.Tensor) and step.device != p.device and step.dim() == 0:
                with torch.no_grad():
                    state["step"] = torch.full((), float(step), dtype=step.dtype, device=p.device)


class _Rate:
    """A parameter group's float learning rate as a 0-d device tensor, swapped
    into the group while its optimizer steps: the program reads the rate, so a
    scheduler's new value is a new input, not a new program (nor, captured, a
    retrace). Outside the step the group holds the user's float."""

    __slots__ = ("tensor", "value", "fresh", "node")

    def __init__(self, value: float, device):
        with torch.no_grad():  # float64: the rate meets the step math before any float32 tensor
            # device data at once, not pending work: a pending rate would be an output of
            # whatever program the next barrier runs (the first forward pass), which the
            # next forward pass, without it, would compile again
            self.tensor = torch.full((), value, dtype=torch.float64, device=device)
        handle = self.tensor._storage.handle
        core.assign(handle, core.from_numpy(np.float64(value), handle.device))
        self.value, self.node = value, None
        # the first step fills it as every later step does (one program for all of them)
        self.fresh = False

    def fill(self, value: float) -> None:
        """Set the device value: a new program parameter of its own (a fill
        would share its value with every other tensor filled with the same
        number, and a capture could not tell which one the step read). Set
        every step, even to the same value, so the step's graph always reads
        a parameter, not sometimes the last step's result: one program (and,
        captured, one recording)."""
        handle = self.tensor._storage.handle
        core.assign(handle, core.scalar(value, handle.dtype, handle.device, fold=False))
        self.node = handle._value[0]
        self.value = value

    def at_step(self, value: float) -> None:
        # a fresh rate was filled for this step already, before a capture began watching
        # it (and no barrier ran since: the step reads that parameter, not data)
        if not (self.fresh and value == self.value and self.tensor._storage.handle._value[0] is self.node):
            self.fill(value)
        self.fresh = False


_RATES: "weakref.WeakKeyDictionary[torch.optim.Optimizer, dict[int, _Rate]]" = weakref.WeakKeyDictionary()
_CYCLED: "weakref.WeakKeyDictionary[torch.optim.Optimizer, dict[int, _Rate]]" = weakref.WeakKeyDictionary()
"""A parameter group's float ``betas[0]`` (Adam family) or ``momentum`` (SGD,
RMSprop), what OneCycleLR and CyclicLR cycle (:func:`_cycled`), as a device
value (a :class:`_Rate`), as for the learning rate. Kept while the momentum
is 0 (its value guarded then): a recording made while it was not reads this
tensor, and replays when it is not again."""


def refresh(opt) -> None:
    """Give ``opt``'s device learning rates their groups' current values (a
    captured step does this before it begins watching, so the new value is an
    input of the step rather than something it made)."""
    rates = _RATES.get(opt)
    if rates:
        for i, rate in rates.items():
            lr = opt.param_groups[i]["lr"]
            if type(lr) is float:
                rate.fill(lr)
                rate.fresh = True
    cycled = _CYCLED.get(opt)
    # (a momentum torch's Python takes no branch for is no input of the step: not filled)
    key = _cycled_key(opt) if cycled else None
    if key == "momentum" and not _momentum_on_device(opt):
        return
    for i, rate in cycled.items() if key else ():
        value = _cycled_value(opt.param_groups[i], key)
        if type(value) is float:
            rate.fill(value)
            rate.fresh = True


def refresh_unfilled(opts=None) -> list:
    """Fill the device rates no step has filled yet (made as device data
    with their optimizer) of ``opts`` (default: every optimizer's): a
    captured call that meets its optimizer for the first time then reads the
    rate as an input, not as a value it made. Returns what :func:`unfill`
    needs to take back the fills of the optimizers the call did not step.

    A filled rate is pending work, an output of the next barrier's program
    while its optimizer lives; an optimizer of an earlier loop that never
    stepped lives on in a reference cycle until the garbage collector runs,
    so filling it for a later loop's captured step made that step's program
    two outputs wider than the next one's, and compiled once more, or not,
    by when the collector ran."""
    filled = []
    for opt in {*_RATES.keys(), *_CYCLED.keys()} if opts is None else opts:
        rates = [r for t in (_RATES, _CYCLED) for r in t.get(opt, {}).values()]
        if any(r.node is None for r in rates):
            filled.append((weakref.ref(opt), [(r, r.tensor._storage.handle._value) for r in rates if r.node is None]))
            refresh(opt)  # (at its groups' current values: a warm-up may have set them since)
    return filled


def unfill(filled: list, stepped) -> None:
    """Take back :func:`refresh_unfilled`'s fills of the optimizers not in
    ``stepped`` (ids of those the captured call stepped): their rates are
    device data again, no output of the next barrier's program, and unfilled."""
    for ref, rates in filled:
        opt = ref()
        if opt is None or id(opt) in stepped:
            continue
        for rate, data in rates:
            handle = rate.tensor._storage.handle
            if handle._value[0] is rate.node:  # (nothing wrote it since the fill)
                handle._value = data  # (device data: written directly, LazyTensor.take)
                rate.node, rate.fresh = None, False


def _rates() -> dict:
    """Every device learning rate's group value, to tell who changed them."""
    lrs = {id(opt): tuple(opt.param_groups[i]["lr"] for i in rates) for opt, rates in list(_RATES.items())}
    return lrs | {("cycled", id(opt)): tuple(_cycled_value(opt.param_groups[i], _cycled_key(opt)) for i in betas)
                  for opt, betas in list(_CYCLED.items())}


def _differ(a: dict, b: dict) -> bool:
    """(an optimizer that made its rates in between changed none)"""
    return any(a[k] != b[k] for k in a.keys() & b.keys())


class SchedulerSteps:
    """The learning-rate schedulers a traced call stepped (``with
    SchedulerSteps() as steps``), to step them again at a replay: their
    Python is all they do to the step (the rates they set are inputs).
    :attr:`unexplained` says whether a device learning rate changed during
    the call other than by those steps (a replay could not redo that)."""

    def __init__(self):
        self.calls: list = []  # (weakref of the scheduler, args, kwargs, optimizer steps before it)
        self.optimizer_steps = 0
        self._depth = 0
        self._checks: list = []  # learning rates around each step, and at the ends

    def __enter__(self):
        _SCHEDULING.append(self)
        self._checks.append(_rates())
        return self

    def __exit__(self, *exc):
        _SCHEDULING.remove(self)
        self._checks.append(_rates())

    @property
    def unexplained(self) -> bool:
        c = self._checks
        return any(_differ(c[i], c[i + 1]) for i in range(0, len(c) - 1, 2))

    def run(self, step, scheduler, args, kwargs):
        if self._depth:  # a scheduler stepping its children (SequentialLR, ChainedScheduler)
            return step(scheduler, *args, **kwargs)
        self.calls.append((weakref.ref(scheduler), args, kwargs, self.optimizer_steps))
        self._checks.append(_rates())
        self._depth += 1
        try:
            return step(scheduler, *args, **kwargs)
        finally:
            self._depth -= 1
            self._checks.append(_rates())


_SCHEDULING: list[SchedulerSteps] = []


def _watched(step):
    def watched_step(self, *args, **kwargs):
        if _SCHEDULING:
            return _SCHEDULING[-1].run(step, self, args, kwargs)
        return step(self, *args, **kwargs)

    watched_step.lazycore_wraps = step
    return watched_step


def read_as_input(opt) -> tuple[str, ...]:
    """The hyperparameters of ``opt`` its program reads as inputs (``"betas"``:
    its first element, :data:`_TENSOR_BETA1`; ``"momentum"`` while torch's
    step takes its momentum branch, :data:`_TENSOR_MOMENTUM`: where it does
    not, the momentum is left to the guards, so a captured step guards the
    branch, not the value)."""
    key = _cycled_key(opt) if _CYCLED.get(opt) else None
    cycled = (key,) if key == "betas" or (key and _momentum_on_device(opt)) else ()
    return ("lr",) * bool(_RATES.get(opt)) + cycled


def _made_with(add_param_group):
    """``Optimizer.add_param_group``, which also makes the group's device
    learning rate (and its ``betas[0]``, :data:`_TENSOR_BETA1`) when its
    parameters are on the lazy device already: made before any step, it is no
    tensor a captured step made, and a first step reads it as every later
    step does."""

    def with_rates(self, param_group):
        add_param_group(self, param_group)
        if not isinstance(self, _TENSOR_LR) or MADE.refs is not None or torch.compiler.is_compiling():
            return  # (an optimizer made inside a captured step: its first step makes them)
        i = len(self.param_groups) - 1
        group = self.param_groups[i]
        if not _on_lazy(group):
            return
        device = group["params"][0].device
        if type(group.get("lr")) is float:
            _RATES.setdefault(self, {})[i] = _Rate(group["lr"], device)
        betas = group.get("betas")
        if betas and type(betas[0]) is float and not group.get("differentiable") and _beta1_on_device(self):
            _CYCLED.setdefault(self, {})[i] = _Rate(betas[0], device)
        momentum = group.get("momentum")
        # (a momentum of 0 is no input: made by the first step that reads one, if any does)
        if isinstance(self, _TENSOR_MOMENTUM) and type(momentum) is float and _momentum_on_device(self):
            _CYCLED.setdefault(self, {})[i] = _Rate(momentum, device)

    with_rates.lazycore_wraps = add_param_group
    return with_rates


def _swap_in(opt, args, kwargs) -> None:
    if _SCHEDULING:
        _SCHEDULING[-1].optimizer_steps += 1
    _make_capturable(opt)
    if not isinstance(opt, _TENSOR_LR):
        return
    rates = None
    for i, group in enumerate(opt.param_groups):
        lr = group["lr"]
        if type(lr) is not float or not _on_lazy(group):
            continue
        if rates is None:
            rates = _RATES.setdefault(opt, {})
        rate = rates.get(i)
        if rate is None:
            rate = rates[i] = _Rate(lr, group["params"][0].device)
        rate.at_step(lr)
        group["lr"] = rate.tensor
    key = _cycled(opt)
    if key == "momentum" and torch.compiler.is_compiling():
        return  # (dynamo would specialize on the float it sees)
    if key is None:
        if isinstance(opt, _TENSOR_BETA1):
            _CYCLED.pop(opt, None)  # (a complex parameter's group added since they were made)
        return  # (a momentum of 0 stays a number: torch's Python asks it, and the guards see it)
    betas = None
    for i, group in enumerate(opt.param_groups):
        value = _cycled_value(group, key)
        if type(value) is _DeviceFloat:
            value = float(value)  # (left by a step that raised: the number it holds is the group's)
        if type(value) is not float or not _on_lazy(group) or group.get("differentiable"):
            continue
        if betas is None:
            betas = _CYCLED.setdefault(opt, {})
        rate = betas.get(i)
        if rate is None:
            rate = betas[i] = _Rate(value, group["params"][0].device)
        rate.at_step(value)
        if key == "betas":
            group["betas"] = (rate.tensor, *group["betas"][1:])
        else:
            group["momentum"] = _DeviceFloat(value, rate.tensor)


def _swap_out(opt, args, kwargs) -> None:
    # (a step that raised leaves the tensor in place: the optimizer takes it
    # as well, and the next step reads its value from there)
    for i, rate in _RATES.get(opt, {}).items():
        group = opt.param_groups[i]
        if group["lr"] is rate.tensor:
            group["lr"] = rate.value
    for i, rate in _CYCLED.get(opt, {}).items():
        group = opt.param_groups[i]
        if "betas" in group and group["betas"][0] is rate.tensor:
            group["betas"] = (rate.value, *group["betas"][1:])
        elif type(group.get("momentum")) is _DeviceFloat:
            group["momentum"] = float(group["momentum"])


def ours(opt) -> bool:
    return any(_on_lazy(g) for g in opt.param_groups) and not torch.compiler.is_compiling()


_ENDS_WITH_BACKWARD: set[int] = set()
"""Ids of the backward passes (autograd's graph tasks) whose optimizer steps
end one training step together, when the backward does: an optimizer stepped
from a gradient hook (optimizer-in-backward, one optimizer a parameter) is
one step of many inside the training step, and ending the training step at
each cut it into a program per parameter group."""


def _step_begins(opt, args, kwargs) -> None:
    if ours(opt):
        if torch._C._current_graph_task_id() in _ENDS_WITH_BACKWARD:
            return  # (an earlier optimizer of this backward began the step: its updates are watched)
        TRACE.cutter.step_begins()


def _step_ended(opt, args, kwargs) -> None:
    """The automatic step barrier (:mod:`lazycore.runtime.autostep`): a step of an
    optimizer over lazy parameters ends the training step; the barrier runs
    before the next op that reads what it updated (not while dynamo traces).
    Stepped inside a backward pass, the training step ends with the backward."""
    if ours(opt):
        task = torch._C._current_graph_task_id()
        if task == -1:
            TRACE.cutter.step_ended(opt)
        elif task not in _ENDS_WITH_BACKWARD:
            _ENDS_WITH_BACKWARD.add(task)
            torch.autograd.Variable._execution_engine.queue_callback(lambda: _backward_ended(task))


def _backward_ended(task: int) -> None:
    _ENDS_WITH_BACKWARD.discard(task)
    TRACE.cutter.step_ended()


def _wrapped_by(fn, marker: str) -> bool:
    while fn is not None:
        if getattr(fn, marker, False):
            return True
        fn = getattr(fn, "lazycore_wraps", None)
    return False


def install() -> None:
    """Add the lazy device to torch's capturable devices and make optimizers
    over lazy parameters capturable (idempotent)."""
    for module in list(sys.modules.values()):
        name = getattr(module, "__name__", "") or ""
        if not name.startswith("torch.optim"):
            continue
        found = module.__dict__.get("_get_capturable_supported_devices")
        if found is not None and not hasattr(found, "lazycore_wraps"):
            module._get_capturable_supported_devices = _with_lazy(found)
        found = module.__dict__.get("_get_value")
        if found is not None and not hasattr(found, "lazycore_wraps"):
            module._get_value = _get_value_on_device(found)
        found = module.__dict__.get("_get_fused_kernels_supported_devices")
        if name == "torch.optim.optimizer" and found is not None and not hasattr(found, "lazycore_wraps"):
            module._get_fused_kernels_supported_devices = _with_lazy(found)  # (run unfused: _unfused)
        short = name.rpartition(".")[2]
        functional = module.__dict__.get(short) if short in _FUNCTIONALS else None
        if callable(functional) and not hasattr(functional, "lazycore_wraps"):
            setattr(module, short, _device_step_values(functional, short in _EAGER_BRANCH))
        # (outermost, so the wrappers above see the flags as these leave them)
        for names, wrap, marker in ((_LR_OPERAND, _lr_operand, "lazycore_lr_operand"),
                                    (_FUSED, _unfused, "lazycore_unfused")):
            functional = module.__dict__.get(short) if short in names else None
            if callable(functional) and not _wrapped_by(functional, marker):
                wrapped = wrap(functional)
                setattr(wrapped, marker, True)
                setattr(module, short, wrapped)
    lbfgs = torch.optim.LBFGS
    if not _wrapped_by(lbfgs.step, "lazycore_lbfgs"):
        lbfgs.step = _lbfgs_step(lbfgs.step)
    if not hasattr(_optimizer.Optimizer.add_param_group, "lazycore_wraps"):
        _optimizer.Optimizer.add_param_group = _made_with(_optimizer.Optimizer.add_param_group)
    import torch.optim.lr_scheduler as schedulers

    for cls in vars(schedulers).values():
        if isinstance(cls, type) and issubclass(cls, schedulers.LRScheduler) and "step" in vars(cls):
            if not hasattr(cls.step, "lazycore_wraps"):
                cls.step = _watched(cls.step)
    if not _HOOK:
        _HOOK.append(_optimizer.register_optimizer_step_pre_hook(_swap_in))
        _HOOK.append(_optimizer.register_optimizer_step_pre_hook(_step_begins))
        _HOOK.append(_optimizer.register_optimizer_step_post_hook(_swap_out))
        _HOOK.append(_optimizer.register_optimizer_step_post_hook(_step_ended))  # after _swap_out


_HOOK: list = []
