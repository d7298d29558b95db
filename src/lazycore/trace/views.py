"""Views over lazy values: the LazyTensor paper's forward and inverse view sequences.

Frontends with aliasing views (torch, NumPy) keep, for every array, a
:class:`Storage` (one lazycore handle shared by a base and all its views, and
the base's memory layout) and the view steps from the storage to the array.
:func:`read` replays the steps forward; :func:`write` replays them backward,
so an in-place update through any view updates the base and every other view.

Each step has ``forward(value, storage)`` and ``inverse(old_input, new_value,
storage)``. The common views have structured steps that lower to cheap ops
(permute, reshape, slice, broadcast); any other view becomes one
:class:`Strided` step that indexes the storage's memory as the view's sizes,
strides (in elements) and offset say, so every strided view is covered.
"""

from __future__ import annotations

from operator import attrgetter

import numpy as np

from lazycore.dialect.types import to_numpy_dtype
from lazycore.ir.context import TRACE
from lazycore.ir.graph import Scalar, Value
from lazycore.ir.memo import Memo
from lazycore.ir.tensor import LazyTensor
from lazycore.trace import composites, core, recipes
from lazycore.trace.scalar_policy import POLICY
from lazycore.ir.config import settings as _settings


class Storage:
    """One lazycore handle and its physical layout (the strides of the base, in elements)."""

    __slots__ = ("handle", "strides", "key", "__weakref__")

    def __init__(self, handle, strides: tuple[int, ...]):
        self.handle = handle
        self.strides = strides
        self.key = None
        """:func:`storage_key`'s answer, made at its first call (the handle's
        type and device and the strides never change: an assignment keeps
        the type)."""


def extent(shape, strides, offset: int = 0) -> int:
    """How many elements of memory an array of ``shape`` laid out by
    ``strides`` from ``offset`` reaches (``offset`` alone for no element)."""
    if 0 in tuple(shape):
        return offset
    return offset + 1 + sum((n - 1) * s for n, s in zip(shape, strides))


def memory(storage: Storage) -> int:
    """How many elements (of its handle's type) ``storage``'s memory holds:
    its handle laid out by its strides reaches that far (a split's part's
    views share it, and may be strided past their own elements)."""
    return extent(storage.handle.shape, storage.strides)


class _Key(tuple):
    """A value hashed by identity (one object per value, :func:`storage_key`),
    compared as a tuple: a key made again after its table was emptied hashes
    apart and misses, never answers wrongly."""

    __slots__ = ()
    __hash__ = object.__hash__


_STORAGE_KEYS = Memo("trace.storage_keys", 4096)
"""(handle type, device, strides) -> its one :class:`_Key`."""


def storage_key(storage: Storage) -> _Key:
    """What a view read depends on of ``storage`` besides the steps: its
    handle's type and device and its strides, as one object per value
    (hashed at no cost: a frontend's per-op key of a view read holds it)."""
    k = storage.key
    if k is None:
        h = storage.handle
        plain = (h.type, h.device, storage.strides)
        k = _STORAGE_KEYS.get(plain)
        if k is None:
            k = _STORAGE_KEYS.put(plain, _Key(plain))
        storage.key = k
    return k


def contiguous_strides(shape) -> tuple[int, ...]:
    """Row-major strides, in elements, of an array of ``shape``."""
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(strides))


def read(storage: Storage, steps: tuple, start=None):
    """The handle for the value that ``steps`` derive from ``storage``.

    Replayed per signature (the storage's type, device and layout, and the
    steps): a loop reads the same views of fresh view objects every step.
    ``start``: as :meth:`Recipe.replay <lazycore.trace.recipes.Recipe.replay>`'s."""
    h = storage.handle
    if not steps:
        return h
    if TRACE.recorder is None:
        steps = _answered(storage, steps, start)
    key = _replay_key(storage, steps)
    if key is None:
        return _read(storage, steps)
    recipe = _READS.get(key)
    if recipe is not None:
        return recipe.replay((h,), (), start)
    out, recipe = recipes.record(_read, (h,), storage, steps)
    _remember(_READS, key, recipe)
    return out


