"""Where every ATen op on a lazy tensor goes.

For each op overload one handler is chosen once (and cached):

1. special ops that move data or observe it (``copy_``, ``_to_copy``,
   ``_local_scalar_dense``, ...), in :mod:`.special`;
2. view ops: new view steps over the same storage (:mod:`.views`);
3. a registered lowering (:mod:`.lowering`, ops in :mod:`.ops`);
4. an in-place or ``out=`` op whose functional form lowers: the functional
   result is written into the mutated tensor;
5. PyTorch's decomposition table (``torch._decomp``): the decomposition runs
   on lazy tensors, so its pieces come back here (and the nodes they made
   are recorded per call signature and replayed, when the op writes into
   none of its arguments); a ``_foreach_*`` op runs
   its single-tensor op per element the same way (:mod:`.foreach`);
6. the fallback: the eager CPU kernel on materialized inputs, counted with
   the user's source line (:mod:`.fallback`).

Every handler first runs the op on meta tensors: that checks the arguments
with eager's own code (same exceptions, same messages, raised at the user's
call) and gives the result's sizes, strides and dtype.
"""

from __future__ import annotations

import torch
from torch._decomp import decomposition_table

from lazycore.ir.config import settings
from lazycore.ir.context import TRACE
from lazycore.ir.graph import LOG
from lazycore.ir.memo import Memo
from lazycore.ir.sourceloc import release as release_frame
from lazycore.trace.recipes import alias_pattern, float_key, record, record_call, value_class
from lazycore.trace.views import read as read_view
from lazycore.trace.views import Slice, storage_key

from . import (batch_norm_stats, chalf_kernels, fallback, foreach, lowering, multilabel_margin, real_code_ops,
               resize_uint8, special, upsample_linear, views, vision_ops)
from .dtypes import TO_TORCH
from .dtypes import lazy_dtype as _lazy_dtype
from .lowering import convert as _convert
from .meta_store import MISS, STORE
from .ops import factories, norm_kernel, packed, recurrent
from .recipe_store import ALIASED, STORE as RECORDINGS, StoredMemo
from .tensor import (ENTRY, LayoutKey, Tensor, _new, layout_key, lc_device, meta_layout, meta_twin, read,
                     refresh_key, route_ops, torch_device, upload, view_of, wrap, wrap_layout, write)

aten = torch.ops.aten

_HANDLERS: dict = {}
"""``id(op overload)`` -> its handler. By id: an ``OpOverload`` hashes in
Python, a cost every op paid twice (here and in the meta key). The ops are
kept alive in :data:`_OPS`, so an id is never another op's."""
_OPS: list = []
_handler_of = _HANDLERS.get  # per op (forget() empties the dict, keeping it)


def run(func, args, kwargs):
    handler = _handler_of(id(func))
    if handler is None:
        handler = resolve(func)
        _OPS.append(func)
        _HANDLERS[id(func)] = handler
    return handler(func, args, kwargs)


route_ops(run)  # the tensor class calls ``run`` directly from now on


def forget(op=None) -> None:
    """Drop cached handler choices and recorded lowerings (after the lowering
    registry changed for ``op``; None: for any op). Only when a choice made so
    far looked ``op`` up: a lowering for an op no call has reached (dynamo's
    ``prims.fma``, registered at the torch.compile backend's first graph)
    leaves the recordings a loop replays, whose remaking made its captured
    pieces' traced calls differ (issue 41)."""
    if op is not None and not _looked_up(op):
        return
    _HANDLERS.clear()
    _META.clear()
    _OPS.clear()


def _looked_up(op) -> bool:
    """Whether :func:`resolve` asked for ``op``'s lowering (an overload's, or
    any of a packet's) for an op called so far: the op itself, or an in-place
    form of it (run by the functional op's lowering). By name, so at worst a
    choice that never asked is dropped too."""
    name = getattr(op, "_qualified_op_name", None) or getattr(getattr(op, "_schema", None), "name", None)
    if name is None:
        return True
    for f in _OPS:
        called = getattr(getattr(f, "_schema", None), "name", None)
        if called is None or called == name or called == name + "_":
            return True
    return False


lowering.when_changed(forget)  # a lowering registered or removed: choices and recordings made without it go


# Composite ops that eager's CPU computes with its own kernel (not the composite's
# pieces): their lowerings are that kernel's roundings (nn.py's silu_backward).
_KERNEL_LOWERED = frozenset({torch.ops.aten.silu_backward.default, torch.ops.aten.mish_backward.default})


def resolve(func):
    if func in special.SPECIAL:
        return special.SPECIAL[func]
    schema = func._schema
    own = _OWN_KERNELS.get(func)
    if own is not None:
        return own
    if (torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), "CompositeImplicitAutograd")
            and func not in _KERNEL_LOWERED):
        return _composite  # reached below autograd (inside a decomposition): its own pieces come here
    if _is_view(schema) or func in _UNSAFE_VIEWS:
        return _identity_view if func in _IDENTITY_VIEWS else _view
    fn = lowering.lookup(func)
    if fn is not None:
        # an op with no tensor argument (a factory) may be sized by its floats' values (arange(15.0))
        return _lowered(fn, _mutated_self(schema), sized_by_floats=not _takes_tensors(schema), draws=_draws(func, fn))
    functional = _functional_of(func)
    if functional is not None:
        if functional[0] == "inplace" and _is_view(functional[1]._schema):
            return _inplace_view(functional[1])
        return _via_functional(functional)
    own = vision_ops.handler(func)
    if own is not None:  # (an op whose result's shape is its values': no meta call, no recording)
        return own
    decomp = (multilabel_margin.decomposition(func) or real_code_ops.decomposition(func)
              or upsample_linear.decomposition(func) or resize_uint8.decomposition(func)
              or norm_kernel.decomposition(func) or decomposition_table.get(func) or vision_ops.decomposition(func))
    if decomp is not None:
        if func in batch_norm_stats.TRAINING:
            decomp = batch_norm_stats.decomposition(func, decomp)
        return _decomposed(decomp, recordable=not schema.is_mutable)
    if foreach.is_foreach(func):
        return _decomposed(foreach.per_element(func))
    return fallback.run


# Splits whose parts share their input's memory, as eager's do, though their
# schema says nothing of it (autograd does not track them as views: ``unsafe``):
# RNN.cpp's cells add into the chunks of a gate's product, and a user's
# ``a.unsafe_chunk(2)[0].zero_()`` writes ``a``. Copies, they wrote nothing back.
_UNSAFE_VIEWS = frozenset((aten.unsafe_split.Tensor, aten.unsafe_split_with_sizes.default))


# --- schema questions -------------------------------------------------------------------


