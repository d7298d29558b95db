"""Moving a module to or from the lazy device keeps its parameters' identity.

``Module._apply`` (behind ``.to``, ``.cpu``, ``.half``, ``.to_empty``) turns
each parameter into its converted copy one module at a time. When the copy
has a layout the old tensor's C++ object can take (CPU to CUDA), torch sets
``param.data`` and the Parameter object stays; a lazy tensor is a Python
wrapper subclass, so torch instead makes a new Parameter per module. A
parameter two modules share (GPT-2's ``lm_head.weight is
transformer.wte.weight``, BERT's decoder, T5's shared embedding) would come
out as two independent copies, and training would silently update them
apart; an optimizer made before ``.to`` would hold the old CPU objects.

So a conversion that involves the lazy device (a tensor of the module is on
it, or ``fn`` puts one there) runs with torch's own swap rule
(``torch.__future__.set_swap_module_params_on_conversion``): each Parameter
object keeps its identity and takes the converted value with
``torch.utils.swap_tensors``, as on CUDA. Where a parameter cannot be swapped
(something holds a weak reference to it, or another reference to its C++
tensor), torch's default rule runs and the shared parameters are tied again
afterwards: every module that held one Parameter holds the same converted
one. Conversions that do not touch the lazy device are torch's, unchanged.
"""

from __future__ import annotations

import threading

import torch

from . import encoder_padding
from .tensor import _DATA, Tensor, _set_data, _swappable

_ORIGINAL = torch.nn.Module._apply


class _State(threading.local):
    inside = False


_STATE = _State()


def _apply(self, fn, recurse=True):
    if _STATE.inside or torch.__future__.get_swap_module_params_on_conversion():
        return _ORIGINAL(self, fn, recurse)
    modules = list(self.modules()) if recurse else [self]
    slots = [(m, k, p) for m in modules for k, p in m._parameters.items() if p is not None]
    if not slots or not _involves_lazy(modules, slots, fn):
        return _ORIGINAL(self, fn, recurse)
    _STATE.inside = True
    try:
        if all(_swappable(p) for _, _, p in slots):
            torch.__future__.set_swap_module_params_on_conversion(True)
            try:
                return _ORIGINAL(self, fn, recurse)
            finally:
                torch.__future__.set_swap_module_params_on_conversion(False)
        out = _ORIGINAL(self, fn, recurse)
        _retie(slots)
        return out
    finally:
        _STATE.inside = False


def _involves_lazy(modules, slots, fn) -> bool:
    """A tensor of the modules is lazy, or ``fn`` makes one lazy (tried on an
    empty CPU tensor of the first parameter's type)."""
    if any(isinstance(p, Tensor) for _, _, p in slots):
        return True
    if any(isinstance(b, Tensor) for m in modules for b in m._buffers.values()):
        return True
    probe = torch.empty(0, dtype=slots[0][2].dtype)
    try:
        with torch.no_grad():
            return isinstance(fn(probe), Tensor)
    except Exception:  # fn cannot take a CPU tensor: the conversion is none of ours
        return False


def _retie(slots) -> None:
    """After torch's default rule: every module slot that held one Parameter
    holds the first converted copy of it."""
    first = {}
    for m, k, old in slots:
        new = m._parameters[k]
        kept = first.setdefault(id(old), new)
        if kept is not new:
            m._parameters[k] = kept


def install() -> None:
    if torch.nn.Module._apply is not _apply:
        torch.nn.Module._apply = _apply
    if "data" not in torch.Tensor.__dict__:  # the getter stays torch's own (no Python frame)
        torch.Tensor.data = property(_DATA.__get__, _set_data, None, _DATA.__doc__)
    encoder_padding.install()  # (a module's forward on the lazy device as eager's CPU runs it)
