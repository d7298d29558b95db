"""The torch tensor of the lazy device: a wrapper subclass over a lazycore handle.

Torch sees an ordinary tensor with sizes, strides and a ``lazy:N`` device;
its data is a lazycore value. Views are the LazyTensor paper's view
sequences: every tensor points at a :class:`Storage` (one lazycore handle
shared by a base and all its views) plus the steps that derive its value from
the storage. Reading a view replays the steps forward (:func:`read`); an
in-place update of a view replays them backward into a new storage value
(:func:`write`), so ``x.t().mul_(2)`` updates ``x`` exactly as in eager.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import sys
import threading

from weakref import getweakrefs as _weakrefs
from weakref import ref as _weakref

import torch

from lazycore.ir.context import LOCK as _LOCK
from lazycore.trace import core
from lazycore.runtime import device as _lc_device
from lazycore.trace import views
from lazycore.trace.views import Storage

from . import dtypes


class _Entry:
    """The frame that called into torch for the op being dispatched (None
    outside dispatch): where the search for the user's line starts, above
    dispatch's own frames (:func:`lazycore.ir.sourceloc.caller`)."""

    __slots__ = ("frame",)

    def __init__(self):
        self.frame = None


ENTRY = _Entry()


class Tensor(torch.Tensor):
    """A tensor on the lazy device (``lazycore.torch.device()``)."""

    # No __slots__ for _storage, _steps and _key (~0.15 us an op less): a
    # module moved onto the device swaps each CPU parameter with its lazy
    # tensor (torch.utils.swap_tensors), which refuses classes of other slots

    # No __torch_function__ layer: everything is handled below autograd.
    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None, _getframe=sys._getframe,
                           _acquire=_LOCK.acquire, _release=_LOCK.release):
        # one op at a time across threads: the op's nodes, its view
        # bookkeeping and ENTRY are one step of the shared graph (docs/threads.md);
        # acquire/release, not `with`: a `with` on the RLock costs ~0.2 us more per op
        _acquire()
        try:
            entry = ENTRY
            outer = entry.frame
            try:
                entry.frame = _getframe(1)  # the frame that called into torch
            except ValueError:  # called from a thread with no Python frame below (a C++ worker)
                entry.frame = None
            try:
                return _dispatch(func, args, kwargs or {})
            finally:
                entry.frame = outer
        finally:
            _release()

    def numpy(self, *, force: bool = False):
        if self.requires_grad and not force:
            raise RuntimeError(
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead."
            )
        return to_host(self).numpy()

    @property
    def data(self):
        return self.detach()

    @data.setter
    def data(self, new):
        if not isinstance(new, Tensor):  # another device's value: as torch from CUDA to CPU
            return _set_data(self, new)
        # torch swaps the metadata; the value behind it is ours to swap
        torch._C.TensorBase.data.__set__(self, new)
        self._storage = new._storage
        self._steps = new._steps
        self._key = new._key

    def tolist(self):
        return to_host(self).tolist()

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        # a repeating backward is replayed, not run by the engine (backward_replay.py)
        replayed = BACKWARD
        if replayed is not None and replayed(self, gradient, retain_graph, create_graph, inputs):
            return None
        return torch.Tensor.backward(self, gradient, retain_graph, create_graph, inputs)

    # the frontend protocol (lazycore.trace.protocol)
    def __lazycore_value__(self):
        return read(self)

    @classmethod
    def __lazycore_wrap__(cls, handle):
        return wrap(handle)

    def __repr__(self, *, tensor_contents=None):
        text = repr(to_host(self))
        extra = f", device='{self.device}'"
        if self.grad_fn is not None:
            extra += f", grad_fn=<{type(self.grad_fn).__name__}>"
        elif self.requires_grad:
            extra += ", requires_grad=True"
        return text[:-1] + extra + ")"

    def __format__(self, format_spec):
        # Eager formats a 0-d tensor as its Python number (f"{loss:.4f}" in a
        # user's log line, Switch Transformers' f"expert_{idx[0]}" module
        # names); torch's rule asks ``type(self) is Tensor``, which this
        # subclass fails, so without this the text would be the repr and any
        # format spec a TypeError. A parameter keeps object's format, as
        # eager's ``Parameter`` (a lazy one is this class marked ``_is_param``).
        if self.dim() == 0 and not self.__dict__.get("_is_param", False):
            return self.detach().item().__format__(format_spec)
        return object.__format__(self, format_spec)

    # A deep copy is a clone, as torch's rule for device tensors without a host
    # storage (``lazy`` and ``xla`` in torch/_tensor.py). A pickle
    # (``torch.save``) is a CPU tensor's, as PyTorch/XLA's ``xm.save`` writes:
    # a checkpoint loads in a process that never imported lazycore (torch's
    # rule would rebuild on the ``lazy`` device, which plain torch cannot), and
    # ``load_state_dict`` copies it onto the lazy device. A parameter stays a
    # parameter; attributes set on a tensor stay. Views do not share storage in a copy.

    def __deepcopy__(self, memo):
        if not self.is_leaf:
            raise RuntimeError(
                "Only Tensors created explicitly by the user "
                "(graph leaves) support the deepcopy protocol at the moment.  "
                "If you were attempting to deepcopy a module, this may be because "
                "of a torch.nn.utils.weight_norm usage, "
                "see https://github.com/pytorch/pytorch/pull/103001"
            )
        if id(self) in memo:
            return memo[id(self)]
        with torch.no_grad():
            new = self.clone()
        if self.requires_grad:
            new.requires_grad_()
        if self.grad is not None:
            new.grad = copy.deepcopy(self.grad, memo)
        new.__dict__.update(copy.deepcopy(_user_state(self), memo))
        memo[id(self)] = new
        return new

    def __reduce_ex__(self, proto):
        state = _user_state(self)
        if state.pop("_is_param", False):
            return (torch._utils._rebuild_parameter_with_state,
                    (self.detach(), self.requires_grad, collections.OrderedDict(), state))
        host = to_host(self).detach()  # a barrier when pending
        if self.requires_grad:
            host.requires_grad_()
        host.__dict__.update(state)
        return host.__reduce_ex__(proto)  # torch's own (allowlisted) rebuild of a CPU tensor