def _is_view(schema) -> bool:
    rets = schema.returns
    if not rets:
        return False
    info = rets[0].alias_info
    return info is not None and not info.is_write and not schema.is_mutable


def _draws(func, fn=None) -> bool:
    """The op draws from the RNG: its lowering reads and advances the device's
    generator state (a handle of no argument), which a recording cannot replay.
    A lowering of a seeded op that never draws says so with ``fn.draws = False``
    (eager's flash attention, taken only without dropout)."""
    return torch.Tag.nondeterministic_seeded in func.tags and getattr(fn, "draws", True)


def _takes_tensors(schema) -> bool:
    return any("Tensor" in str(a.type) for a in schema.arguments)


def _mutated_self(schema) -> bool:
    args = schema.arguments
    return bool(args) and args[0].alias_info is not None and args[0].alias_info.is_write


def _out_args(schema) -> list[str]:
    return [a.name for a in schema.arguments if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write]


def _functional_of(func):
    """The functional overload an in-place (``add_``) or ``out=`` op stands for."""
    schema = func._schema
    name = func.overloadpacket.__name__
    if _mutated_self(schema) and name.endswith("_") and not name.startswith("_"):
        packet = getattr(aten, name[:-1], None)
        if packet is None:
            return None
        # the overload of the same name first; names do not decide (transpose_.default
        # is transpose.int, and pow_.Scalar is pow.Tensor_Scalar: pow.Scalar's base is
        # the number), the arguments do
        want = [(a.name, str(a.type)) for a in schema.arguments]
        names = packet.overloads()
        if func._overloadname in names:
            names = [func._overloadname] + names
        for ov in names:
            cand = getattr(packet, ov)
            if not cand._schema.is_mutable and [(a.name, str(a.type)) for a in cand._schema.arguments] == want:
                return ("inplace", cand)
        return None
    outs = _out_args(schema)
    if outs and len(outs) == len(schema.returns):
        want = [a.name for a in schema.arguments if a.name not in outs]
        packet = func.overloadpacket
        for ov in packet.overloads():
            cand = getattr(packet, ov)
            s = cand._schema
            if cand is not func and not s.is_mutable and [a.name for a in s.arguments] == want:
                return ("out", cand, outs)
    return None


# --- arguments on the meta device --------------------------------------------------------


class _Args:
    """One pass over the arguments: their meta copies and the lazy device."""

    __slots__ = ("device", "cpu_tensor", "host_index", "sparse")

    def __init__(self):
        self.device = None
        self.cpu_tensor = None
        self.host_index = None
        self.sparse = False
        """A host tensor in a sparse layout is among them: the lazy device has
        none, so the call runs as a counted fallback (a sparse tensor moved to
        the device arrives densified, :func:`~lazycore.frontends.torch.dtypes.densified`)."""

    def meta(self, x):
        if isinstance(x, torch.Tensor):
            if isinstance(x, Tensor):
                dev = x.device
                if self.device is None:
                    self.device = dev
                elif dev != self.device:
                    raise RuntimeError(
                        f"Expected all tensors to be on the same device, but found at least two devices, "
                        f"{self.device} and {dev}!"
                    )
            elif x.dim() != 0 or x.device.type != "cpu":
                if x.device.type == "cpu" and x.dtype in _INDEX_DTYPES:
                    self.host_index = x
                else:
                    self.cpu_tensor = x
                if x.layout is not torch.strided:
                    self.sparse = True
                    return x
            return meta_twin(x)
        if isinstance(x, (list, tuple)):
            return type(x)(self.meta(v) for v in x)
        if isinstance(x, torch.device) and x.type == "lazy":
            if self.device is None:
                self.device = x
            return torch.device("meta")
        return x


# As on CUDA, index tensors may stay on the host; they are uploaded.
_INDEX_DTYPES = {torch.int64, torch.int32, torch.bool, torch.uint8}
_HOST_INDICES_OK = {aten.index.Tensor, aten.index_put.default, aten.index_put_.default, aten._index_put_impl_.default}


def metas(args, kwargs, func=None):
    a = _Args()
    margs = tuple(a.meta(x) for x in args)
    mkwargs = {k: a.meta(v) for k, v in kwargs.items()}
    if a.host_index is not None and a.cpu_tensor is None and func not in _HOST_INDICES_OK:
        a.cpu_tensor = a.host_index
    if a.cpu_tensor is not None and a.device is not None and not a.sparse:
        raise RuntimeError(
            f"Expected all tensors to be on the same device, but found at least two devices, "
            f"{a.device} and {a.cpu_tensor.device}!"
        )
    return a, margs, mkwargs


def _lazy(x, lc_dev, handles, start=None):
    """An argument as lowerings take it: lazy tensors as lazycore handles
    (each also appended to ``handles``, the lowering's inputs in order).
    ``start``: the frame that called into torch (``ENTRY.frame``), where a
    view read's search for the user's line starts (a read without it walked
    every frame from inside lazycore up: ~6 us of a ``cat`` of two views)."""
    if isinstance(x, torch.Tensor):
        if isinstance(x, Tensor):
            h = read_view(x._storage, x._steps, start) if x._steps else x._storage.handle
        else:
            h = upload(x, lc_dev)  # a 0-dim CPU tensor, as torch allows
        handles.append(h)
        return h
    if isinstance(x, (list, tuple)):
        return type(x)(_lazy(v, lc_dev, handles, start) for v in x)
    return x


# --- eager's meta result, cached by argument signature ---------------------------------------
# Running an op on meta tensors costs 5 us to several ms (many meta kernels
# are Python refs). The result depends only on the tensors' metadata, on the
# types of top-level Python numbers and on the values of everything else
# (dims, sizes, lists), so a step that repeats finds every result here.

_META = Memo("torch.meta", 100_000)
_meta_of = _META.get  # per op (see lazycore.ir.memo: a memo is emptied in place)
_default_dtype = torch.get_default_dtype
_NO_META = object()


def _sig(x, acc: list, nested: bool) -> bool:
    """Append ``x``'s part of the signature to ``acc``; True if ``x`` holds a tensor."""
    t = type(x)
    if t is Tensor:
        acc.append(x._key)
        return True
    if t is float:
        acc.append(x if nested else float)
    elif t is int or t is bool:
        acc.append((t, x))
    elif t is list or t is tuple:
        acc.append(len(x))
        held = False
        for v in x:
            if type(v) is int:  # (a size or a dim, inline: views and reductions take lists of them)
                acc.append((int, v))
            else:
                held = _sig(v, acc, True) or held
        acc.append(")")
        return held
    elif isinstance(x, torch.Tensor):
        acc.append(("host", x.shape, x.stride(), x.dtype, x.device))
        return True
    else:
        acc.append(x)
    return False


