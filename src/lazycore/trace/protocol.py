"""The frontend protocol: how the core's tools take a frontend's array type.

A frontend's lazy array type joins the core's tools (``lazycore.export``,
``debug.ir_text``, ``debug.to_dot``) by two methods:

``__lazycore_value__(self)``
    The :class:`~lazycore.ir.tensor.LazyTensor` holding the object's current
    value (for a view, the value read through it). Called whenever a tool
    needs the value, so an in-place update made since is seen.

``__lazycore_wrap__(cls, handle)`` (a classmethod; optional)
    A new object of the frontend owning the ``LazyTensor`` ``handle``: how
    ``lazycore.export`` hands a traced function arguments of the frontend
    its examples came from.

The core's own :class:`~lazycore.ir.tensor.LazyTensor` needs neither. Both
frontends implement them (``lazycore.torch.Tensor``, ``lazycore.numpy.ndarray``).
"""

from __future__ import annotations

from lazycore.ir.tensor import LazyTensor

__all__ = ["handle_of", "is_lazy", "wrap_like"]


def is_lazy(x) -> bool:
    """Whether ``x`` is a lazycore handle or a frontend object exposing one."""
    return isinstance(x, LazyTensor) or hasattr(type(x), "__lazycore_value__")


def handle_of(x) -> LazyTensor:
    """The handle behind ``x``; TypeError for an object that has none."""
    if isinstance(x, LazyTensor):
        return x
    get = getattr(type(x), "__lazycore_value__", None)
    if get is None:
        raise TypeError(
            f"expected a lazy value (a lazycore handle, a lazy torch tensor, a lazycore.numpy array, or an "
            f"object with __lazycore_value__()), got {type(x).__name__}"
        )
    handle = get(x)
    if not isinstance(handle, LazyTensor):
        raise TypeError(f"{type(x).__name__}.__lazycore_value__() returned {type(handle).__name__}, not a LazyTensor")
    return handle


def wrap_like(example, handle: LazyTensor):
    """``handle`` as an object of ``example``'s frontend (``handle`` itself for a core handle)."""
    if isinstance(example, LazyTensor):
        return handle
    wrap = getattr(type(example), "__lazycore_wrap__", None)
    if wrap is None:
        raise TypeError(f"{type(example).__name__} has no __lazycore_wrap__: lazycore cannot make one from a value")
    return wrap(handle)