def _dispatch(func, args, kwargs):
    raise RuntimeError(f"lazycore: {func} reached a lazy tensor before the dispatcher registered itself "
                       "(lazycore.frontends.torch.dispatch, imported by lazycore.torch)")


def route_ops(run) -> None:
    """Send every ATen op on a lazy tensor to ``run(func, args, kwargs)``. The
    dispatcher (:mod:`.dispatch`) builds on this module, so it registers its
    ``run`` here when it is imported; the op path then calls it as a global,
    with no import statement and no attribute lookup."""
    global _dispatch
    _dispatch = run


_INTERNAL = frozenset({"_storage", "_steps", "_key"})


def _user_state(t) -> dict:
    """What else ``t.__dict__`` holds: attributes set on the tensor (``_is_param`` ...)."""
    return {k: v for k, v in t.__dict__.items() if k not in _INTERNAL}


# --- devices ----------------------------------------------------------------------

_TORCH_TO_LC: dict[int, object] = {}
_LC_TO_TORCH: dict[object, torch.device] = {}


def _ordered_devices():
    # Accelerators first, so torch.device("lazy") (index 0) is the best device.
    devs = _lc_device.devices()
    return [d for d in devs if d.platform != "cpu"] + [d for d in devs if d.platform == "cpu"]


def _init_devices():
    if not _TORCH_TO_LC:
        for i, d in enumerate(_ordered_devices()):
            _TORCH_TO_LC[i] = d
            _LC_TO_TORCH[d] = torch.device("lazy", i)


class _Current(threading.local):
    """The index a ``lazy`` device without one names in this thread
    (``torch.lazy.set_device``, as ``torch.cuda.set_device``)."""

    index = 0