def _signature(func, args, kwargs):
    """One pass over a call's arguments: ``(meta key, top-level lazy tensors,
    top-level float arguments (positional, then keywords), keyword names of
    those floats, plain)``. ``plain``: the lazy tensors listed are all the
    tensors there are (none in a list, no host tensor)."""
    # the op by id (see _HANDLERS; an entry keeps its op alive);
    # int tensor * float follows the default dtype; a recorded lowering holds
    # index checks or not (settings.index_checks), and the forms a symbolic export takes (TRACE.symbolic)
    acc = [id(func), _default_dtype(), settings.index_checks, TRACE.symbolic]
    tensors, floats, named = [], [], None
    plain = True
    for x in args:
        t = type(x)
        if t is Tensor:  # the common cases inline: this runs for every op
            acc.append(x._key)
            tensors.append(x)
        elif t is float:
            acc.append(float)
            floats.append(x)
        elif _sig(x, acc, False):
            plain = False
    if kwargs:  # (most ops have none: no items view to make)
        for k, v in kwargs.items():
            acc.append(k)
            t = type(v)
            if t is Tensor:
                acc.append(v._key)
                tensors.append(v)
            elif t is float:
                acc.append(float)
                floats.append(v)
                named = (named or ()) + (k,)
            elif _sig(v, acc, False):
                plain = False
    return acc, tensors, floats, named, plain


def meta_call(func, args, kwargs):
    """``(meta result, meta args, meta kwargs, torch device, memo, op)``; raises
    eager's error for bad arguments. The result is None when no meta kernel
    exists. ``memo`` is what handlers keep for this signature: a lowering's
    recordings by the values of the top-level Python floats
    (:mod:`lazycore.recipes`), a view's steps and layouts under ``"view"``. ``op`` is
    ``func``, kept alive by the entry (the key holds its id)."""
    acc = _signature(func, args, kwargs)[0]
    try:  # (_meta_entry's lookup, inline: every view and in-place op asks)
        hit = _meta_of(tuple(acc))
    except TypeError:
        hit = None
    return hit if hit is not None else _meta_entry(acc, func, args, kwargs)


def _meta_entry(acc, func, args, kwargs):
    """:func:`meta_call` for the signature ``acc`` (a list or a tuple) of this call."""
    try:
        key = tuple(acc)
        hit = _META.get(key)
    except TypeError:  # an unhashable argument: no caching
        key, hit = None, None
    if hit is None:
        a, margs, mkwargs = metas(args, kwargs, func)
        if a.sparse:  # (not kept: the signature holds a host tensor's shape, not its layout)
            return (None, margs, mkwargs, a.device, {}, func)
        chalf_kernels.refuse(func, margs, mkwargs)  # eager's CPU refuses chalf in most kernels: its error
        # another process's result (meta_store); a view's aliases its base, which a stored one cannot
        # (the store keys by the layouts' values: text another process makes alike)
        stored, out = (STORE.get(func, [tuple(p) if type(p) is LayoutKey else p for p in acc], margs)
                       if key is not None and not _is_view(func._schema) else (None, MISS))
        if out is MISS:
            try:
                out = _run_meta(func, margs, mkwargs)
            except Exception:
                if _probed(func):  # the meta kernel's error may not be eager's (an IndexError for a 0-d cat)
                    _check_eager_kernel(func, margs, mkwargs, cut=False)  # (the shapes are what failed)
                if func in _INDEX_PROBED:  # (a meta index is a RuntimeError where eager's is an IndexError)
                    _probe_indexing(func, margs, mkwargs)
                raise
            _check_eager_kernel(func, margs, mkwargs, cut=out is not None)  # (no meta kernel: no shape checked)
            if out is not None:
                STORE.add(stored, func, out, margs)
        if out is not None and func in batch_norm_stats.TRAINING:  # (a stored result may predate the change)
            out = batch_norm_stats.as_eager(func, margs, mkwargs, out)
        # (the recordings another process made for this signature: recipe_store)
        hit = (out, margs, mkwargs, a.device, RECORDINGS.memo(stored, a.device) if out is not None else {}, func)
        if key is not None:
            _META.put(key, hit)
    return hit


def _run_meta(func, margs, mkwargs):
    try:
        if func is aten.lerp_.Tensor:
            return _lerp_in_place(margs, mkwargs)
        if func is aten.arange.start_step:
            return factories.arange_meta(margs, mkwargs)
        return func(*margs, **mkwargs)
    except NotImplementedError:
        return None


def _lerp_in_place(margs, mkwargs):
    """torch's meta ``lerp_`` (torch/_meta_registrations.py) builds the weight's
    ``repr``, which reads the process-wide forward-AD level: while any thread is
    in ``jacfwd``/``jvp``, that fails below autograd with an internal assert, and
    Adam's ``exp_avg.lerp_(grad, weight)`` with it. The out-of-place meta kernel
    checks the same operands; an in-place result keeps ``self``'s shape."""
    out = aten.lerp.Tensor(*margs, **mkwargs)
    if out.shape != margs[0].shape:
        raise RuntimeError(f"output with shape {list(margs[0].shape)} doesn't match the broadcast shape "
                           f"{list(out.shape)}")
    return margs[0]


# Which dtypes an op takes is eager's kernels' to say, and meta kernels do not
# know (a meta mm takes int @ float, a meta sub takes bools, a meta mul_ writes
# a float into an int tensor). So once per signature, for pointwise ops,
# reductions, matrix products and cat, eager's CPU kernel runs on stand-ins of
# the arguments (ones, of their dtypes: no value of theirs can fail these ops)
# and its error is eager's answer at the call. Elsewhere the stand-ins' values
# could fail where the user's would not (indices), so only uint16/32/64 and
# the float8 types, which eager's CPU kernels take in a few ops only, are
# probed, and only a missing kernel (NotImplementedError) counts.
# The stand-ins first have every dimension cut to at most 1 (the same rank,
# so the same type promotion; empty stays empty; not a variance's) when the
# meta kernel already passed the real shapes (when it failed, full-size ones
# give eager's message), and full-size stand-ins made the probes a third of
# a GPT step's first trace (a bmm of 64 heads, AdamW's moments). Only when
# those fail do full-size ones decide, since an argument tied to the sizes
# (a topk's k) can fail the cut ones alone.
_KERNEL_GAPS = {torch.uint16, torch.uint32, torch.uint64,
                # float8: eager's CPU kernels take it in few ops (mul, mm, abs, eq, cat, copies, ...)
                torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz}
