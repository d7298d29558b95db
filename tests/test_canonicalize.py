"""lazy-canonicalize keeps every program's numbers: each rewrite is checked by
running the program with and without it (the reference takes the constants as
arguments, so neither lazycore nor XLA can fold them), and by looking at what is left.
"""

import itertools

import ml_dtypes
import numpy as np
import pytest

from lazycore.runtime import compiler
from lazycore.dialect.types import DTYPES, TensorType, is_complex, is_float, real_dtype, to_numpy_dtype, type_of
from lazycore.passes.canonicalize import FOLD_LIMIT, FOLDABLE, exact_conversion, same_conversion
from lazycore.passes.pipeline import run_pipeline

NO_CANONICALIZE = "lazy-to-stablehlo"


def canonicalized(text: str) -> str:
    module = compiler.parse(text)
    run_pipeline(module, "lazy-canonicalize")
    return str(module)


def program(body: str, args: list, results: list[str]) -> str:
    sig = ", ".join(f"%a{i}: {type_of(np.asarray(a))}" for i, a in enumerate(args))
    names = ", ".join(f"%r{i}" for i in range(len(results)))
    return f"""
func.func @main({sig}) -> ({", ".join(results)}) {{
{body}
  return {names} : {", ".join(results)}
}}"""


def literal(a: np.ndarray) -> str:
    """A dense attribute for ``a``, with floats printed exactly (hex bits)."""
    t = type_of(a)
    if a.dtype == np.bool_:
        items = ["true" if v else "false" for v in a.reshape(-1)]
    elif np.issubdtype(a.dtype, np.floating):
        bits = a.view(f"u{a.dtype.itemsize}")
        items = [f"0x{int(v):0{2 * a.dtype.itemsize}X}" for v in bits.reshape(-1)]
    else:
        items = [str(int(v)) for v in a.reshape(-1)]
    return f"dense<[{', '.join(items)}]> : tensor<{len(items)}x{t.dtype}>"


def fold_vs_run(op_text: str, operands: list[np.ndarray], result: TensorType):
    """(value folded by lazy-canonicalize, value XLA computes, text left after folding)."""
    operands = [np.asarray(o).reshape(-1) for o in operands]
    types = ", ".join(str(type_of(o)) for o in operands)
    uses = ", ".join(f"%c{i}" for i in range(len(operands)))
    op_line = f"  %r0 = {op_text.format(uses=uses)} : ({types}) -> {result}"
    consts = "\n".join(
        f'  %c{i} = "lazy.constant"() {{value = {literal(o)}}} : () -> {type_of(o)}' for i, o in enumerate(operands)
    )
    folded_text = program(consts + "\n" + op_line, [], [str(result)])
    arg_text = program(op_line.replace("%c", "%a"), operands, [str(result)])
    left = canonicalized(folded_text)
    (folded,) = compiler.run_module(folded_text, [])
    (reference,) = compiler.run_module(arg_text, operands, pipeline=NO_CANONICALIZE)
    return folded, reference, left


# --- constant folding agrees with XLA, op by op ---------------------------------------

EXACT_FLOAT = {"neg", "abs", "sign", "sqrt", "floor", "ceil", "round", "add", "sub", "mul", "div", "rem",
               "maximum", "minimum", "is_finite"}
UNARY_FLOAT = ["neg", "abs", "sign", "exp", "log", "log1p", "expm1", "tanh", "logistic", "sqrt", "rsqrt",
               "floor", "ceil", "round", "erf", "sin", "cos", "is_finite"]
BINARY_FLOAT = ["add", "sub", "mul", "div", "rem", "pow", "maximum", "minimum", "atan2"]
FLOAT_SPECIALS = np.array([0.0, -0.0, 0.5, -2.5, 1.5, np.inf, -np.inf, np.nan], np.float32)


def _assert_same(folded, reference, exact):
    assert folded.dtype == reference.dtype
    if exact and is_float(type_of(folded).dtype):
        # Through f64, as NumPy's NaN == NaN handling does not reach bf16.
        wide_f, wide_r = folded.astype(np.float64), reference.astype(np.float64)
        np.testing.assert_array_equal(wide_f, wide_r)
        np.testing.assert_array_equal(np.signbit(wide_f), np.signbit(wide_r))
    elif exact:
        np.testing.assert_array_equal(folded, reference)
    else:
        np.testing.assert_allclose(folded, reference, rtol=3e-6, atol=1e-6)