CURRENT = _Current()

_LC_OF: dict = {}
"""torch device (or its string) with an index -> lazycore device."""


def lc_device(tdev) -> object:
    """The lazycore device behind a torch ``lazy:N`` device (``lazy``: the current one)."""
    d = _LC_OF.get(tdev)
    if d is None:
        d = _lc_device_of(tdev)
        if torch.device(tdev).index is not None:
            _LC_OF[tdev] = d
    return d


def _lc_device_of(tdev) -> object:
    _init_devices()
    tdev = torch.device(tdev)
    if tdev.type != "lazy":
        raise RuntimeError(f"expected a lazy device, got {tdev}")
    try:
        return _TORCH_TO_LC[CURRENT.index if tdev.index is None else tdev.index]
    except KeyError:
        raise RuntimeError(f"no lazy device {tdev} (there are {len(_TORCH_TO_LC)})") from None


def torch_device(lc_dev) -> torch.device:
    _init_devices()
    tdev = _LC_TO_TORCH.get(lc_dev)
    if tdev is None:
        tdev = _number(lc_dev)
    return tdev


def device_count() -> int:
    """How many ``lazy:N`` devices there are: one per device jaxlib sees (meshes,
    numbered after them, are not devices of their own)."""
    _init_devices()
    return sum(1 for d in _TORCH_TO_LC.values() if not isinstance(d, _lc_device.Mesh))


def _number(lc_dev) -> torch.device:
    """A ``lazy:N`` device for a lazycore device made after the devices were
    numbered (a mesh), numbered after them."""
    if not isinstance(lc_dev, _lc_device.Mesh):
        raise KeyError(f"{lc_dev} has no torch device")
    tdev = torch.device("lazy", len(_TORCH_TO_LC))
    _TORCH_TO_LC[tdev.index] = lc_dev
    _LC_TO_TORCH[lc_dev] = tdev
    return tdev


def device(kind=None, index: int = 0) -> torch.device:
    """The torch device of a lazycore device: ``device()`` is the best one there is
    (an accelerator when jaxlib sees one, else the CPU); ``device("cpu")``,
    ``device("gpu", 1)`` pick one; ``device(mesh)`` is a :class:`lazycore.Mesh`'s
    (tensors moved there are replicated over its devices until
    :func:`lazycore.torch.mark_sharding` lays them out)."""
    _init_devices()
    if isinstance(kind, _lc_device.Mesh):
        return torch_device(kind)
    if kind is None:
        return _LC_TO_TORCH[_TORCH_TO_LC[0]]
    kind = "gpu" if kind == "cuda" else kind
    same = [d for d in _ordered_devices() if d.platform == kind]
    if index >= len(same):
        have = ", ".join(d.name for d in _ordered_devices())
        raise RuntimeError(f"no lazycore device {kind}:{index} (available: {have})")
    return _LC_TO_TORCH[same[index]]


# --- making tensors and reading/writing their values ----------------------------------


def wrap(handle, meta: torch.Tensor | None = None, strides=None, owned: bool = False) -> Tensor:
    """A new tensor with its own storage holding ``handle``.

    The sizes and strides are ``meta``'s (eager's layout for the op's result)
    when given; otherwise contiguous ``strides`` of the handle's shape.
    ``owned``: the caller made ``handle`` for this tensor alone.
    """
    if not owned:
        # A fresh handle on the same value: the one given may be another storage's
        # (an op that returned its input unchanged), and storages never share one.
        handle = core.LazyTensor(handle._value, handle.device)
    shape = handle.shape
    if meta is not None:
        strides = tuple(meta.stride())
        dtype = meta.dtype  # (a complex<f32> handle is a complex64 or a chalf tensor)
        if dtype is _CHALF:
            handle = _chalf_rounded(handle)
    else:
        dtype = dtypes.TO_TORCH[handle.dtype]
        if strides is None:
            strides = views.contiguous_strides(shape)
    return _new(Storage(handle, strides), (), shape, strides, 0, dtype, torch_device(handle.device))