_PROBED_TAGS = (torch.Tag.pointwise, torch.Tag.reduction)
_PROBED_OPS = {aten.mm.default, aten.bmm.default, aten.mv.default, aten.dot.default, aten.addmm.default,
               aten.addmv.default, aten.baddbmm.default, aten.cat.default, aten.floor_divide.default,
               aten.floor_divide.Scalar, aten.floor_divide_.Tensor, aten.floor_divide_.Scalar,
               aten._softmax.default, aten._log_softmax.default}
_STAND_IN_LIMIT = 1 << 16
"""Elements a full-size stand-in holds at most; a larger one read-only repeats one element."""


_FLOAT8 = {torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz}


def _stand_in(x, cut: bool, written=False):
    if isinstance(x, torch.Tensor):
        if cut:  # (float8: at most 2, since some kernels take one element of any type, a flip's)
            return torch.ones([min(d, 2 if x.dtype in _FLOAT8 else 1) for d in x.shape], dtype=x.dtype)
        if written or x.numel() <= _STAND_IN_LIMIT:
            return torch.ones(x.shape, dtype=x.dtype)
        return torch.ones(1, dtype=x.dtype).expand(x.shape)
    if isinstance(x, (list, tuple)):
        return type(x)(_stand_in(v, cut) for v in x)
    if isinstance(x, torch.device) and x.type == "meta":
        return torch.device("cpu")
    return x


def _holds_gap_dtype(x) -> bool:
    if isinstance(x, torch.Tensor):
        return x.dtype in _KERNEL_GAPS
    if isinstance(x, (list, tuple)):
        return any(_holds_gap_dtype(v) for v in x)
    return False


def _probed(func) -> bool:
    return func in _PROBED_OPS or any(tag in func.tags for tag in _PROBED_TAGS)


# Indexing ops: eager's checks of the index's dtype and of the flags (meta
# kernels skip some: index_select and index_put_ take float indices) run as
# eager's CPU kernel on stand-ins holding zeros (an index valid in any dim that
# is not empty; in one that is, eager's error is the user's too), cut to at
# most 1 per dimension as above, then full size if those fail. Not for
# boolean masks (the number of elements they select is the values').
_INDEX_PROBED = set()
for _name in ("index_select", "index", "index_put", "index_put_", "_index_put_impl_", "gather", "scatter",
              "scatter_", "scatter_add", "scatter_add_", "scatter_reduce", "scatter_reduce_", "index_add",
              "index_add_", "index_copy", "index_copy_", "index_fill", "index_fill_", "index_reduce",
              "index_reduce_", "take", "put", "put_", "embedding", "nll_loss_forward", "nll_loss2d_forward"):
    _packet = getattr(aten, _name)
    _INDEX_PROBED.update(getattr(_packet, _ov) for _ov in _packet.overloads())
_MASKS = (torch.bool, torch.uint8)


def _holds_mask(x) -> bool:
    if isinstance(x, torch.Tensor):
        return x.dtype in _MASKS
    if isinstance(x, (list, tuple)):
        return any(_holds_mask(v) for v in x)
    return False


_TOO_LARGE = object()


def _zeros_in(x, cut: bool):
    if isinstance(x, torch.Tensor):
        if cut:
            return torch.zeros([min(d, 1) for d in x.shape], dtype=x.dtype)
        return torch.zeros(x.shape, dtype=x.dtype) if x.numel() <= 1 << 24 else _TOO_LARGE
    if isinstance(x, (list, tuple)):
        parts = type(x)(_zeros_in(v, cut) for v in x)
        return _TOO_LARGE if any(v is _TOO_LARGE for v in parts) else parts
    if isinstance(x, torch.device) and x.type == "meta":
        return torch.device("cpu")
    return x


def _probe_indexing(func, margs, mkwargs):
    if any(_holds_mask(x) for x in margs) or any(_holds_mask(v) for v in mkwargs.values()):
        return
    for cut in (True, False):
        args = [_zeros_in(x, cut) for x in margs]
        kwargs = {k: _zeros_in(v, cut) for k, v in mkwargs.items()}
        if any(a is _TOO_LARGE for a in args) or any(v is _TOO_LARGE for v in kwargs.values()):
            return  # too large to stand in for at full size: the meta kernel's word stands
        try:
            func(*args, **kwargs)
            return
        except Exception:
            if not cut:
                raise


def _check_eager_kernel(func, margs, mkwargs, cut=True):
    if func in _INDEX_PROBED:
        _probe_indexing(func, margs, mkwargs)
        return
    probed = _probed(func)
    if not (probed or any(_holds_gap_dtype(x) for x in margs)
            or any(_holds_gap_dtype(v) for v in mkwargs.values())):
        return
    if torch.Tag.nondeterministic_seeded in func.tags:
        return  # a draw would move the user's generator
    schema = func._schema.arguments
    written = [i < len(schema) and schema[i].alias_info is not None and schema[i].alias_info.is_write
               for i in range(len(margs))]

    def probe(cut: bool):
        func(*[_stand_in(x, cut, w) for x, w in zip(margs, written)],
             **{k: _stand_in(v, cut, k == "out") for k, v in mkwargs.items()})

    try:
        # (a variance or standard deviation of one element warns, and torch
        # gives the user a warning of an op's inner kernels: full size for those)
        cut = cut and not any(a.name == "correction" for a in schema)
        try:
            probe(cut)
        except Exception:
            if not cut:
                raise
            probe(False)
    except NotImplementedError:
        raise
    except Exception:
        if probed:
            raise
        # (the stand-ins' values are not the user's: only a missing kernel counts)


# --- handlers ------------------------------------------------------------------------------


def _own_kernel(kernel):
    """A handler running ``kernel``, the lazy device's own kernel of an op
    registered above autograd, for the op reached below it: under
    ``torch.inference_mode`` autograd's keys are skipped (the recurrent
    layers' loops, packing: the composite would unroll every step)."""

    def run(func, args, kwargs):
        try:
            return kernel(*args, **kwargs)
        finally:
            release_frame(ENTRY.frame)  # (as a decomposition's)

    return run


_OWN_KERNELS = {op: _own_kernel(k) for op, k in (*recurrent.KERNELS.items(), *packed.KERNELS.items())}


def _composite(func, args, kwargs):
    try:
        out = func.decompose(*args, **kwargs)
        if out is NotImplemented:
            return fallback.run(func, args, kwargs)
        return out
    finally:
        release_frame(ENTRY.frame)  # (as a decomposition's)


# view ops whose result has another element type than their input
_DTYPE_VIEWS = (aten.view.dtype, aten.view_as_real.default, aten.view_as_complex.default)