@pytest.mark.parametrize("name", UNARY_FLOAT)
def test_fold_unary_float_matches_xla(name, rng):
    x = np.concatenate([rng.uniform(0.05, 4, 8), FLOAT_SPECIALS]).astype(np.float32)
    if name in ("log", "sqrt", "rsqrt", "log1p"):
        x = np.abs(x)  # inf/NaN/0 still there; negative logs give NaN on both sides anyway
    result = TensorType(x.shape, "i1" if name == "is_finite" else "f32")
    folded, reference, left = fold_vs_run(f'"lazy.{name}"({{uses}})', [x], result)
    assert f"lazy.{name}" not in left
    _assert_same(folded, reference, name in EXACT_FLOAT)


@pytest.mark.parametrize("name", BINARY_FLOAT)
def test_fold_binary_float_matches_xla(name, rng):
    a = np.concatenate([rng.uniform(-4, 4, 8), FLOAT_SPECIALS]).astype(np.float32)
    b = np.concatenate([rng.uniform(0.5, 3, 8), FLOAT_SPECIALS[::-1]]).astype(np.float32)
    if name == "pow":
        a = np.abs(a)
    folded, reference, left = fold_vs_run(f'"lazy.{name}"({{uses}})', [a, b], TensorType(a.shape, "f32"))
    assert f"lazy.{name}" not in left
    _assert_same(folded, reference, name in EXACT_FLOAT)


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "rem", "pow", "maximum", "minimum", "and", "or", "xor"])
@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int64])
def test_fold_binary_int_matches_xla(name, dtype, rng):
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, 16, dtype=dtype, endpoint=True)
    b = rng.integers(1, 20, 16).astype(dtype)
    if np.issubdtype(dtype, np.signedinteger):
        a[:4] = [7, -7, 7, -7]
        b[:8] = np.array([2, 2, -2, -2, -3, 5, -1, 1]).astype(dtype)
    if name == "pow":
        # Negative exponents do not fold (see test_int_pow_negative_exponent_declines).
        a, b = (a % 7).astype(dtype), np.abs(b)
    t = TensorType((16,), type_of(a).dtype)
    folded, reference, left = fold_vs_run(f'"lazy.{name}"({{uses}})', [a, b], t)
    assert f"lazy.{name}" not in left
    _assert_same(folded, reference, True)


def test_int_pow_negative_exponent_declines():
    a, b = np.array([2, 3], np.int32), np.array([2, -1], np.int32)
    _, _, left = fold_vs_run('"lazy.pow"({uses})', [a, b], TensorType((2,), "i32"))
    assert "lazy.pow" in left


@pytest.mark.parametrize("direction", ["EQ", "NE", "LT", "LE", "GT", "GE"])
def test_fold_compare_matches_xla(direction):
    a = np.array([1, 2, 3, np.nan, -0.0, np.inf], np.float32)
    b = np.array([1, 3, 2, np.nan, 0.0, np.inf], np.float32)
    folded, reference, left = fold_vs_run(f'"lazy.compare"({{uses}}) {{{{direction = "{direction}"}}}}', [a, b],
                                          TensorType((6,), "i1"))
    assert "lazy.compare" not in left
    _assert_same(folded, reference, True)


def test_fold_select_and_not(rng):
    p = rng.random(10) < 0.5
    a, b = rng.integers(-9, 9, 10).astype(np.int16), rng.integers(-9, 9, 10).astype(np.int16)
    folded, reference, _ = fold_vs_run('"lazy.select"({uses})', [p, a, b], TensorType((10,), "i16"))
    _assert_same(folded, reference, True)
    folded, reference, _ = fold_vs_run('"lazy.not"({uses})', [a], TensorType((10,), "i16"))
    _assert_same(folded, reference, True)


CONVERT_SOURCES = {
    "f32": np.array([0.0, -0.0, 2.7, -2.7, 1e10, -1e10, 65504.0, 1e-8, np.inf, np.nan], np.float32),
    "f64": np.array([0.5, -1.5, 2.5, 3.4e38, -7.9, 1e-300, 123456789.123, -0.0], np.float64),
    "i32": np.array([0, 1, -1, 2**31 - 1, -2**31, 16777217, 300, -129], np.int32),
    "ui8": np.array([0, 1, 127, 128, 255], np.uint8),
    "i1": np.array([True, False, True]),
}


@pytest.mark.parametrize("src, dst", [(s, d) for s in CONVERT_SOURCES for d in
                                      ("f32", "f64", "f16", "bf16", "i32", "i8", "ui16", "i1") if s != d])