def wrap_layout(handle, shape, strides, dtype, tdev, key=None) -> Tensor:
    """A new tensor owning ``handle`` (made for it alone), with eager's layout
    for it given directly; ``key``: its :func:`layout_key`, where the caller
    keeps it (a replay's result layout)."""
    if dtype is _CHALF:
        handle = _chalf_rounded(handle)
    return _new(Storage(handle, strides), (), shape, strides, 0, dtype, tdev, key)


_CHALF = dtypes.CHALF
_chalf_rounded = dtypes.chalf_rounded


def view_of(base: Tensor, steps: tuple, layout: tuple, key=None) -> Tensor:
    """A view sharing ``base``'s storage; its value is ``steps`` applied to it.
    ``layout``: the view's :func:`meta_layout`; ``key``: its :func:`layout_key`
    on ``base``'s device, where the caller keeps it."""
    shape, strides, offset, dtype = layout  # (unpacked: a call with *layout costs ~0.1 us more)
    return _new(base._storage, steps, shape, strides, offset, dtype, base.device, key)


def meta_twin(t: torch.Tensor) -> torch.Tensor:
    """A tensor with ``t``'s sizes, strides, storage offset and dtype on the meta
    device, where eager's kernels check arguments and give results' layouts
    without touching data; ``t`` a lazy tensor or any other."""
    if type(t) is Tensor:
        if t._storage is None:
            raise RuntimeError("lazycore: this tensor's storage was released")
        offset = t.storage_offset()
        if offset == 0:
            return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
        extent = 1 + offset + sum((n - 1) * s for n, s in zip(t.shape, t.stride()) if n > 0)
        return torch.empty(extent, dtype=t.dtype, device="meta").as_strided(t.shape, t.stride(), offset)
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")


def meta_layout(meta: torch.Tensor) -> tuple:
    """``(shape, strides, offset, dtype)`` of a meta tensor, as :func:`_new` takes them."""
    return tuple(meta.shape), tuple(meta.stride()), meta.storage_offset(), meta.dtype


_make = torch.Tensor._make_wrapper_subclass


class _Made:
    """While :mod:`.capture` traces a step: weak references to every tensor made."""

    __slots__ = ("refs",)

    def __init__(self):
        self.refs: list | None = None

    @contextlib.contextmanager
    def collecting(self):
        """Collect into a new list for the block; an enclosing collection sees them too."""
        outer, self.refs = self.refs, []
        try:
            yield self.refs
        finally:
            made, self.refs = self.refs, outer
            if outer is not None:
                outer.extend(made)


MADE = _Made()

BACKWARD = None
"""``backward_replay.backward`` once installed: ``Tensor.backward`` tries it first."""


_STRIDED = torch.strided


def _new(storage, steps, shape, strides, offset, dtype, tdev, key=None) -> Tensor:
    # positional arguments (size, strides, storage_offset, memory_format, dtype,
    # layout, device): torch parses keywords by name, 0.25 us of every op
    t = _make(Tensor, shape, strides, offset or None, None, dtype, _STRIDED, tdev)
    t._storage = storage
    t._steps = steps
    # the dispatch signature (see refresh_key)
    t._key = key if key is not None else layout_key(shape, strides, offset, dtype, tdev)
    refs = MADE.refs
    if refs is not None:
        refs.append(_weakref(t))
    return t


def refresh_key(t: Tensor) -> None:
    """After torch's metadata of ``t`` changed in place (an in-place view op):
    its signature for dispatch's caches."""
    t._key = layout_key(tuple(t.shape), t.stride(), t.storage_offset(), t.dtype, t.device)