def _view(func, args, kwargs):
    entry = meta_call(func, args, kwargs)
    out, memo = entry[0], entry[4]
    base = args[0]
    made = memo.get("view")
    if made is None:
        if out is None:
            raise NotImplementedError(f"lazycore: no meta kernel for view op {func}")
        outs = out if isinstance(out, (list, tuple)) else (out,)
        if func not in _DTYPE_VIEWS and any(o.dtype != base.dtype for o in outs):
            raise NotImplementedError(
                f"lazycore: {func} reinterprets the element type; only same-size view(dtype) is supported"
            )
        steps = views.view_steps(func, base, out, args[1:], kwargs)
        # (the signature holds base's device: the keys on it are the views' keys at every call)
        if isinstance(out, (list, tuple)):
            layout = [meta_layout(o) for o in out]
            key = [layout_key(*lay, base.device) for lay in layout]
        else:
            layout = meta_layout(out)
            key = layout_key(*layout, base.device)
        made = memo["view"] = (steps, layout, key)
    steps = views.on_base(base, out, made[0])
    if isinstance(out, (list, tuple)):
        return type(out)(view_of(base, s, lay, k) for s, lay, k in zip(steps, made[1], made[2]))
    return view_of(base, steps, made[1], made[2])


# Views whose result is their argument's layout over its storage, with its
# steps: autograd's ``detach`` of every saved tensor and gradient (about 40 of
# a tiny GPT-2 step's 360 ops), ``alias``, ``lift_fresh``. Nothing of the call
# needs eager's meta kernel (one tensor, no other argument: nothing to check,
# and the layout is the argument's), so the result is made from its key
# directly, without the signature, the meta lookup and the view steps.
_IDENTITY_VIEWS = frozenset((aten.detach.default, aten.alias.default, aten.lift_fresh.default))


def _identity_view(func, args, kwargs):
    base = args[0] if len(args) == 1 and not kwargs else None
    if type(base) is not Tensor or base._storage is None:
        return _view(func, args, kwargs)  # (its checks and errors: a released storage's)
    key = base._key
    return _new(base._storage, base._steps, key[0], key[1], key[2], key[3], key[4], key)


def wrap_results(out, res, owned: bool = False):
    """Lazy tensors for the (checked) handles of a lowering's results;
    ``owned``: the handles were made for these results alone."""
    if isinstance(out, torch.Tensor):
        return wrap(res, out, owned=owned)
    if isinstance(out, (list, tuple)):
        return type(out)(None if o is None else wrap_results(o, r, owned) for o, r in zip(out, res))
    return None


def _check(func, meta, h):
    if h is None or tuple(h.shape) != tuple(meta.shape) or h.dtype != _lazy_dtype(meta.dtype):
        got = "nothing" if h is None else f"{h.type}"
        raise RuntimeError(
            f"lazycore: the lowering of {func} made {got}, eager makes {list(meta.shape)} {meta.dtype}"
        )


def _check_results(func, out, res):
    """A lowering's handles against eager's meta result: same structure, shapes, dtypes."""
    if isinstance(out, torch.Tensor):
        _check(func, out, res)
    elif isinstance(out, (list, tuple)):
        if not isinstance(res, (list, tuple)) or len(res) != len(out):
            n = len(res) if isinstance(res, (list, tuple)) else 1
            raise RuntimeError(f"lazycore: lowering of {func} returned {n} results, eager returns {len(out)}")
        for o, r in zip(out, res):
            if o is not None:
                _check_results(func, o, r)
    elif out is not None:
        raise RuntimeError(f"lazycore: lowering of {func}: unexpected result kind {type(out).__name__}")


_RECIPE_LIMIT = 64
"""Recordings kept per signature (one per set of float values seen)."""


def _float_keys(floats, named) -> tuple:
    """The key of the top-level float arguments' values (see :func:`_signature`):
    the meta key has their types only; a recording may depend on the values."""
    if named is None:
        return tuple([float_key(x) for x in floats])
    n = len(floats) - len(named)
    return tuple([float_key(x) for x in floats[:n]]) + tuple(
        [(k, float_key(x)) for k, x in zip(named, floats[n:])])