def write(storage: Storage, steps: tuple, new) -> None:
    """Make ``new`` the value of the view ``steps`` over ``storage``, in place:
    the new value flows back through the steps into the storage (replayed per
    signature, as :func:`read`)."""
    if steps:
        key = _replay_key(storage, steps)
        if key is None:
            new = _written(storage, steps, new)
        else:
            key += (new.type, new.device)
            inputs = (storage.handle, new)
            recipe = _WRITES.get(key)
            if recipe is not None and recipe.fits(inputs):
                new = recipe.replay(inputs)
            else:
                new, recipe = recipes.record(_written, inputs, storage, steps, new)
                _remember(_WRITES, key, recipe)
    storage.handle.assign(new)


def _answered(storage, steps, start=None):
    """``steps`` with each :attr:`Slice.picked` one as the scalar policy
    answers for it here: a static slice while its start is baked (a plain
    step, whose read is recorded and replayed as any), else one whose start
    is a parameter (read as it is, never recorded: its parameter is its
    own, :meth:`Slice._varying_start`). The policy is asked at every read
    (a place is the how-manieth start of the step and what it slices,
    :func:`_sliced`)."""
    for i, step in enumerate(steps):
        if type(step) is Slice and step.picked is True:
            break
    else:
        return steps
    out = list(steps[:i])
    for step in steps[i:]:
        if type(step) is Slice and step.picked is True:
            step = step.answered(POLICY.start_varies(step.start, _sliced(storage, out), start))
        out.append(step)
    return tuple(out)


def _sliced(storage, before):
    """What a picked slice after the steps ``before`` slices, as its start's
    policy place holds it: the storage (:func:`storage_key`: its handle's
    type, device and layout, one object hashed at no cost) and the sizes
    those steps make (their slices' counts, not their starts: the policy's
    own numbers), so the key changes where the value sliced does (a
    growing sequence read through a fixed buffer,
    ``buf[:, :n].reshape(...)[:, n - 1:]``): a program of its own either
    way. (A step's other fields are its line's, as the place's line is.)"""
    t = storage_key(storage)
    if not before:
        return t
    key = [t]
    for step in before:
        c = type(step)
        if c is Slice:
            key.append(step.count)
        elif c is Reshape or c is Expand:
            key.append(step.shape)
        elif c is Strided:
            key.append(step.size)
    return tuple(key)


def _read(storage, steps):
    h = storage.handle
    for step in _folded(steps):
        h = step.forward(h, storage)
    return h


def _folded(steps) -> list:
    """``steps`` with each run of permutes made one permute and each run of
    reshapes its last: the same value in fewer nodes. A linear layer's
    backward reads its weight through ``t().t()``, two transposes, at every
    call (T5: 34 reads a step). A read always makes at least one node: one
    that gave the storage's handle itself cost a captured step replays
    (tests/torch/test_capture.py's momentum test: 6 replays of 8)."""
    if len(steps) < 2:  # most reads: nothing to fold, no list made on the per-op path
        return steps
    out = []
    for step in steps:
        t = type(step)
        if out and type(out[-1]) is t and (t is Permute or t is Reshape):
            last = out.pop()
            if t is Permute:
                step = Permute([last.dims[d] for d in step.dims])
        out.append(step)
    return out


def _written(storage, steps, new):
    """The storage's value after writing ``new`` through ``steps`` (a value:
    a recording may not assign)."""
    values = [storage.handle]
    for step in steps[:-1]:
        values.append(step.forward(values[-1], storage))
    for step, old in zip(reversed(steps), reversed(values)):
        new = step.inverse(old, new, storage)
    return new


_READS = Memo("trace.view_reads", 4096)
_WRITES = Memo("trace.view_writes", 4096)
_FIELDS: dict = {}
"""Step class -> getter of its fields (the steps below register themselves)."""


def _replay_key(storage, steps):
    """What a view read or write depends on; None when replay is off, a
    recording is running, or a step is not one of this module's own (a
    frontend's subclass may do more than make nodes)."""
    if not _settings.replay or TRACE.recorder is not None:
        return None
    key = steps_key(steps)
    if key is None:
        return None
    for step in steps:
        if type(step) is Slice and step.picked:
            # its nodes are the policy's answer for its start where it is read
            # (a static slice, then a parameter's), which a replay would not ask
            return None
    h = storage.handle
    return (h.type, h.device, storage.strides, key)