class LayoutKey(tuple):
    """A tensor's ``(shape, strides, offset, dtype, device)``, one object per
    layout (:func:`layout_key`), hashed by identity: dispatch's signature of a
    call holds its tensors' keys, and hashing their shapes, dtypes and devices
    at every op cost ~0.15 us a tensor. Equality is a tuple's: two keys of one
    layout made apart (the table emptied between them, at its bound) compare
    equal and hash apart, so a cache keyed by them misses, never answers
    wrongly."""

    __slots__ = ()
    __hash__ = object.__hash__


_KEYS: dict = {}
"""Layout (a plain tuple) -> its :class:`LayoutKey`: an interning table, not a
cache, so ``lazycore.cache.clear()`` leaves it. Emptied, a key made for a
layout that live tensors hold would hash apart from theirs, and dispatch would
record each op twice, making the step's graph another program for the life of
those tensors (a clear between a model's upload and its first step cost a
compile a step: tests/test_step_graph_wait_and_clear.py). Emptied whole at
:data:`_KEYS_BOUND` entries, as a memo is (a long run's layouts drift)."""
_KEYS_BOUND = 100_000
_key_of = _KEYS.get


def layout_key(shape, strides, offset, dtype, tdev) -> LayoutKey:
    """The one :class:`LayoutKey` of this layout (a plain tuple for one that
    cannot be hashed, as dispatch's caches then skip the call)."""
    plain = (shape, strides, offset, dtype, tdev)
    try:
        key = _key_of(plain)
    except TypeError:
        return plain
    if key is None:
        if len(_KEYS) >= _KEYS_BOUND:
            _KEYS.clear()
        key = _KEYS[plain] = LayoutKey(plain)
    return key


def read(t: Tensor):
    """The lazycore handle for ``t``'s current value (a view replays its steps)."""
    return views.read(t._storage, t._steps)


def write(t: Tensor, new, overlap_ok: bool = False) -> Tensor:
    """Make ``new`` (``t``'s shape and element type) the value of ``t``, in place;
    through a view it reaches the base and every other view. ``overlap_ok``:
    eager's kernel for the op writes into a tensor some of whose elements share
    one memory location (``fill_`` with a number does; ``add_`` raises)."""
    if t._key[3] is _CHALF:  # (in-place results are chalf values too: see wrap)
        new = _chalf_rounded(new)
    steps = t._steps
    if steps and any(type(s) in _SHARING_STEPS for s in steps):
        steps, new = _through_memory(t, new, overlap_ok)
    views.write(t._storage, steps, new)
    return t


_SHARING_STEPS = (views.Expand, views.Strided)
"""Steps after which several elements of a view may be one memory location."""
_LAYOUT_STEPS = frozenset((views.Permute, views.Reshape, views.Expand, views.Slice, views.Strided, views.Bitcast,
                           views.Conj))
"""Steps that only pick elements of the storage's memory, as eager's strides say
(a conjugating view's also conjugates them)."""


def _through_memory(t: Tensor, new, overlap_ok: bool):
    """``(steps, value)`` writing ``new`` into ``t`` by its sizes, strides and
    offset over the storage's memory. An expanded view's memory location is
    several of its elements, and the view's steps cannot say which one was
    written (``e = x.expand(2, 3); e[1][0] = 5`` writes ``x[0]``); eager's
    strides can. Where elements share a location eager's kernel writes them in
    row-major order, so the last one's value stays."""
    if not all(type(s) in _LAYOUT_STEPS for s in t._steps):
        return t._steps, new  # strides that count parts of complex elements
    for step in t._steps:
        if type(step) is views.Conj:  # elementwise: it commutes with picking elements
            new = step.inverse(None, new, t._storage)
    shape, strides, offset = list(t._key[0]), t._key[1], t._key[2]
    for d, (n, s) in enumerate(zip(shape, strides)):
        if s == 0 and n > 1:
            if not overlap_ok:
                raise RuntimeError(views.OVERLAP_MESSAGE)
            start = [0] * len(shape)
            start[d] = n - 1
            limit = list(new.shape)
            new = core.apply("slice", new, start=start, limit=limit, strides=[1] * len(shape))
            shape[d] = 1
    steps = (views.Strided(shape, strides, offset),)
    stored = t._storage.handle.dtype
    if new.dtype != stored:  # a view(dtype) of the storage
        steps += (views.Bitcast(new.dtype),)
    return steps, new