def test_fold_convert_matches_xla_or_declines(src, dst):
    x = CONVERT_SOURCES[src]
    # Float -> int of NaN or out of range is the backend's choice: drop those to see a fold.
    in_range = x
    if is_float(src) and not is_float(dst) and dst != "i1":
        info = np.iinfo(to_numpy_dtype(dst))
        with np.errstate(invalid="ignore"):
            in_range = x[np.isfinite(x) & (np.trunc(x) >= info.min) & (np.trunc(x) <= info.max)]
        folded_text = canonicalized(program(
            f'  %c = "lazy.constant"() {{value = {literal(x)}}} : () -> {type_of(x)}\n'
            f'  %r0 = "lazy.convert"(%c) : ({type_of(x)}) -> {TensorType(x.shape, dst)}', [], [str(TensorType(x.shape, dst))]))
        assert "lazy.convert" in folded_text  # declined: some value is out of range
    folded, reference, left = fold_vs_run('"lazy.convert"({uses})', [in_range], TensorType(in_range.shape, dst))
    assert "lazy.convert" not in left
    _assert_same(folded, reference, True)


def test_fold_limits():
    big = np.arange(FOLD_LIMIT + 1, dtype=np.int32)
    _, _, left = fold_vs_run('"lazy.add"({uses})', [big, big], TensorType(big.shape, "i32"))
    assert "lazy.add" in left
    assert FOLDABLE  # every name in it has a branch, exercised above


def test_bf16_splat_folds():
    text = program(
        '  %c = "lazy.constant"() {value = dense<1.5> : tensor<64xbf16>} : () -> tensor<64xbf16>\n'
        '  %r0 = "lazy.mul"(%c, %c) : (tensor<64xbf16>, tensor<64xbf16>) -> tensor<64xbf16>', [], ["tensor<64xbf16>"])
    assert "dense<2.250000e+00> : tensor<64xbf16>" in canonicalized(text)
    (out,) = compiler.run_module(text, [])
    np.testing.assert_array_equal(out, np.full(64, 2.25, ml_dtypes.bfloat16))


# --- convert chains: the exactness table --------------------------------------------------


def _all_values(dtype: str) -> np.ndarray:
    d = to_numpy_dtype(dtype)
    if dtype == "i1":
        return np.array([False, True])
    if is_complex(dtype):  # every value of the parts, in either part
        part = _all_values(real_dtype(dtype))
        x = np.empty(len(part), d)
        x.real, x.imag = part, part[::-1]
        return x
    if np.issubdtype(d, np.integer):
        info = np.iinfo(d)
        return np.unique(np.array([info.min, info.min + 1, -1 if info.min else 0, 0, 1, info.max - 1, info.max], d))
    if d.itemsize == 1:  # float8: every bit pattern
        return np.arange(256, dtype=np.uint8).view(d)
    bits = np.arange(0, 2**16, 7, dtype=np.uint16)  # a spread over every 16-bit pattern
    if d.itemsize == 2:
        return bits.view(d)
    wide = np.concatenate([bits.astype(np.uint64) << (8 * d.itemsize - 16), bits.astype(np.uint64) + 1])
    return wide.astype(f"u{d.itemsize}").view(d)


@pytest.mark.parametrize("src", DTYPES)
def test_exact_conversions_round_trip(src):
    """What the table calls exact keeps every value, checked on representative values."""
    x = _all_values(src)
    for dst in DTYPES:
        if not exact_conversion(src, dst) or src == dst:
            continue
        with np.errstate(all="ignore"):
            back = x.astype(to_numpy_dtype(dst)).astype(x.dtype)
            inexact = is_float(src) or is_complex(src)
            same = (back == x) | (np.isnan(back) & np.isnan(x)) if inexact else back == x
        assert same.all(), f"{src} -> {dst} is called exact but changes {x[~same][:3]}"


@pytest.mark.parametrize("src, dst", [("f32", "f16"), ("f32", "bf16"), ("f16", "bf16"), ("bf16", "f16"),
                                      ("i32", "f32"), ("i64", "f64"), ("i16", "f16"), ("i8", "ui8"),
                                      ("i32", "i16"), ("ui8", "i8"), ("f32", "i64"), ("i8", "i1"),
                                      ("complex<f32>", "f32"), ("complex<f64>", "complex<f32>"),
                                      ("i32", "complex<f32>"), ("complex<f32>", "f64")])
def test_lossy_conversions_are_not_exact(src, dst):
    assert not exact_conversion(src, dst)


