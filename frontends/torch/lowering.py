"""The ATen lowering registry and the helpers lowerings are written with.

A lowering maps one ATen op overload onto ``lazy`` ops through
:func:`lazycore.apply`. It is called as ``fn(ctx, *args, **kwargs)`` with
torch's own arguments, except that lazy tensors arrive as lazycore handles
(and 0-dim CPU tensors as lazycore scalars); ``ctx.out`` is eager's result
computed on the meta device (so shapes, dtypes and errors are eager's), and
``ctx.margs``/``ctx.mkwargs`` are the arguments as meta tensors. It returns
a handle per tensor result, each with exactly the meta result's shape and
element type. For an in-place op (``add_``) it returns the new value of the
mutated argument.

Ops without a lowering go to PyTorch's decomposition table and, failing that,
to the eager CPU kernel (a counted fallback): see :mod:`.dispatch`.

A lowering runs once per call signature (argument shapes, strides, dtypes,
devices and the values of Python arguments); later calls replay the nodes it
made (:mod:`lazycore.recipes`). So it must decide what to build from those
alone, not from other state. One that reads another handle, uploads data,
observes a value or assigns to a handle is detected and runs every call.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from lazycore.trace import composites, core
from lazycore.dialect.types import is_complex, is_float, is_float8, is_int, to_numpy_dtype

from .dtypes import lazy_dtype

LOWERINGS: dict = {}


def lowers(*ops):
    """Register the decorated function as the lowering of ATen ``ops``
    (overloads, or packets meaning every overload). Registering an op twice
    is an error; :func:`register` replaces deliberately."""

    def deco(fn):
        for op in ops:
            if op in LOWERINGS:
                raise ValueError(f"{op} already has a lowering ({LOWERINGS[op].__module__}.{LOWERINGS[op].__name__})")
            LOWERINGS[op] = fn
        return fn

    return deco


def register(op, fn) -> None:
    """Install (or replace) the lowering of ``op``; takes effect at the next call."""
    LOWERINGS[op] = fn
    _changed(op)


def unregister(op) -> None:
    LOWERINGS.pop(op, None)
    _changed(op)


_LISTENERS: list = []


def when_changed(fn) -> None:
    """Call ``fn(op)`` after :func:`register` or :func:`unregister` changed the
    registry for ``op`` (an overload or a packet): the dispatcher
    (:mod:`.dispatch`, which builds on this module) registers the forgetting
    of the handler choices and recordings that looked ``op`` up at import."""
    _LISTENERS.append(fn)


def _changed(op) -> None:
    for fn in _LISTENERS:
        fn(op)


def lookup(func):
    return LOWERINGS.get(func) or LOWERINGS.get(func.overloadpacket)


class Ctx:
    __slots__ = ("func", "out", "margs", "mkwargs", "device")

    def __init__(self, func, out, margs, mkwargs, device):
        self.func = func
        """The ATen op overload being lowered."""
        self.out = out
        self.margs = margs
        self.mkwargs = mkwargs
        self.device = device
        """The lazycore device the op runs on."""

    @property
    def func_name(self) -> str:
        """The op's name without overload (``add`` for ``aten.add_.Tensor`` too)."""
        name = self.func.overloadpacket.__name__
        return name[:-1] if name.endswith("_") and not name.endswith("__") else name

    @property
    def dtype(self) -> str:
        """The element type of the (first) result."""
        out = self.out[0] if isinstance(self.out, (tuple, list)) else self.out
        return lazy_dtype(out.dtype)

    @property
    def shape(self) -> tuple[int, ...]:
        out = self.out[0] if isinstance(self.out, (tuple, list)) else self.out
        return tuple(out.shape)


# --- helpers ------------------------------------------------------------------------


def apply(op, *operands, **attrs):
    return core.apply(op, *operands, **attrs)


# ``const(value, dtype, device, shape=())``: a number baked into the program (use for
# structural numbers only; data is a :func:`scalar`)
const = composites.constant