def steps_key(steps: tuple):
    """``steps`` as a hashable value equal for equal steps; None when a step is
    not one of this module's own."""
    key = []
    for step in steps:
        fields = _FIELDS.get(type(step))
        if fields is None:
            return None
        key.append((type(step), fields(step)))
    return tuple(key)


def _remember(memo: Memo, key, recipe) -> None:
    if recipe is not None:
        memo.put(key, recipe)


OVERLAP_MESSAGE = (
    "unsupported operation: more than one element of the written-to tensor refers to a single "
    "memory location. Please clone() the tensor before performing the operation."
)


def const(value, dtype: str, device):
    return core.apply("constant", value=np.asarray(value, dtype=to_numpy_dtype(dtype)), device=device)




class Permute:
    __slots__ = ("dims",)

    def __init__(self, dims):
        self.dims = tuple(dims)

    def forward(self, h, storage):
        return core.apply("permute", h, dims=self.dims)

    def inverse(self, old, new, storage):
        return core.apply("permute", new, dims=tuple(np.argsort(self.dims)))


class Reshape:
    __slots__ = ("shape",)

    def __init__(self, shape):
        self.shape = tuple(shape)

    def forward(self, h, storage):
        return core.apply("reshape", h, shape=self.shape)

    def inverse(self, old, new, storage):
        return core.apply("reshape", new, shape=old.shape)


class Reverse:
    __slots__ = ("dims",)

    def __init__(self, dims):
        self.dims = tuple(dims)

    def forward(self, h, storage):
        return core.apply("reverse", h, dims=self.dims)

    def inverse(self, old, new, storage):
        return core.apply("reverse", new, dims=self.dims)


class Expand:
    __slots__ = ("shape",)

    def __init__(self, shape):
        self.shape = tuple(shape)

    def forward(self, h, storage):
        lead = len(self.shape) - len(h.shape)
        return core.apply("broadcast_in_dim", h, dims=tuple(range(lead, len(self.shape))), shape=self.shape)

    def inverse(self, old, new, storage):
        raise RuntimeError(OVERLAP_MESSAGE)


PARAM = "param"
""":attr:`Slice.picked` of a slice whose start the policy has answered is a parameter."""