def _lower(fn, func, args, kwargs, sized_by_floats=False, wrapped=False, draws=False):
    """Run lowering ``fn`` of ``func``, or replay its recording for this call
    signature: ``(meta result, handles, layout, owned)``, or None when the call
    goes to the fallback. ``layout`` is what :func:`wrap_layout` takes for a
    single tensor result (else None); ``owned``: the handles are new.
    ``sized_by_floats``: the result's shape may depend on the values of
    top-level floats (``arange(15.0)``), which the meta key then holds too.
    ``wrapped``: a replay's single tensor result comes back as the lazy tensor
    :func:`wrap_layout` makes of it (the per-op path, with no tuple between).
    ``draws``: the op draws from the RNG (:func:`_draws`), so its lowering
    runs without a recording: one would be refused at every call, and
    watching for that cost a ``rand_like`` ~60 us of its ~160 (a GPT-2
    training step's dropouts, each call)."""
    sig = None
    if not kwargs and args and type(args[0]) is Tensor and not sized_by_floats:
        # a tensor alone, or with a tensor or a float (most ops of a step):
        # _signature's key made inline, without its call and lists (~0.15 us)
        n = len(args)
        if n == 1:
            sig = (id(func), _default_dtype(), settings.index_checks, TRACE.symbolic, args[0]._key)
            tensors, floats = args, ()
        elif n == 2:
            y = args[1]
            if type(y) is Tensor:
                sig = (id(func), _default_dtype(), settings.index_checks, TRACE.symbolic, args[0]._key, y._key)
                tensors, floats = args, ()
            elif type(y) is float:
                sig = (id(func), _default_dtype(), settings.index_checks, TRACE.symbolic, args[0]._key, float)
                tensors, floats = args[:1], args[1:]
        named, plain = None, True
    if sig is None:
        if kwargs and kwargs.get("generator") is not None:
            return None  # the user's CPU generator decides the values
        acc, tensors, floats, named, plain = _signature(func, args, kwargs)
        if sized_by_floats and floats:
            acc += [float_key(x) for x in floats]
        sig = tuple(acc)
    try:  # (_meta_entry's lookup, inline: the per-op path)
        entry = _meta_of(sig)
    except TypeError:
        entry = None
    if entry is None:
        entry = _meta_entry(sig, func, args, kwargs)
    out = entry[0]
    if out is None:
        return None
    memo = entry[4]
    if not floats:
        fl = ()
    elif named is None and len(floats) == 1:  # (x * 0.9: _float_keys's one-float case, inline)
        fl = (float_key(floats[0]),)
    else:
        fl = _float_keys(floats, named)
    vclass = None
    found = None
    if settings.replay:
        # a recording for these very values first: a value once recorded as such stays on it
        found = memo.get(fl)
        if found is None and floats:
            vclass = value_class(floats)
            if vclass is not None:
                found = memo.get(vclass)
                if found is not None and len(memo) < _RECIPE_LIMIT:
                    memo[fl] = found  # the same recording, found at once for a value that repeats
        if found is not None and plain:  # the replay needs the handles only
            start = ENTRY.frame
            recipe = found[0]
            inputs = []  # (a loop: a comprehension is a function call of its own)
            viewed = False
            for x in tensors:
                if x._steps:
                    viewed = True
                inputs.append(x._storage.handle)
            if viewed:
                if not floats and recipe.aliased is None and TRACE.recorder is None:
                    res = _with_views(recipe, memo, tensors, inputs, start)
                else:
                    res = None
                if res is None:
                    for i, x in enumerate(tensors):
                        if x._steps:
                            inputs[i] = read_view(x._storage, x._steps, start)
                else:
                    layout = found[1]
                    if wrapped and layout is not None:
                        shape, strides, dtype, tdev, key = layout
                        return wrap_layout(res, shape, strides, dtype, tdev, key)
                    return out, res, layout, True
            if recipe.aliased is None or recipe.fits(inputs):
                # (fl is the recipe's key of the floats' values when none is a keyword)
                res = recipe.replay(inputs, floats, start, fl if named is None else None)
                layout = found[1]
                if wrapped and layout is not None:
                    shape, strides, dtype, tdev, key = layout
                    return wrap_layout(res, shape, strides, dtype, tdev, key)
                return out, res, layout, True
    _, margs, mkwargs, tdev, _, _ = entry
    dev = lc_device(tdev) if tdev is not None else None
    inputs = []
    start = ENTRY.frame  # (the replays' and reads' user line found from here, as the fast path's)
    largs = [_lazy(x, dev, inputs, start) for x in args]
    lkwargs = {k: _lazy(v, dev, inputs, start) for k, v in kwargs.items()} if kwargs else kwargs
    if found is not None and found[0].fits(inputs):
        return out, found[0].replay(inputs, floats, start), found[1], True
    alias = None
    if found is not None:
        # the recording for these values is for another aliasing of the inputs (one
        # handle twice): the one for their value class may fit, else the one made for
        # this aliasing, kept beside the other (under ALIASED). Recording again in the
        # other's place would change which recording (with its own nodes of the float
        # parameters) serves a call after warm-up: a recompile (issue 39); and another
        # process, loading the key's last recording alone (recipe_store), served both
        # calls with it: another graph than the recording process's
        if floats:
            if vclass is None:
                vclass = value_class(floats)
            other = memo.get(vclass) if vclass is not None else None
            if other is not None and other[0].fits(inputs):
                return out, other[0].replay(inputs, floats, start), other[1], True
        alias = alias_pattern(inputs)
        other = memo.get((ALIASED, fl, alias))
        if other is None and vclass is not None:
            other = memo.get((ALIASED, vclass, alias))
        if other is not None:  # (made for this aliasing: it fits)
            return out, other[0].replay(inputs, floats, start), other[1], True
    ctx = lowering.Ctx(func, out, margs, mkwargs, dev)
    if settings.replay and not draws:
        res, recipe = record_call(fn, inputs, (ctx, *largs), lkwargs)
    else:
        res, recipe = fn(ctx, *largs, **lkwargs), None
    if res is NotImplemented:
        return None
    _check_results(func, out, res)
    layout = _layout(out, res)
    if recipe is not None and len(memo) < _RECIPE_LIMIT:
        # stored once the results passed the checks
        mkey = vclass if recipe.parametric and vclass is not None else fl
        if alias is not None:
            mkey = (ALIASED, mkey, alias)
        memo[mkey] = (recipe, layout)
        if type(memo) is StoredMemo:
            RECORDINGS.add(memo, mkey, recipe, layout, dev)
    return out, res, layout, False


# An op whose argument is a view (a linear layer's ``w.t()``, attention's
# heads reshaped) reads the view's value from its storage first: a recorded
# read of its own, replayed at every call (~2 us, as much as the op's own
# replay). Such a call replays one recording instead, of the reads and the
# op together, over the storages' handles, per the op's signature and each
# view's steps and storage (the steps are the objects the view's signature
# made once, so a loop's views are the same objects every step). It is
# recorded at the signature's second call with these views, from the reads
# and the op's own replay (so it makes the nodes the two replays make),
# but never for a view picked by a number (``grads[i]``, a ``select``): its
# read asks the scalar policy whether the number is baked or a parameter
# (views.Slice.picked), which answers by what the place has seen so far, so a
# read recorded later inside this recording could make other nodes (a
# dynamic_slice of a parameter) than the separate read recorded earlier (a
# static slice): a scanned stack's update compiled again at its second step.
_VIEWS = "views"


def _policy_read(tensors) -> bool:
    """Whether a view among ``tensors`` has a step whose nodes depend on more
    than its fields (a :class:`Slice` picked by a number)."""
    for x in tensors:
        for step in x._steps:
            if type(step) is Slice and step.picked:
                return True
    return False


def _with_views(recipe, memo, tensors, storages, start, kind=_VIEWS):
    """The handles ``recipe`` (the op's recording, over the views' values)
    makes for ``tensors``, some of them views, replayed together with the
    views' reads from ``storages`` (their storages' handles); None where no
    such recording serves the call (the caller reads the views then).
    ``kind``: the key part that tells ``recipe`` apart in ``memo`` (a
    decomposition's recording, per its floats' values)."""
    key = [kind]
    for x in tensors:
        steps = x._steps
        key.append((steps, storage_key(x._storage)) if steps else None)
    key = tuple(key)
    got = memo.get(key)
    if got is not None:
        if got is _NOT_RECORDED or not got.fits(storages):
            return None
        return got.replay(storages, (), start, ())
    if len(memo) >= _RECIPE_LIMIT:
        return None
    if _policy_read(tensors):
        memo[key] = _NOT_RECORDED
        return None
    cutter = TRACE.cutter  # (the reads' own check, which a recording skips: a step ended before they read)
    if cutter.due or len(LOG.nodes) >= settings.auto_barrier_nodes:
        cutter.cut(storages)

    def reads_and_op():
        views = [read_view(x._storage, x._steps, start) if x._steps else h for x, h in zip(tensors, storages)]
        return recipe.replay(views, (), start, ())

    res, combined = record(reads_and_op, storages)
    memo[key] = _NOT_RECORDED if combined is None else combined
    return res


def factory(func, args, kwargs, frame):
    """A factory routed to the ``Lazy`` key by its ``device`` argument
    (``torch.zeros(..., device=lazy)``; the ``ones`` and scalars inside
    attention's math), called from ``frame``: dispatched as an op reaching
    the tensor class is (:func:`run`), so its meta result is cached and its
    lowering recorded per call signature, and a replay shares the recorded
    constants instead of making them again (a factory took 150-430 us, ten
    ops' worth, most of an attention call)."""
    entry = ENTRY
    outer, entry.frame = entry.frame, frame
    try:
        return run(func, args, kwargs)
    finally:
        entry.frame = outer