def to_host(t: Tensor) -> torch.Tensor:
    """A CPU copy of ``t``'s value, with ``t``'s strides (an implicit barrier)."""
    host = dtypes.from_numpy(core.to_numpy(read(t)))
    if t.dtype is _CHALF:  # stored as complex64, whose parts hold float16s: exact
        host = host.to(_CHALF)
    if t.dim() > 1 and not t.is_contiguous() and _dense(t.shape, t.stride()):
        out = torch.empty_strided(t.shape, t.stride(), dtype=host.dtype)
        out.copy_(host)
        return out
    return host


def _dense(shape, strides) -> bool:
    """Non-overlapping and dense: a layout a copy may keep (eager's preserve_format)."""
    acc = 1
    for n, s in sorted(zip(shape, strides), key=lambda p: p[1]):
        if n != 1 and s != acc:
            return False
        acc *= n
    return True


def from_host(host: torch.Tensor, tdev) -> Tensor:
    """Upload a CPU tensor to the lazy device ``tdev`` as a new tensor."""
    handle = upload(host, lc_device(tdev), scalar=False)
    if host.dtype is _CHALF:  # (its parts are float16s already: no rounding)
        shape = handle.shape
        strides = views.contiguous_strides(shape)
        return _new(Storage(handle, strides), (), shape, strides, 0, _CHALF, torch_device(handle.device))
    return wrap(handle)


def upload(host: torch.Tensor, lc_dev, scalar: bool = True):
    """A CPU tensor's value as a lazycore handle on ``lc_dev`` (a 0-d one by
    the scalar policy unless ``scalar`` is False)."""
    if host.numel() == 0:
        # nothing to copy: a constant of its shape, so a step that makes one
        # (transformers' empty key-value cache) uploads nothing and can be captured
        zero = core.scalar(0, dtypes.lazy_dtype(host.dtype), device=lc_dev)
        return core.broadcast_to(zero, tuple(host.shape))
    if scalar and host.dim() == 0:
        return core.scalar(host.item(), dtypes.lazy_dtype(host.dtype), device=lc_dev)
    return core.from_numpy(dtypes.to_numpy(host), lc_dev)


def _swappable(t) -> bool:
    """``torch.utils.swap_tensors`` would take ``t`` (and its gradient)."""
    if _weakrefs(t) or t._use_count() > 2:
        return False
    g = t.grad
    return g is None or not (_weakrefs(g) or g._use_count() > 2)


_DATA = torch._C.TensorBase.data


def _set_data(self, value):
    """``t.data = value`` between the lazy device and another one, as torch
    does between CPU and CUDA: ``t`` keeps its identity (a Parameter stays
    one, with its ``requires_grad``) and takes ``value``'s data. timm's
    ``reparameterize_model`` sets a new CPU ``nn.Conv2d``'s ``weight.data``
    to the folded lazy kernel. torch refuses a wrapper subclass there, so the
    two C++ objects are swapped (``torch.utils.swap_tensors``) where they can
    be; elsewhere torch's error stands. A lazy tensor given another device's
    value comes here from its own ``data`` setter and moves to
    that device, as a CUDA tensor given a CPU value does."""
    try:
        return _DATA.__set__(self, value)
    except RuntimeError:
        if not (isinstance(self, Tensor) or isinstance(value, Tensor)) or not _swappable(self):
            raise
    new = value.detach()
    if isinstance(self, torch.nn.Parameter):
        new = torch.nn.Parameter(new, requires_grad=self.requires_grad)
    else:
        new.requires_grad_(self.requires_grad)
    grad = self.grad
    torch.utils.swap_tensors(self, new)
    if grad is not None and grad.device == self.device:  # (torch keeps one on the old device too,
        self.grad = grad  # and the next backward into it fails: dropped here)