class Slice:
    __slots__ = ("dim", "start", "count", "step", "picked", "answers")

    def __init__(self, dim, start, count, step, picked=False):
        self.dim, self.start, self.count, self.step = dim, start, count, step
        self.answers = None
        """(static, parameter): this slice answered (:meth:`answered`), made once."""
        self.picked = picked
        """The start is a number the program chose (``alphas[t]`` in a
        sampling loop over ``t``, a random crop's corner ``x[..., top:top +
        h]``, a window ``x[:, i:i + k]`` in a loop over ``i``): a number of
        the scalar policy, baked until its place has seen two values, then
        a program parameter (a ``dynamic_slice``), so a loop over it
        compiles a bounded number of programs. The sizes stay static: the
        frontend has clamped start and stop as eager does, so the start is
        in range and the dynamic slice's own clamp never moves it."""

    def answered(self, param: bool) -> "Slice":
        """This slice with the policy's answer for its start: static, or a
        parameter (:data:`PARAM`) without asking again."""
        got = self.answers
        if got is None:
            got = self.answers = (Slice(self.dim, self.start, self.count, self.step),
                                  Slice(self.dim, self.start, self.count, self.step, PARAM))
        return got[param]

    def _varying_start(self, h):
        """The start as a program parameter, or None where the policy bakes
        it (then no node is made: a baked start is the slice's attribute).
        Each read makes a parameter of its own, never one shared with
        another read of the same number (as a recording's scalars are,
        :func:`lazycore.trace.recipes.shared`): a crop's top and left corners
        that happen to be equal would otherwise be one parameter, another
        program. No recording holds either answer: a view's read asks before
        (:func:`_answered`), a write or a lowering here (their recordings
        not kept)."""
        if not self.picked:
            return None
        TRACE.taint()  # (a recording of a baked start would replay it after the place has varied)
        if self.picked is not PARAM and not POLICY.start_varies(self.start, h.type):
            return None
        return LazyTensor(Value(Scalar(np.asarray(self.start, np.int64), "i64"), 0), h.device)

    def _starts(self, start, dev, rank):
        zero = const(0, "i64", dev) if rank > 1 else None  # (one node for every other dim)
        return [start if d == self.dim else zero for d in range(rank)]

    def forward(self, h, storage):
        rank = len(h.shape)
        start = self._varying_start(h) if self.step == 1 else None
        if start is not None:
            sizes = list(h.shape)
            sizes[self.dim] = self.count
            return core.apply("dynamic_slice", h, self._starts(start, h.device, rank), sizes=tuple(sizes))
        start = [0] * rank
        limit = list(h.shape)
        strides = [1] * rank
        start[self.dim] = self.start
        limit[self.dim] = self.start + (self.count - 1) * self.step + 1 if self.count else self.start
        strides[self.dim] = self.step
        return core.apply("slice", h, start=start, limit=limit, strides=strides)

    def inverse(self, old, new, storage):
        return self.update(old, new, self._varying_start(old) if self.step == 1 else None)

    def update(self, old, new, start=None):
        """``old`` with ``new`` written where this slice reads; ``start``: its
        start as a handle (a program parameter), or None: the static one."""
        dev = old.device
        rank = len(old.shape)
        if self.step == 1:
            if start is None:
                start = const(self.start, "i64", dev)
            return core.apply("dynamic_update_slice", old, new, self._starts(start, dev, rank))
        # Strided slice: spread the update with interior padding and pick it
        # where a mask (padded the same way) says the update lands.
        low = [0] * rank
        high = [0] * rank
        interior = [0] * rank
        low[self.dim] = self.start
        interior[self.dim] = self.step - 1
        used = self.start + (self.count - 1) * self.step + 1 if self.count else self.start
        high[self.dim] = old.shape[self.dim] - used
        zero = const(0, new.dtype, dev)
        spread = core.apply("pad", new, zero, low=low, high=high, interior=interior)
        ones = core.apply("broadcast_in_dim", const(True, "i1", dev), dims=(), shape=new.shape)
        mask = core.apply("pad", ones, const(False, "i1", dev), low=low, high=high, interior=interior)
        return core.apply("select", mask, spread, old)


class Bitcast:
    """The same bits read as another element type of the same width (torch's ``view(dtype)``)."""

    __slots__ = ("dtype",)

    def __init__(self, dtype: str):
        self.dtype = dtype

    def forward(self, h, storage):
        return core.apply("bitcast_convert", h, dtype=self.dtype)

    def inverse(self, old, new, storage):
        return core.apply("bitcast_convert", new, dtype=old.dtype)


class AsReal:
    """A complex array as a real one with a last dimension of 2, (real, imaginary)
    (torch's ``view_as_real``, under ``.real``/``.imag``; NumPy's ``.real``/``.imag``)."""

    __slots__ = ()

    def forward(self, h, storage):
        parts = [core.apply("reshape", core.apply(p, h), shape=h.shape + (1,)) for p in ("real", "imag")]
        return core.apply("concatenate", *parts, dim=len(h.shape))

    def inverse(self, old, new, storage):
        return _complex_of(new)


class AsComplex:
    """A real array whose last dimension is 2 as a complex one (torch's ``view_as_complex``)."""

    __slots__ = ()

    def forward(self, h, storage):
        return _complex_of(h)

    def inverse(self, old, new, storage):
        return AsReal().forward(new, storage)


class Convert:
    """The same values in another element type that holds each of them exactly
    (torch's complex32, stored as complex<f32>, whose parts are float16s: its
    ``view_as_real`` is float16, the ``view_as_complex`` of float16 pairs is it)."""

    __slots__ = ("dtype",)

    def __init__(self, dtype: str):
        self.dtype = dtype

    def forward(self, h, storage):
        return core.convert_to(h, self.dtype)

    def inverse(self, old, new, storage):
        return core.convert_to(new, old.dtype)


def _complex_of(h):
    """(..., 2) real -> (...) complex."""
    rank, shape = len(h.shape), h.shape[:-1]
    part = []
    for i in (0, 1):
        one = core.apply("slice", h, start=(0,) * (rank - 1) + (i,), limit=h.shape[:-1] + (i + 1,), strides=(1,) * rank)
        part.append(core.apply("reshape", one, shape=shape))
    return core.apply("complex", *part)