@pytest.mark.parametrize("chain, converts_left", [
    (("i8", "i32", "f32"), 1),
    (("ui8", "i16", "ui8"), 0),  # a round trip through a wider type is x
    (("i1", "f32", "i32"), 1),
    (("f32", "f64", "i32"), 1),
    (("f16", "f32", "bf16"), 1),
    (("i32", "i64", "i8"), 1),
    # an int and a float route to a narrower int are not compared: the exact i16 -> f32 stays
    (("i16", "f32", "i8"), 2),
    # float16 -> uint32 goes through int64 (NaN gives 0), float32 -> uint32 does not
    (("f16", "f32", "ui32"), 2),
    (("f16", "f32", "ui64"), 1),
    (("f32", "f16", "f32"), 2),  # lossy first step
])
def test_convert_chain_keeps_values(chain, converts_left):
    a, b, c = chain
    x = _all_values(a)
    if is_float(a):
        with np.errstate(invalid="ignore"):
            x = x[np.isfinite(x.astype(np.float64)) & (np.abs(x.astype(np.float64)) < 100)]
    text = program(
        f'  %m = "lazy.convert"(%a0) : ({type_of(x)}) -> {TensorType(x.shape, b)}\n'
        f'  %r0 = "lazy.convert"(%m) : ({TensorType(x.shape, b)}) -> {TensorType(x.shape, c)}',
        [x], [str(TensorType(x.shape, c))])
    assert canonicalized(text).count('"lazy.convert"') == converts_left
    (folded,) = compiler.run_module(text, [x])
    (reference,) = compiler.run_module(text, [x], pipeline=NO_CANONICALIZE)
    np.testing.assert_array_equal(folded, reference)


def test_same_conversion():
    assert same_conversion("i16", "i32", "i8") and same_conversion("i16", "f32", "f64")
    assert not same_conversion("i16", "f32", "i8")
    assert same_conversion("i8", "f32", "i32")  # i8 -> i32 is exact: no wrapping to differ
    # each float type's cast to an integer is the C cast the lowering emulates for it
    assert not same_conversion("f16", "f32", "ui32") and same_conversion("f32", "f64", "ui32")
    assert same_conversion("f16", "f64", "i16") and same_conversion("bf16", "f32", "ui64")
    assert not same_conversion("bf16", "f32", "ui32")  # eager's vector loops differ in width


def test_subnormals_do_not_fold():
    # XLA's CPU backend flushes them to zero, NumPy keeps them.
    x = np.array([1e-40, 1.0], np.float32)
    _, _, left = fold_vs_run('"lazy.neg"({uses})', [x], TensorType((2,), "f32"))
    assert "lazy.neg" in left
    tiny = np.array([1e-30, 1.0], np.float32)
    _, _, left = fold_vs_run('"lazy.mul"({uses})', [tiny, np.array([1e-10, 1.0], np.float32)], TensorType((2,), "f32"))
    assert "lazy.mul" in left  # the product would be subnormal


# --- shape chains keep the numbers -----------------------------------------------------------


@pytest.mark.parametrize("p1, p2", list(itertools.product(itertools.permutations(range(3)), repeat=2))[::5])
def test_permute_composition(p1, p2, rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    mid = tuple(x.shape[d] for d in p1)
    out_shape = tuple(mid[d] for d in p2)
    dims = lambda p: ", ".join(map(str, p))  # noqa: E731
    text = program(
        f'  %t = "lazy.permute"(%a0) {{dims = array<i64: {dims(p1)}>}} : (tensor<2x3x4xf32>) -> {TensorType(mid, "f32")}\n'
        f'  %r0 = "lazy.permute"(%t) {{dims = array<i64: {dims(p2)}>}} : ({TensorType(mid, "f32")}) -> {TensorType(out_shape, "f32")}',
        [x], [str(TensorType(out_shape, "f32"))])
    left = canonicalized(text).count('"lazy.permute"')
    composed = tuple(p1[d] for d in p2)
    assert left == (0 if composed == (0, 1, 2) else 1)
    (out,) = compiler.run_module(text, [x])
    np.testing.assert_array_equal(out, x.transpose(p1).transpose(p2))


def test_reshape_broadcast_chain_keeps_values(rng):
    x = rng.standard_normal((2, 6)).astype(np.float32)
    text = program(
        '  %a = "lazy.reshape"(%a0) : (tensor<2x6xf32>) -> tensor<3x4xf32>\n'
        '  %b = "lazy.reshape"(%a) : (tensor<3x4xf32>) -> tensor<12xf32>\n'
        '  %r0 = "lazy.reshape"(%b) : (tensor<12xf32>) -> tensor<4x3xf32>\n'
        '  %z = "lazy.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>\n'
        '  %zb = "lazy.broadcast_in_dim"(%z) {dims = array<i64>} : (tensor<f32>) -> tensor<4x3xf32>\n'
        '  %r1 = "lazy.add"(%r0, %zb) : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>',
        [x], ["tensor<4x3xf32>", "tensor<4x3xf32>"])
    left = canonicalized(text)
    assert left.count('"lazy.reshape"') == 1 and "lazy.add" not in left and "lazy.broadcast_in_dim" not in left
    out0, out1 = compiler.run_module(text, [x])
    np.testing.assert_array_equal(out0, x.reshape(4, 3))
    np.testing.assert_array_equal(out1, x.reshape(4, 3))