def _lowered(fn, inplace: bool, sized_by_floats: bool = False, draws: bool = False):
    def handler(func, args, kwargs):
        got = _lower(fn, func, args, kwargs, sized_by_floats, not inplace, draws)
        if got is None:
            return fallback.run(func, args, kwargs)
        if type(got) is Tensor:  # a replay's result, made into a tensor already
            return got
        out, res, layout, owned = got
        if inplace:
            return write(args[0], res, _overlap_ok(func, args, kwargs, args[0]))
        if owned and layout is not None:
            return wrap_layout(res, *layout)
        return wrap_results(out, res, owned)

    return handler


def _layout(out, res):
    """What :func:`wrap` makes of a single tensor result, for replays to reuse
    (:func:`wrap_layout`'s arguments, its key last)."""
    if not isinstance(out, torch.Tensor):
        return None
    # (eager's dtype: a complex<f32> handle is a complex64 or a chalf result)
    shape, strides, dtype, tdev = tuple(res.shape), tuple(out.stride()), out.dtype, torch_device(res.device)
    return shape, strides, dtype, tdev, layout_key(shape, strides, 0, dtype, tdev)


def _via_functional(found):
    kind, functional = found[0], found[1]
    fn = lowering.lookup(functional) if kind == "inplace" else None
    # an op with a dtype= argument (sum, prod, mean, cumsum, ...) takes the one
    # out tensor's dtype as it when none is given; the meta call refuses the
    # pairs eager refuses (log_softmax into another dtype)
    computes_in_out_dtype = kind == "out" and len(found[2]) == 1 and any(
        a.name == "dtype" and a.kwarg_only for a in functional._schema.arguments)

    def handler(func, args, kwargs):
        meta_call(func, args, kwargs)  # eager's checks (casting, broadcasting into self)
        if kind == "inplace":
            target = args[0]
            got = _lower(fn, functional, args, kwargs) if fn is not None and isinstance(target, Tensor) else None
            ok = _overlap_ok(func, args, kwargs, target)
            layout = got[2] if got is not None else None  # (a single tensor result's: its shape and dtype)
            if layout is not None and layout[0] == target.shape:
                # the functional result's handle goes straight into the tensor (converted
                # where its dtype is not the tensor's: the layout's is eager's dtype of it)
                dtype = target.dtype
                return write(target, got[1] if layout[2] is dtype else _convert(got[1], _lazy_dtype(dtype)), ok)
            result = run(functional, args, kwargs)
            return _store(target, result, ok)
        outs = found[2]
        fkwargs = {k: v for k, v in kwargs.items() if k not in outs}
        if computes_in_out_dtype and fkwargs.get("dtype") is None:
            # eager reduces in the out tensor's dtype (sum of [.6, .6] into an int64 out is 0)
            fkwargs["dtype"] = kwargs[outs[0]].dtype
        result = run(functional, args, fkwargs)
        targets = [kwargs[k] for k in outs]
        results = result if isinstance(result, (list, tuple)) else (result,)
        for t, r in zip(targets, results):
            _store(t, r, _overlap_ok(func, args, kwargs, t))
        return targets[0] if len(targets) == 1 else tuple(targets)

    return handler


def _inplace_view(view_op):
    """``squeeze_``, ``t_``, ``as_strided_``...: the tensor itself becomes the view."""

    def handler(func, args, kwargs):
        meta_call(func, args, kwargs)
        view = run(view_op, args, kwargs)
        target = args[0]
        torch._C.TensorBase.data.__set__(target, view)  # torch's sizes, strides and offset
        target._storage, target._steps = view._storage, view._steps
        refresh_key(target)
        return target

    return handler


def _store(target, result, overlap_ok: bool = False):
    """``target.copy_(result)`` for a result already shaped by eager's rules
    (``overlap_ok``: as :func:`~.tensor.write`'s)."""
    if not isinstance(target, Tensor):
        target.copy_(result.cpu() if isinstance(result, Tensor) else result)
        return target
    if tuple(result.shape) != tuple(target.shape):
        raise RuntimeError(
            f"lazycore: out= tensor has shape {list(target.shape)} but the result has shape "
            f"{list(result.shape)}; lazy tensors cannot be resized"
        )
    h = read(result) if isinstance(result, Tensor) else result
    return write(target, _convert(h, _lazy_dtype(target.dtype)), overlap_ok)


# Whether an op may write into a tensor that shares memory with itself (an
# expanded view) or with an input (``x.add_(x[0])``) is each eager kernel's own
# choice: ``fill_`` with a number and ``index_put_`` write into an expanded
# view, ``fill_`` with a tensor, ``copy_`` and the pointwise ops raise; an
# input that is the written tensor itself, or is laid out over the same memory
# the same way, is fine. Meta kernels do not check, so once per signature and
# sharing eager's CPU kernel runs on stand-ins over shared CPU memory laid out
# as the lazy tensors are over their storages.
_OVERLAP_TEXT = "to a single memory location"


def _overlap_ok(func, args, kwargs, target) -> bool:
    """True when elements of ``target`` share memory and eager's ``func``
    writes into it anyway; raises eager's error where eager refuses to write
    into ``target`` (its elements share memory, or an input's partly are
    its); False when nothing shares memory with ``target``."""
    if type(target) is not Tensor:
        return False
    storage, key = target._storage, target._key
    internal = False
    if target._steps:
        for n, s in zip(key[0], key[1]):
            if s == 0 and n > 1:
                internal = True
    shared = ()
    for i, x in enumerate(args):  # plain loops: this runs for every in-place op
        if type(x) is Tensor and x._storage is storage and x._key != key:
            shared += (i,)
    if kwargs:
        for k, x in kwargs.items():
            if type(x) is Tensor and x._storage is storage and x._key != key:
                shared += (k,)
    if not internal and not shared:
        return False
    memo = meta_call(func, args, kwargs)[4]
    said = memo.get(("overlap", shared))
    if said is None:
        said = memo[("overlap", shared)] = _eager_overlap(func, args, kwargs)
    if said is not True:
        raise RuntimeError(said)
    return internal


special.check_overlap_with(_overlap_ok)  # copy_ writes by the same rule, with the same per-signature answers
special.lower_with(_lowered)  # _to_copy on the tensor's own device is a lowered op