def scalar(value, dtype: str, device, shape=(), fold: bool = True):
    """A Python number by the scalar policy: 0 and 1 baked, others a parameter
    (so a new learning rate is a new input, not a new program). An integer the
    type cannot hold raises eager's checked-conversion error (``clamp``,
    ``fill_``, ``alpha=``, an exponent); operands eager wraps are
    :func:`wrapped` first. ``fold=False``: a parameter whatever the value,
    for a use where 0 and 1 enable no fold (``clamp``'s bounds)."""
    if dtype == "i1":
        value = bool(value)
    elif is_complex(dtype):
        value = complex(value)
    elif is_float(dtype):
        value = value if isinstance(value, float) else float(value)  # a recorded float argument stays one
        if is_float8(dtype):
            _check_float8(value, dtype)
    else:
        value = int(value)
        lo, hi = _range(dtype)
        if not lo <= value <= hi:
            raise RuntimeError(f"value cannot be converted to type {_C_TYPES[dtype]} without overflow")
    s = core.scalar(value, dtype, device=device, fold=fold)
    return broadcast(s, shape) if tuple(shape) != () else s


def _check_float8(value: float, dtype: str) -> None:
    """c10's checked conversion to a float8 type: beyond its largest finite
    value (an infinity too, but for float8_e5m2, which has them) overflows."""
    if math.isnan(value) or (math.isinf(value) and dtype == "f8E5M2"):
        return
    if abs(value) > float(ml_dtypes.finfo(to_numpy_dtype(dtype)).max):
        raise RuntimeError(f"value cannot be converted to type {_C_FLOAT8[dtype]} without overflow")


_C_FLOAT8 = {"f8E4M3FN": "c10::Float8_e4m3fn", "f8E5M2": "c10::Float8_e5m2",
             "f8E4M3FNUZ": "c10::Float8_e4m3fnuz", "f8E5M2FNUZ": "c10::Float8_e5m2fnuz"}


_C_TYPES = {"i8": "int8_t", "i16": "int16_t", "i32": "int", "i64": "int64_t",
            "ui8": "uint8_t", "ui16": "uint16_t", "ui32": "uint32_t", "ui64": "uint64_t"}
"""Eager's names for the integer types in its conversion errors."""


_RANGES: dict[str, tuple[int, int]] = {}


def _range(dtype: str) -> tuple[int, int]:
    r = _RANGES.get(dtype)
    if r is None:
        info = np.iinfo(to_numpy_dtype(dtype))
        r = _RANGES[dtype] = (int(info.min), int(info.max))
    return r


def wrapped(x, dtype: str):
    """A Python int standing for a tensor operand (``x + 300``: a wrapped number)
    as eager's kernels cast it to an integer ``dtype``: wrapped around, two's
    complement (int8 ``x + 300`` adds 44). Anything else as it is."""
    if type(x) is not int or not is_int(dtype):
        return x
    lo, hi = _range(dtype)
    return x if lo <= x <= hi else (x - lo) % (hi - lo + 1) + lo


def is_handle(x) -> bool:
    return isinstance(x, core.LazyTensor)


# torch's broadcasting and bool conversion are the shared array rules
broadcast = core.broadcast_to


def fused_multiply_add(a, b, c):
    """``a * b + c`` rounded once, as eager's ``fmadd``: one ``lazy.fma``, whose
    product ``lazy-keep-roundings`` ties to its own sum so that XLA's backends
    contract the two (f40e38d; for float32 eager's bits where a float64 sum of
    the exact product rounded twice near midpoints: tests/torch/test_fma_nodes.py)."""
    return apply("fma", a, b, c)


def convert(x, dtype: str):
    """``x`` as ``dtype``, as eager's CPU cast: float64 -> uint8 goes through
    int64 there (NumPy's, and torch's other narrow targets, through int32:
    the convert lowering), which keeps the low byte of values beyond int32.
    Float8 goes through float32 both ways, as c10's float8 types convert
    (see :func:`to_float8`), and so does a double or an integer becoming a
    half (c10's ``Half(float)``, ``BFloat16(float)``): rounded twice, where
    ``lazy.convert`` rounds once as NumPy does (1 + 2^-11 + 2^-40 is 1.0 in
    eager float16, 1.0009765625 in NumPy)."""
    if x.dtype == dtype:
        return x
    if is_float8(dtype):
        return to_float8(x, dtype)
    if is_float8(x.dtype):  # c10's float8 -> float, then float's cast
        fnuz_nan = x.dtype.endswith("FNUZ") and dtype in ("i32", "i64")
        x = core.convert_to(x, "f32")
        if fnuz_nan:  # (eager's FNUZ NaN becomes 0 there, where other NaNs become INT_MIN)
            out = core.convert_to(x, dtype)
            zero = core.apply("constant", value=np.zeros(x.shape, to_numpy_dtype(dtype)), device=x.device)
            return core.apply("select", core.apply("compare", x, x, direction="NE"), zero, out)
    if dtype == "ui8" and x.dtype == "f64":
        x = core.convert_to(x, "i64")
    if dtype in ("f16", "bf16") and x.dtype not in ("f32", "f16", "bf16"):
        x = core.convert_to(x, "f32")
    return core.convert_to(x, dtype)


