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
``capturable`` entry in ``param_groups`` then reads True.
"""

from __future__ import annotations

import sys
import weakref

import torch
import torch.optim  # noqa: F401  (loads the optimizer modules patched below)
import torch.optim.optimizer as _optimizer

from lazycore.runtime.autostep import CUTTER
from lazycore.trace import core

_LAZY = "lazy"
_TENSOR_LR = (torch.optim.Adam, torch.optim.Adamax, torch.optim.NAdam, torch.optim.RAdam, torch.optim.ASGD,
              torch.optim.Rprop)
"""Optimizers whose capturable step takes its learning rate as a device tensor
without reading it back (SGD, RMSprop, Adagrad and Adadelta call ``.item()``)."""
_TENSOR_BETA1 = (torch.optim.Adam,)
"""Optimizers whose step takes ``betas[0]`` as a device tensor without reading
it back (Adam, AdamW): the beta a scheduler cycles (OneCycleLR, CyclicLR with
``cycle_momentum``) is a program input like the learning rate. (Adam's
``beta2`` goes to ``addcmul_``'s ``value``, a Python number: it stays one.)"""


def _with_lazy(original):
    def supported(*args, **kwargs):
        return [*original(*args, **kwargs), _LAZY]

    supported.lazycore_wraps = original
    return supported


def _on_lazy(group) -> bool:
    return bool(group["params"]) and group["params"][0].device.type == _LAZY


def _make_capturable(opt) -> None:
    for group in opt.param_groups:
        if group.get("capturable", True) or not _on_lazy(group):
            continue  # capturable already, an optimizer without the notion (SGD), or not ours
        for p in group["params"]:
            step = opt.state.get(p, {}).get("step")
            if isinstance(step, torch.Tensor) and step.device != p.device:
                opt.state[p]["step"] = step.to(p.device)
        group["capturable"] = True


class _Rate:
    """A parameter group's float learning rate as a 0-d device tensor, swapped
    into the group while its optimizer steps: the program reads the rate, so a
    scheduler's new value is a new input, not a new program (nor, captured, a
    retrace). Outside the step the group holds the user's float."""

    __slots__ = ("tensor", "value", "fresh")

    def __init__(self, value: float, device):
        with torch.no_grad():
            self.tensor = torch.full((), value, device=device)
        self.value = value
        self.fresh = True

    def fill(self, value: float) -> None:
        """Set the device value: a new program parameter of its own (a fill
        would share its value with every other tensor filled with the same
        number, and a capture could not tell which one the step read). Set
        every step, even to the same value, so the step's graph always reads
        a parameter, not sometimes the last step's result: one program (and,
        captured, one recording)."""
        handle = self.tensor._storage.handle
        core.assign(handle, core.scalar(value, handle.dtype, handle.device, fold=False))
        self.value = value

    def at_step(self, value: float) -> None:
        # a fresh rate was filled for this step already, before a capture began watching it
        if not (self.fresh and value == self.value):
            self.fill(value)
        self.fresh = False


_RATES: "weakref.WeakKeyDictionary[torch.optim.Optimizer, dict[int, _Rate]]" = weakref.WeakKeyDictionary()
_BETA1S: "weakref.WeakKeyDictionary[torch.optim.Optimizer, dict[int, _Rate]]" = weakref.WeakKeyDictionary()
"""A parameter group's float ``betas[0]`` as a device value (a :class:`_Rate`), as for the learning rate."""


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
    for i, rate in _BETA1S.get(opt, {}).items():
        beta1 = opt.param_groups[i]["betas"][0]
        if type(beta1) is float:
            rate.fill(beta1)
            rate.fresh = True


def _rates() -> dict:
    """Every device learning rate's group value, to tell who changed them."""
    lrs = {id(opt): tuple(opt.param_groups[i]["lr"] for i in rates) for opt, rates in list(_RATES.items())}
    return lrs | {("betas", id(opt)): tuple(opt.param_groups[i]["betas"][0] for i in betas)
                  for opt, betas in list(_BETA1S.items())}


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
    its first element, :data:`_TENSOR_BETA1`)."""
    return ("lr",) * bool(_RATES.get(opt)) + ("betas",) * bool(_BETA1S.get(opt))


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
    if not isinstance(opt, _TENSOR_BETA1):
        return
    betas = None
    for i, group in enumerate(opt.param_groups):
        beta1, *rest = group["betas"]
        if type(beta1) is not float or not _on_lazy(group) or group.get("fused") or group.get("differentiable"):
            continue
        if betas is None:
            betas = _BETA1S.setdefault(opt, {})
        rate = betas.get(i)
        if rate is None:
            rate = betas[i] = _Rate(beta1, group["params"][0].device)
        rate.at_step(beta1)
        group["betas"] = (rate.tensor, *rest)


def _swap_out(opt, args, kwargs) -> None:
    # (a step that raised leaves the tensor in place: the optimizer takes it
    # as well, and the next step reads its value from there)
    for i, rate in _RATES.get(opt, {}).items():
        group = opt.param_groups[i]
        if group["lr"] is rate.tensor:
            group["lr"] = rate.value
    for i, rate in _BETA1S.get(opt, {}).items():
        group = opt.param_groups[i]
        if group["betas"][0] is rate.tensor:
            group["betas"] = (rate.value, *group["betas"][1:])


def ours(opt) -> bool:
    return any(_on_lazy(g) for g in opt.param_groups) and not torch.compiler.is_compiling()


def _step_begins(opt, args, kwargs) -> None:
    if ours(opt):
        CUTTER.step_begins()


def _step_ended(opt, args, kwargs) -> None:
    """The automatic step barrier (:mod:`lazycore.runtime.autostep`): a step of an
    optimizer over lazy parameters ends the training step; the barrier runs
    before the next op that reads what it updated (not while dynamo traces)."""
    if ours(opt):
        CUTTER.step_ended()


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
