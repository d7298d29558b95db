"""The update half of a training step on the lazy device: traced twice, then replayed.

Traced per op, an optimizer's step and the gradient clipping before it are
much of a training step's Python: AdamW over benchmark 7's GPT dispatches
about 400 ops per step (40% of the step's tracing time) and
``clip_grad_norm_`` about 80 more. What they do is a function of the
gradients, the parameters, the optimizer's state and hyperparameters, the
same every step. So each is a captured function (:class:`.capture.Captured`)
whose arguments are the gradients (new tensors every step): an optimizer's
first step, which makes its state, runs plainly, the next two are traced
and compared, and later calls replay the recording (clipping: from its
third or fourth call), the rest of the training
step being traced per op around them. A replay makes the very nodes the
trace made (not one ``call`` node), so the programs compiled are exactly
those of per-op tracing.

What is replayed: the body of the ``step`` of torch.optim's optimizers and
of their subclasses that keep it (inside its hooks, which run at every call,
as the schedulers' bookkeeping around it does; an optimizer class with a
``step`` of its own is traced per op, since its Python may compute numbers
from state no guard sees, a Python step counter on ``self``), and
the two halves of ``torch.nn.utils.clip_grad_norm_`` (the total norm, then
the scaling), patched where that function looks them up. The guards are a
captured step's: the hyperparameters (a float learning rate a scheduler
changes is a program input for the optimizers that read it as a device
tensor, every torch.optim optimizer but LBFGS, and so is the ``betas[0]``
of Adam, AdamW, Adamax, NAdam and RAdam, which OneCycleLR and CyclicLR cycle,
and the ``momentum`` of SGD and RMSprop, whose zero-ness is guarded,
:mod:`.optim`), the identity of every state tensor, which
parameters have gradients, grad mode and the default dtype, and the Python
arguments (``max_norm``, ``norm_type``). Not replayed: a step given a
closure (``LBFGS``), ``error_if_nonfinite=True`` (it reads a value), calls
inside a captured step or under ``torch.compile``, tensors off the lazy
device, and a function that keeps failing to replay (:data:`_MISSES` traced
calls in a row of one kind, the clipped gradients' layouts: an optimizer that keeps state in host tensors and reads it
as Python numbers, or a step traced while cProfile runs), which is traced per op from
then on for that kind (``LAZYCORE_DEBUG`` says why). ``LAZYCORE_REPLAY_OPTIMIZER=0`` turns
all of it off.
"""

from __future__ import annotations

import weakref
from collections import namedtuple

import torch
import torch.nn.utils.clip_grad as _clip_grad
import torch.optim.optimizer as _optimizer

from lazycore.ir.config import settings

from . import optim as _optim
from .capture import Captured
from .tensor import MADE, Tensor

_MISSES = 4
"""Traced calls in a row (none replayed) after which a function is traced per op for good."""
_KINDS = 8
"""Kinds of calls a function counts misses for (as :data:`.capture._KINDS_KEPT` keeps recordings)."""


class _Replayed:
    """A captured function, and per kind of its calls whether it is still
    worth calling it so. ``clip_grad_norm_``'s two halves are one captured
    function each for the whole process, called for every model a process
    trains: the traced calls in a row are counted per kind (the gradients'
    layouts), so two models clipped in turn (a GAN's generator and
    discriminator), each traced twice before it replays, do not stop each
    other's replays (issue 41). An optimizer's step has one kind."""

    __slots__ = ("captured", "misses", "stopped", "__weakref__")

    def __init__(self, fn, name, optimizer=None):
        self.captured = Captured(fn, optimizer=optimizer)
        self.captured.__qualname__ = name
        self.misses: dict = {}  # kind -> traced calls in a row
        self.stopped: set = set()  # kinds traced per op from now on

    def off(self, kind=None) -> bool:
        """Whether calls of ``kind`` are traced per op for good."""
        return kind in self.stopped

    def __call__(self, kind, *args):
        captured = self.captured
        replays = captured.replays
        out = captured(*args)
        misses = self.misses
        if captured.replays != replays:
            misses.pop(kind, None)
            return out
        if len(misses) >= _KINDS and kind not in misses:
            misses.clear()  # (kinds of a long run drift: each starts its count again)
        n = misses[kind] = misses.get(kind, 0) + 1
        if n >= _MISSES:
            if len(self.stopped) >= _KINDS:
                self.stopped.clear()
            self.stopped.add(kind)
            if settings.debug:
                from lazycore.observe.debug import on_capture

                on_capture(captured.__qualname__, f"traced per op from now on: {captured.why or 'guards keep failing'}")
        return out


def _kind(tensors) -> tuple:
    """What tells apart the clipped gradients of two models: their layouts."""
    return tuple([t._key for t in tensors])