# the NaN c10 makes, with the sign bit of the value converted, where XLA's
# differs (e5m2: 0x7E, from float16's; e4m3fn: the sign is lost on the way)
_F8_NAN = {"f8E5M2": 0x7F, "f8E4M3FN": 0x7F}
_SAME_WIDTH_INT = {"f16": "i16", "bf16": "i16", "f32": "i32", "f64": "i64",
                   "f8E4M3FN": "i8", "f8E5M2": "i8", "f8E4M3FNUZ": "i8", "f8E5M2FNUZ": "i8"}


def to_float8(x, dtype: str):
    """``x`` as a float8 type, as c10 converts: through float32 (an int, a
    double, another float8 first becomes a float), rounding to nearest even;
    float8_e4m3fn saturates (out-of-range values and infinities become +-448,
    where XLA and ml_dtypes make NaN), and float8_e5m2's NaN is 0x7F with the
    sign (XLA's is 0x7E). The FNUZ types' overflow is NaN in both."""
    if is_complex(x.dtype):
        x = core.apply("real", x)
    source = x
    x = core.convert_to(x, "f32")
    if dtype == "f8E4M3FN":
        lim = core.apply("constant", value=np.full(x.shape, 448.0, np.float32), device=x.device)
        x = core.apply("minimum", x, lim)
        x = core.apply("maximum", x, core.apply("neg", lim))
    out = core.apply("convert", x, dtype=dtype)
    nan = _F8_NAN.get(dtype)
    if nan is not None:
        # the sign from the value given: XLA's widening of a half NaN may drop it
        # (a FNUZ NaN, 0x80, has the sign bit set, but c10 reads it as a positive NaN)
        signed = source if is_float(source.dtype) and not source.dtype.endswith("FNUZ") else x
        width = _SAME_WIDTH_INT[signed.dtype]
        bits = core.apply("bitcast_convert", signed, dtype=width)
        zero = core.apply("constant", value=np.zeros(x.shape, to_numpy_dtype(width)), device=x.device)
        sign = core.apply("compare", bits, zero, direction="LT")
        pos = core.apply("constant", value=np.full(x.shape, nan, np.uint8), device=x.device)
        neg = core.apply("constant", value=np.full(x.shape, nan | 0x80, np.uint8), device=x.device)
        # chosen as bytes: XLA's CPU backend computes a float8 select in a wider
        # type, which loses a NaN's sign
        bits8 = core.apply("select", core.apply("compare", x, x, direction="NE"),
                           core.apply("select", sign, neg, pos), core.apply("bitcast_convert", out, dtype="ui8"))
        out = core.apply("bitcast_convert", bits8, dtype=dtype)
    return out


def operand(x, dtype: str, shape, device):
    """Any tensor-ish argument as a handle of ``dtype`` broadcast to ``shape``."""
    if is_handle(x):
        return broadcast(convert(x, dtype), shape)
    if isinstance(x, (bool, int, float, complex)):
        return scalar(x, dtype, device, shape)
    raise TypeError(f"lazycore: cannot use {type(x).__name__} as a tensor operand")


def full(value, dtype: str, shape, device):
    return scalar(value, dtype, device, shape)


def dim(d: int, rank: int) -> int:
    return d + rank if d < 0 else d


def dims(ds, rank: int) -> tuple[int, ...]:
    if ds is None or (isinstance(ds, (list, tuple)) and len(ds) == 0):
        return tuple(range(rank))
    if isinstance(ds, int):
        ds = (ds,)
    return tuple(sorted(dim(d, rank) for d in ds))


def reshape(h, shape):
    shape = tuple(shape)
    return h if h.shape == shape else core.apply("reshape", h, shape=shape)