def _eager_overlap(func, args, kwargs):
    """True, or the message of eager's memory-overlap error, for ``func`` on
    stand-ins of its arguments: zeros (an index or a divisor of zero fails
    nothing before the overlap checks), the lazy tensors laid out over one CPU
    buffer per storage as they are over it."""
    buffers = {}

    def stand_in(x):
        if type(x) is Tensor:
            # one byte buffer per storage, seen as each view's dtype: a view of
            # another dtype (view_as_real of a complex tensor) overlaps its base
            # and is laid out in its own elements, as over eager's storage
            storage = x._storage
            buf = buffers.get(id(storage))
            if buf is None:
                n = 1
                for d in storage.handle.shape:
                    n *= d
                stored = TO_TORCH.get(storage.handle.dtype)
                width = max(x.element_size(), 1 if stored is None else stored.itemsize)
                buf = buffers[id(storage)] = torch.zeros(n * width, dtype=torch.uint8)
            return buf.view(x.dtype).as_strided(x.shape, x.stride(), x.storage_offset())
        if isinstance(x, torch.Tensor):
            return torch.zeros(x.shape, dtype=x.dtype)
        if isinstance(x, (list, tuple)):
            return type(x)(stand_in(v) for v in x)
        if isinstance(x, torch.device) and x.type == "lazy":
            return torch.device("cpu")
        return x

    cargs = [stand_in(x) for x in args]
    ckwargs = {k: stand_in(v) for k, v in kwargs.items()}
    try:
        with torch.random.fork_rng(devices=[]):  # a random op's draw must not move the user's generator
            func(*cargs, **ckwargs)
    except RuntimeError as e:
        if _OVERLAP_TEXT in str(e):
            return str(e)
    except Exception:  # noqa: BLE001  (the stand-ins' values are not the user's; only the overlap counts)
        pass
    return True


def _decomposed(decomp, recordable: bool = False):
    """``recordable``: the op's schema writes into none of its arguments, so
    its decomposition may be recorded per call signature and replayed
    (:func:`_recorded_decomposition`)."""

    def handler(func, args, kwargs):
        try:
            if recordable and settings.replay and TRACE.recorder is None:
                got = _recorded_decomposition(decomp, func, args, kwargs)
                if got is not _UNKEYED:
                    return got
            meta_call(func, args, kwargs)  # eager's checks, at the user's call
            out = decomp(*args, **kwargs)
            if out is NotImplemented:
                return fallback.run(func, args, kwargs)
            return out
        finally:
            release_frame(ENTRY.frame)  # the pieces' frames (their callers hold our results)

    return handler


# A decomposition (layer norm's backward, GELU's, the causal mask's tril)
# dispatches each of its pieces back here: tens of ops, each with its tensor
# wrappers, meta lookups and recipe replays, where the pieces' nodes are all
# the graph keeps. So the first call of a signature records the nodes the
# whole decomposition made, as a lowering's recording (its inputs the
# arguments' values), and later calls replay them at once. Nothing that could
# not be replayed is: a piece that reads the RNG state, observes a value,
# uploads, writes into a tensor the decomposition did not make (batch norm's
# running statistics) or falls back to the CPU taints the recording, and
# the signature then runs the decomposition every time. The pieces replay
# inside the recording as they do outside it (lazycore.trace.recipes), so a
# recording makes the nodes an unrecorded call makes, shared alike: recording
# never changes a program, whether it succeeds or not.
_NOT_RECORDED = object()
_UNKEYED = object()


def _recorded_decomposition(decomp, func, args, kwargs):
    """The op's results, from the recording of its decomposition for this
    call signature (made now when there is none yet), or from running it on
    the arguments' values; ``_UNKEYED`` when the call has no such signature
    (a tensor in a list, a host tensor) and runs the decomposition plainly."""
    acc, tensors, floats, named, plain = _signature(func, args, kwargs)
    if not plain or not tensors:
        return _UNKEYED
    out, _, _, _, memo, _ = _meta_entry(acc, func, args, kwargs)  # eager's checks, at the user's call
    if out is None:
        return _UNKEYED
    key = ("decomposed", _float_keys(floats, named) if floats else ())
    found = memo.get(key)
    start = ENTRY.frame
    if found is not None and found is not _NOT_RECORDED and found.aliased is None:
        for x in tensors:
            if x._steps:  # a view among the arguments: its read and the recording replayed as one
                res = _with_views(found, memo, tensors, [x._storage.handle for x in tensors], start, key)
                if res is not None:
                    return wrap_results(out, res, owned=True)
                break
    inputs = [read_view(x._storage, x._steps, start) if x._steps else x._storage.handle for x in tensors]
    if found is not None and found is not _NOT_RECORDED and found.fits(inputs):
        return wrap_results(out, found.replay(inputs, (), start), owned=True)
    # The pieces see each view argument's value, read once, as a tensor of its
    # own (recorded or not: one graph either way); what they write into it
    # is written back through the view after.
    given = (args, kwargs)
    fresh = {}
    for x, h in zip(tensors, inputs):
        if x._steps and id(x) not in fresh:
            # eager's dtype, not the handle's (a chalf view's handle holds complex64)
            meta = torch.empty(h.shape, dtype=x.dtype, device="meta")
            fresh[id(x)] = (x, wrap(h, meta, owned=True), h._value)
    if fresh:
        args = tuple(fresh[id(x)][1] if type(x) is Tensor and id(x) in fresh else x for x in args)
        kwargs = {k: fresh[id(v)][1] if type(v) is Tensor and id(v) in fresh else v for k, v in kwargs.items()}
    if found is not None:  # not recordable (or recorded for another aliasing of the inputs)
        result = decomp(*args, **kwargs)
        handles, recipe = None, None
    else:
        returned = []

        def run():
            result = decomp(*args, **kwargs)
            returned.append(result)
            return NotImplemented if result is NotImplemented else _result_handles(result)

        handles, recipe = record(run, inputs)
        result = returned[0]
    for x, t, before in fresh.values():
        h = t._storage.handle
        if h._value is not before:
            write(x, h)
    if result is NotImplemented:
        memo[key] = _NOT_RECORDED
        return fallback.run(func, *given)
    if found is not None:
        return result
    if recipe is not None:
        try:
            _check_results(func, out, handles)
        except RuntimeError:
            recipe = None
    if recipe is None or len(memo) >= _RECIPE_LIMIT:
        memo[key] = _NOT_RECORDED
        return result
    memo[key] = recipe
    return wrap_results(out, handles)  # new handles: the pieces' tensors hold theirs


def _result_handles(result):
    """A decomposition's result with each tensor's value as a handle."""
    if isinstance(result, Tensor):
        return read(result)
    if isinstance(result, (list, tuple)):
        return tuple([_result_handles(r) for r in result])
    if result is not None:  # a host tensor, a number: nothing to replay
        TRACE.taint()
    return None