def _wanted() -> bool:
    """Replay here (not inside a captured step's trace, nor while dynamo traces)?"""
    return settings.replay_optimizer and MADE.refs is None and not torch.compiler.is_compiling()


def _lazy(tensors) -> bool:
    return bool(tensors) and all(type(t) is Tensor for t in tensors)


_REPLAYED: "weakref.WeakKeyDictionary[object, _Replayed]" = weakref.WeakKeyDictionary()
"""Optimizer -> its step as a captured function: state that lives as long as
the optimizer (whether replay is still worth trying), not a cache; the
recordings themselves are the captured functions' replayers
(:data:`.capture._PLANS`), which ``lazycore.cache.clear()`` empties."""


def _replaying(step):
    """The body of an optimizer class's ``step`` (inside its hooks), replayed where it can be."""

    def replaying_step(self, *args, **kwargs):
        if args or kwargs or not _wanted() or not _optim.ours(self):
            return step(self, *args, **kwargs)
        replayed = _REPLAYED.get(self)
        if replayed is None:
            # the first step makes the state: traced plainly, it costs the first step (the
            # one a new process waits for) no capture bookkeeping, and the next two are compared
            ref = weakref.ref(self)
            _REPLAYED[self] = _Replayed(lambda grads: step(ref()), f"{type(self).__name__}.step", self)
            return step(self)
        if replayed.off():
            return step(self)
        replayed(None, [p.grad for group in self.param_groups for p in group["params"]])
        return None

    replaying_step.lazycore_wraps = step
    return replaying_step


_Grad = namedtuple("_Grad", "grad")
"""What ``_clip_grads_with_norm_`` reads a gradient from (it is given the gradients, not the parameters)."""


def _total_norm(original):
    replayed = _Replayed(lambda tensors, norm_type, foreach: original(tensors, norm_type, False, foreach),
                         "clip_grad_norm_ (the total norm)")

    def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
        if isinstance(tensors, torch.Tensor):
            tensors = [tensors]
        tensors = list(tensors)
        if error_if_nonfinite or not _wanted() or not _lazy(tensors):
            return original(tensors, norm_type, error_if_nonfinite, foreach)
        kind = _kind(tensors)
        if replayed.off(kind):
            return original(tensors, norm_type, error_if_nonfinite, foreach)
        return replayed(kind, tensors, float(norm_type), foreach)

    get_total_norm.lazycore_wraps = original
    get_total_norm.replayed = replayed
    return get_total_norm


def _scaled(original):
    replayed = _Replayed(lambda grads, max_norm, total_norm, foreach:
                         original([_Grad(g) for g in grads], max_norm, total_norm, foreach),
                         "clip_grad_norm_ (the scaling)")

    def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
        if isinstance(parameters, torch.Tensor):
            parameters = [parameters]
        parameters = list(parameters)
        grads = [p.grad for p in parameters if p.grad is not None]
        if not _wanted() or not _lazy(grads + [total_norm]):
            return original(parameters, max_norm, total_norm, foreach)
        kind = _kind(grads)
        if replayed.off(kind):
            return original(parameters, max_norm, total_norm, foreach)
        replayed(kind, grads, float(max_norm), total_norm, foreach)
        return None

    clip_grads_with_norm_.lazycore_wraps = original
    clip_grads_with_norm_.replayed = replayed
    return clip_grads_with_norm_


def _wrap(cls) -> None:
    """Replay the steps of the optimizer class ``cls`` (its own ``step``, inside its hooks)."""
    step = cls.__dict__.get("step")
    if step is None:
        return  # inherited: wrapped where it is defined
    hooked = getattr(step, "hooked", False)
    inner = step.__wrapped__ if hooked else step
    if hasattr(inner, "lazycore_wraps"):
        return
    if hooked:
        cls.step = _optimizer.Optimizer.profile_hook_step(_replaying(inner))
        cls.step.hooked = True
    else:  # hooked when its first instance is made
        cls.step = _replaying(inner)


def install() -> None:
    """Replay the steps of torch.optim's optimizers and clip_grad_norm_'s two halves (idempotent)."""
    import torch.optim

    for cls in vars(torch.optim).values():
        if isinstance(cls, type) and issubclass(cls, _optimizer.Optimizer) and cls is not _optimizer.Optimizer:
            _wrap(cls)
    # clip_grad_norm_ calls these two through its module's globals, however it was imported
    if not hasattr(_clip_grad._get_total_norm, "lazycore_wraps"):
        _clip_grad._get_total_norm = _total_norm(_clip_grad._get_total_norm)
    if not hasattr(_clip_grad._clip_grads_with_norm_, "lazycore_wraps"):
        _clip_grad._clip_grads_with_norm_ = _scaled(_clip_grad._clip_grads_with_norm_)