class Conj:
    """The complex conjugate, as a view (torch's ``conj()``: writes through it
    land conjugated in the base)."""

    __slots__ = ()

    def forward(self, h, storage):
        return composites.conj(h)

    def inverse(self, old, new, storage):
        return self.forward(new, storage)


class Strided:
    """Any strided view: ``size``/``stride``/``offset`` (in elements) over the
    storage's memory. Always the first and only step of its view."""

    __slots__ = ("size", "stride", "offset")

    def __init__(self, size, stride, offset):
        self.size, self.stride, self.offset = tuple(size), tuple(stride), offset

    def _index(self, dev):
        rank = len(self.size)
        idx = const(self.offset, "i64", dev)
        idx = core.apply("broadcast_in_dim", idx, dims=(), shape=self.size)
        for d in range(rank):
            if self.size[d] > 1 and self.stride[d]:
                i = core.apply("iota", dim=d, shape=self.size, dtype="i64", device=dev)
                s = core.apply("broadcast_in_dim", const(self.stride[d], "i64", dev), dims=(), shape=self.size)
                idx = core.apply("add", idx, core.apply("mul", i, s))
        return idx

    def forward(self, h, storage):
        if 0 in self.size:  # nothing to read
            zero = core.apply("constant", value=np.zeros((), to_numpy_dtype(h.dtype)), device=h.device)
            return core.apply("broadcast_in_dim", zero, dims=(), shape=self.size)
        flat = _memory(h, storage)
        rank = len(self.size)
        return core.apply(
            "gather", flat, self._index(h.device),
            offset_dims=(), collapsed_slice_dims=(0,), operand_batching_dims=(),
            start_indices_batching_dims=(), start_index_map=(0,), index_vector_dim=rank,
            slice_sizes=(1,), indices_are_sorted=False,
        )

    def inverse(self, old, new, storage):
        if any(n > 1 and s == 0 for n, s in zip(self.size, self.stride)):
            raise RuntimeError(OVERLAP_MESSAGE)
        if 0 in self.size:
            return old
        flat = _memory(old, storage)
        rank = len(self.size)
        flat = core.apply(
            "scatter", flat, self._index(old.device), new,
            update_window_dims=(), inserted_window_dims=(0,), input_batching_dims=(),
            scatter_indices_batching_dims=(), scatter_dims_to_operand_dims=(0,), index_vector_dim=rank,
            mode="replace",
        )
        return _from_memory(flat, old.shape, storage)


def _memory_order(shape, strides):
    """Dims from the slowest to the fastest varying in memory; checks the layout is dense."""
    order = sorted(range(len(shape)), key=lambda d: (-strides[d], -d))
    acc = 1
    for d in reversed(order):
        if shape[d] != 1 and strides[d] != acc:
            raise NotImplementedError(
                f"lazycore: views of a tensor with a non-dense layout (sizes {list(shape)}, strides "
                f"{list(strides)}) are not supported"
            )
        acc *= shape[d]
    return tuple(order)


def _memory(h, storage):
    order = _memory_order(h.shape, storage.strides)
    if order != tuple(range(len(order))):
        h = core.apply("permute", h, dims=order)
    return core.apply("reshape", h, shape=(int(np.prod(h.shape, dtype=np.int64)),))


def _from_memory(flat, shape, storage):
    order = _memory_order(shape, storage.strides)
    h = core.apply("reshape", flat, shape=tuple(shape[d] for d in order))
    if order != tuple(range(len(order))):
        h = core.apply("permute", h, dims=tuple(np.argsort(order)))
    return h


for _cls in (Permute, Reshape, Reverse, Expand, Bitcast, Convert, Strided):
    _FIELDS[_cls] = attrgetter(*_cls.__slots__)
_FIELDS[Slice] = attrgetter("dim", "start", "count", "step", "picked")
for _cls in (AsReal, AsComplex, Conj):  # no fields: the class is the whole key
    _FIELDS[_cls] = lambda step: ()

PART_STEPS = (AsReal, AsComplex)
"""Steps after which the storage's memory layout no longer describes the view's
elements (a complex element is two real ones): no Strided step may follow them."""
