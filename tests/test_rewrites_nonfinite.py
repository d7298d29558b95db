"""Every algebraic rewrite and fold keeps NaN, the infinities, the sign of zero
and float32 overflow as eager torch and NumPy compute them.

One test per rule of ``lazy-canonicalize`` (passes/canonicalize.py,
passes/folding.py, passes/updates.py): a program that the rule rewrites is
run through the whole stack (torch frontend on the lazy device, or the NumPy
frontend, or a ``lazy`` module for the folds) on NaN, +-Inf, +-0.0 and values
whose float32 products overflow, and compared bit for bit with eager (NaN
compared by position, every other value by its bits, so the sign of a zero
counts). Each test also checks that the rule did fire, so it tests the rule
and not a program the rule left alone.

XLA's own algebraic simplifier rewrites ``A + 0 => A`` and ``A - 0 => A`` for
any zero constant (xla/hlo/transforms/simplifiers/algebraic_simplifier.cc,
``HandleAdd``/``HandleSubtract``), so ``x + (+0.0)`` would come back as
``-0.0`` for ``x = -0.0`` even without a rule of ours:
test_xla_simplifier_drops_add_of_zero records that, and why lazy-canonicalize
hands XLA a select instead.
"""

import numpy as np
import pytest
import torch

import lazycore.numpy as lnp
import lazycore.torch as ltorch
from lazycore.dialect.types import type_of
from lazycore.passes.pipeline import run_pipeline
from lazycore.runtime import compiler

F32_MAX = float(np.finfo(np.float32).max)
SPECIALS = np.array(
    [np.nan, np.inf, -np.inf, -0.0, 0.0, 3e38, -3e38, F32_MAX, 1.5, -2.5, 2.0, 89.0, -104.0, 1e-30],
    np.float32,
)


@pytest.fixture(scope="module")
def dev():
    return ltorch.device()


def assert_same_bits(got, want):
    """Same dtype and shape, NaN at the same places, every other element the same bits."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind != "f":
        np.testing.assert_array_equal(got, want)
        return
    nan_g, nan_w = np.isnan(got), np.isnan(want)
    np.testing.assert_array_equal(nan_g, nan_w, err_msg="NaN positions")
    u = f"u{want.dtype.itemsize}"
    bad = got[~nan_w].view(u) != want[~nan_w].view(u)
    assert not bad.any(), f"got {got[~nan_w][bad]} (signbit {np.signbit(got[~nan_w][bad])}), " \
                          f"eager {want[~nan_w][bad]} (signbit {np.signbit(want[~nan_w][bad])})"


def torch_case(dev, fn, *xs):
    """``fn`` on eager CPU tensors and on the lazy device: the results, bit for bit."""
    want = fn(*xs)
    got = fn(*[x.to(dev) for x in xs]).cpu()
    assert_same_bits(got.numpy(), want.numpy())


def canonical_ops(text: str) -> str:
    module = compiler.parse(text)
    run_pipeline(module, "lazy-canonicalize")
    return str(module)


def one_program(body: str, args: list[np.ndarray], result: str) -> str:
    sig = ", ".join(f"%a{i}: {type_of(np.asarray(a))}" for i, a in enumerate(args))
    return f"func.func @main({sig}) -> {result} {{\n{body}\n  return %r : {result}\n}}"


X = torch.from_numpy(SPECIALS.copy())


# --- identities: the rule fires in the module, and the stack agrees with eager -----------

def _rewritten(body: str, gone: str, kept: str | None = None):
    """Canonicalize a one-argument f32 program, check ``gone`` left and ``kept`` stayed,
    and run it (through the default pipeline) on SPECIALS."""
    n = len(SPECIALS)
    t = f"tensor<{n}xf32>"
    text = one_program(body.replace("T", t), [SPECIALS], t)
    left = canonical_ops(text)
    assert gone not in left, left
    if kept is not None:
        assert kept in left, left
    (out,) = compiler.run_module(text, [SPECIALS])
    return out


def _const(name, value, t="T"):
    return f'  %{name} = "lazy.constant"() {{value = dense<{value}> : {t}}} : () -> {t}'


def test_mul_by_one(dev):
    """x * 1 -> x, 1 * x -> x: exact for NaN, Inf, -0.0 and F32_MAX."""
    for body in (_const("c", "1.0") + '\n  %r = "lazy.mul"(%a0, %c) : (T, T) -> T',
                 _const("c", "1.0") + '\n  %r = "lazy.mul"(%c, %a0) : (T, T) -> T'):
        assert_same_bits(_rewritten(body, "lazy.mul"), (X * 1).numpy())
    torch_case(dev, lambda x: x * 1, X)
    torch_case(dev, lambda x: 1 * x, X)
    torch_case(dev, lambda x: x * torch.ones_like(x), X)
    torch_case(dev, lambda x: (x * 1) * 2, X)  # 2 * F32_MAX overflows to inf in eager


def test_add_positive_zero_gives_positive_zero(dev):
    """x + (+0.0) is not x: eager gives +0.0 for -0.0 (this failed before the rule was fixed)."""
    for body in (_const("c", "0.0") + '\n  %r = "lazy.add"(%a0, %c) : (T, T) -> T',
                 _const("c", "0.0") + '\n  %r = "lazy.add"(%c, %a0) : (T, T) -> T'):
        assert_same_bits(_rewritten(body, "lazy.add", kept="lazy.select"), (X + 0.0).numpy())
    torch_case(dev, lambda x: x + 0, X)
    torch_case(dev, lambda x: 0 + x, X)
    torch_case(dev, lambda x: torch.add(x, 0.0), X)
    torch_case(dev, lambda x: x + torch.zeros_like(x), X)  # broadcast of a splat: broadcast_of_splat, then the add
    torch_case(dev, lambda x: (-x) + 0, X)
    assert np.signbit((X + 0).numpy()[3]) == False  # noqa: E712  (eager: -0.0 + 0 is +0.0)


def test_add_negative_zero_is_identity(dev):
    """x + (-0.0) -> x is exact: -0.0 + -0.0 is -0.0, +0.0 + -0.0 is +0.0."""
    for body in (_const("c", "-0.0") + '\n  %r = "lazy.add"(%a0, %c) : (T, T) -> T',
                 _const("c", "-0.0") + '\n  %r = "lazy.add"(%c, %a0) : (T, T) -> T'):
        out = _rewritten(body, "lazy.add")
        assert "lazy.select" not in canonical_ops(one_program(body.replace("T", "tensor<14xf32>"), [SPECIALS], "tensor<14xf32>"))
        assert_same_bits(out, (X + (-0.0)).numpy())
    torch_case(dev, lambda x: x + (-0.0), X)
    torch_case(dev, lambda x: (-0.0) + x, X)


def test_integer_add_zero(dev):
    """Integers have one zero: x + 0 -> x."""
    xi = torch.tensor([0, -1, 2**31 - 1, -(2**31), 7], dtype=torch.int32)
    torch_case(dev, lambda x: x + 0, xi)
    torch_case(dev, lambda x: 0 + x, xi)


def test_sub_positive_zero_is_identity(dev):
    """x - (+0.0) -> x is exact: -0.0 - 0.0 is -0.0."""
    body = _const("c", "0.0") + '\n  %r = "lazy.sub"(%a0, %c) : (T, T) -> T'
    assert_same_bits(_rewritten(body, "lazy.sub"), (X - 0.0).numpy())
    torch_case(dev, lambda x: x - 0, X)
    torch_case(dev, lambda x: torch.sub(x, 0.0), X)


def test_sub_negative_zero_gives_positive_zero(dev):
    """x - (-0.0) is x + 0.0: -0.0 becomes +0.0 (XLA's simplifier alone would keep -0.0)."""
    body = _const("c", "-0.0") + '\n  %r = "lazy.sub"(%a0, %c) : (T, T) -> T'
    assert_same_bits(_rewritten(body, "lazy.sub", kept="lazy.select"), (X - (-0.0)).numpy())
    torch_case(dev, lambda x: x - (-0.0), X)
    torch_case(dev, lambda x: torch.sub(x, -0.0), X)
    assert not np.signbit((X - (-0.0)).numpy()[3])


def test_constant_plus_zero_folds_exactly():
    """-0.0 + 0.0 between constants folds to +0.0 (the add rule leaves it to folding)."""
    n = len(SPECIALS)
    t = f"tensor<{n}xf32>"
    body = _const("z", "-0.0", t) + "\n" + _const("c", "0.0", t) + f'\n  %r = "lazy.add"(%z, %c) : ({t}, {t}) -> {t}'
    text = f"func.func @main() -> {t} {{\n{body}\n  return %r : {t}\n}}"
    left = canonical_ops(text)
    assert "lazy.add" not in left and "lazy.select" not in left, left
    (out,) = compiler.run_module(text, [])
    assert_same_bits(out, np.full(n, -0.0, np.float32) + np.float32(0.0))


def test_xla_simplifier_drops_add_of_zero():
    """Evidence for the select: without lazy-canonicalize, XLA itself turns -0.0 + 0.0 into -0.0
    (its A + 0 => A), where IEEE and eager give +0.0. With it, the stack gives +0.0."""
    n = len(SPECIALS)
    t = f"tensor<{n}xf32>"
    text = one_program(_const("c", "0.0", t) + f'\n  %r = "lazy.add"(%a0, %c) : ({t}, {t}) -> {t}', [SPECIALS], t)
    (raw,) = compiler.run_module(text, [SPECIALS], pipeline="lazy-to-stablehlo")
    (ours,) = compiler.run_module(text, [SPECIALS])
    eager = SPECIALS + np.float32(0.0)
    assert np.signbit(raw[3]) and not np.signbit(eager[3])  # XLA's rewrite: inexact for -0.0
    assert_same_bits(ours, eager)


def test_same_type_convert_and_reshape(dev):
    """convert(x: T -> T) -> x, reshape(x: S -> S) -> x."""
    n = len(SPECIALS)
    t = f"tensor<{n}xf32>"
    for op in ("convert", "reshape"):
        body = f'  %y = "lazy.{op}"(%a0) : ({t}) -> {t}\n  %r = "lazy.neg"(%y) : ({t}) -> {t}'
        text = one_program(body, [SPECIALS], t)
        assert f"lazy.{op}" not in canonical_ops(text)
        (out,) = compiler.run_module(text, [SPECIALS])
        assert_same_bits(out, -SPECIALS)
    torch_case(dev, lambda x: x.to(torch.float32) * 1, X)
    torch_case(dev, lambda x: x.reshape(x.shape) + 0, X)


def test_permute_rules(dev):
    """permute identity and permute of permute move values, never compute: exact for NaN and -0.0."""
    x = torch.from_numpy(SPECIALS[:12].reshape(3, 4).copy())
    torch_case(dev, lambda x: x.permute(0, 1) * 1, x)
    torch_case(dev, lambda x: x.t().t() + 0, x)
    torch_case(dev, lambda x: x.reshape(3, 2, 2).permute(2, 0, 1).permute(0, 2, 1) - 0, x)


def test_reshape_and_broadcast_rules(dev):
    """reshape of reshape, broadcast no-op, broadcast of a splat."""
    x = torch.from_numpy(SPECIALS[:12].copy())
    torch_case(dev, lambda x: x.reshape(3, 4).reshape(2, 6).reshape(12) * 1, x)
    torch_case(dev, lambda x: x * torch.ones(12, device=x.device), x)
    torch_case(dev, lambda x: x.expand(12) + torch.zeros((), device=x.device), x)


def test_convert_chains_keep_overflow(dev):
    """convert(convert(x: A -> B) -> C) -> convert(x: A -> C) only when A -> B is exact: a
    float32 value that overflows float16 stays inf, one that overflows in float32 arithmetic
    is not computed in float64."""
    torch_case(dev, lambda x: x.double().float(), X)  # f32 -> f64 -> f32: x
    torch_case(dev, lambda x: x.double().half(), X)  # f32 -> f16 directly: 3e38 -> inf
    torch_case(dev, lambda x: x.half().float(), X)  # lossy first step: must stay
    torch_case(dev, lambda x: x.half().float().half(), X)
    torch_case(dev, lambda x: (x * x).double(), X)  # f32 square overflows before the widening
    torch_case(dev, lambda x: (x * 2).double() / 2, X)
    h = torch.tensor([65504.0, -65504.0, float("nan"), float("inf"), -0.0, 0.0], dtype=torch.float16)
    torch_case(dev, lambda x: x.float().double().half(), h)
    torch_case(dev, lambda x: (x + x).float(), h)  # f16 65504 + 65504 is inf in eager


# --- folds: constants only, against eager ------------------------------------------------

def _t(f):
    return lambda *xs: f(*[torch.from_numpy(np.ascontiguousarray(x)) for x in xs]).numpy()


# Eager references: NumPy where the op is correctly rounded there (IEEE add, sub, mul, div,
# sqrt, fmod...; torch's CPU sqrt is 1 ulp off at 3e38, and its vectorized fmod computes
# a - trunc(a / b) * b, which overflows to NaN for fmod(3e38, 1e-30) where NumPy and the
# op give the exact remainder), torch for the functions NumPy lacks.
_UNARY = {
    "neg": np.negative, "abs": np.abs, "exp": np.exp, "log": np.log, "log1p": np.log1p,
    "expm1": np.expm1, "tanh": np.tanh, "logistic": _t(torch.sigmoid), "sqrt": np.sqrt,
    "rsqrt": _t(torch.rsqrt), "floor": np.floor, "ceil": np.ceil, "round": np.rint,
    "erf": _t(torch.erf), "sin": np.sin, "cos": np.cos, "is_finite": np.isfinite,
}
_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "rem": np.fmod,
    "pow": np.power, "atan2": np.arctan2,
}
# Correctly rounded in both: bit for bit. The others (evaluated in f64 and rounded once, as
# the module docstring of passes/canonicalize.py states) agree on NaN, infinities and zeros
# bit for bit and on finite values to 2 ulp.
_EXACT = {"neg", "abs", "sqrt", "floor", "ceil", "round", "is_finite", "add", "sub", "mul", "div", "rem"}


def _literal(a: np.ndarray) -> str:
    bits = a.view(np.uint32)
    return "dense<[" + ", ".join(f"0x{int(b):08X}" for b in bits) + f"]> : tensor<{a.size}xf32>"


def _fold(name: str, operands: list[np.ndarray], result_dtype: str) -> np.ndarray:
    n = operands[0].size
    t = f"tensor<{n}xf32>"
    rt = f"tensor<{n}x{result_dtype}>"
    consts = "\n".join(f'  %c{i} = "lazy.constant"() {{value = {_literal(o)}}} : () -> {t}' for i, o in enumerate(operands))
    uses = ", ".join(f"%c{i}" for i in range(len(operands)))
    body = consts + f'\n  %r = "lazy.{name}"({uses}) : ({", ".join([t] * len(operands))}) -> {rt}'
    text = f"func.func @main() -> {rt} {{\n{body}\n  return %r : {rt}\n}}"
    left = canonical_ops(text)
    assert f"lazy.{name}" not in left, f"{name} did not fold:\n{left}"
    (out,) = compiler.run_module(text, [])
    return out


def _no_subnormal(*arrays):
    """Subnormals are left unfolded on purpose (XLA's CPU backend flushes them): keep to normal values."""
    tiny = np.finfo(np.float32).tiny
    keep = np.ones(arrays[0].shape, bool)
    for a in arrays:
        with np.errstate(invalid="ignore"):
            keep &= ~((a != 0) & (np.abs(a) < tiny))
    return keep


def _assert_fold_like_eager(name, got, want):
    if name in _EXACT or want.dtype == np.bool_:
        assert_same_bits(got, want)
        return
    special = ~np.isfinite(want) | (want == 0)
    assert_same_bits(got[special], want[special])
    g, w = got[~special].astype(np.float64), want[~special].astype(np.float64)
    ulp = np.spacing(np.abs(want[~special])).astype(np.float64)
    assert np.all(np.abs(g - w) <= 2 * ulp), (name, got, want)


@pytest.mark.parametrize("name", sorted(_UNARY))
def test_fold_unary_nonfinite(name):
    x = SPECIALS
    with np.errstate(all="ignore"):
        want = _UNARY[name](x)
    keep = _no_subnormal(x, want.astype(np.float32)) if want.dtype != np.bool_ else np.ones(x.shape, bool)
    got = _fold(name, [x[keep]], "i1" if name == "is_finite" else "f32")
    _assert_fold_like_eager(name, got, want[keep])


@pytest.mark.parametrize("name", sorted(_BINARY))
def test_fold_binary_nonfinite(name):
    a, b = np.repeat(SPECIALS, SPECIALS.size), np.tile(SPECIALS, SPECIALS.size)
    with np.errstate(all="ignore"):
        want = _BINARY[name](a, b)
    keep = _no_subnormal(a, b, want)
    a, b, want = a[keep], b[keep], want[keep]
    # Non-splat constants fold up to FOLD_LIMIT elements: fold in pieces.
    from lazycore.passes.canonicalize import FOLD_LIMIT

    got = np.concatenate([_fold(name, [a[i:i + FOLD_LIMIT], b[i:i + FOLD_LIMIT]], "f32")
                          for i in range(0, a.size, FOLD_LIMIT)])
    _assert_fold_like_eager(name, got, want)
    if name == "mul":  # float32 overflow folds to inf, as eager: 3e38 * 2
        assert np.isinf(got[(a == np.float32(3e38)) & (b == 2)]).all()


def test_fold_through_torch_factories(dev):
    """Folds reached from the torch frontend (zeros and ones are constants): 0/0, 1/0, log 0, -0.0."""
    def f(z, o):
        return torch.stack([z / z, o / z, -o / z, torch.log(z), -z, -z + z, (-z) * o, torch.exp(-o / z), o * (o / z)])

    want = f(torch.zeros(3), torch.ones(3))
    got = f(torch.zeros(3, device=dev), torch.ones(3, device=dev)).cpu()
    assert_same_bits(got.numpy(), want.numpy())


# --- updates.py: slices, updates and selects move values ---------------------------------

def test_slice_of_slice_and_update_rules(dev):
    """slice of slice, update of update, update to select, select of select: no arithmetic,
    NaN and -0.0 arrive where eager puts them."""
    u = torch.from_numpy(np.resize(SPECIALS, (6, 7)).astype(np.float32))
    torch_case(dev, lambda x: x[1:][::2, 1:5][:, ::2] * 1, u)

    def stencil(x):
        x = x.clone()
        x[1:-1, 1:-1] = x[:-2, 1:-1] * 0.5 + x[2:, 1:-1] * 0.5 + 0.0 * x[1:-1, :-2]
        return x

    torch_case(dev, stencil, u)

    def nested(x):
        y = x.clone()
        y[1:-1, 1:-1][1:3, 1:3] = -0.0
        return y

    torch_case(dev, nested, u)
    p = torch.from_numpy(np.resize(np.array([True, False, True]), (6, 7)))
    torch_case(dev, lambda x, q: torch.where(p.to(x.device), x, torch.where(p.to(x.device), -x, x * 0)), u, u)


def test_numpy_frontend_add_zero_and_overflow():
    """The NumPy frontend goes through the same rules: x + 0.0, x * 1, x - (-0.0), f32 overflow."""
    x = SPECIALS
    lx = lnp.asarray(x)
    with np.errstate(all="ignore"):
        for f in (lambda v: v + np.float32(0.0), lambda v: v * np.float32(1.0), lambda v: v - np.float32(-0.0),
                  lambda v: v * v, lambda v: (v * np.float32(2.0)) * np.float32(0.5)):
            assert_same_bits(np.asarray(f(lx)), f(x))


# --- lazy-roll-loops: identical layers become one loop ------------------------------------

def test_rolled_layers_keep_nonfinite_values(clean_runtime):
    """A stack of identical layers rolled into a while loop computes each layer as eager does:
    NaN, Inf, -0.0, and a float32 product that overflows to Inf at the third layer."""
    from lazycore.ir.config import override
    from lazycore.observe.testing import capture

    x = np.resize(SPECIALS, (4, 7)).astype(np.float32)
    ws = [np.full((4, 7), 2.0, np.float32) for _ in range(6)]
    ws[1][0, :4] = -0.0  # inf * -0.0 is NaN, 1.5 * -0.0 is -0.0
    bs = [np.resize(np.array([0.0, -0.0, 1.5, -3.0, -0.0], np.float32), (4, 7)) for _ in range(6)]

    def forward(xp, h, ws, bs):
        for w, b in zip(ws, bs):
            h = xp.maximum(h * w, b) - b
        return h

    with np.errstate(all="ignore"):
        want = forward(np, x, ws, bs)
    args = (lnp.asarray(x), [lnp.asarray(w) for w in ws], [lnp.asarray(b) for b in bs])
    with override(roll_loops=True), capture() as cap:
        got = np.asarray(forward(lnp, *args))
    assert cap.text("stablehlo").count("stablehlo.while") == 1  # the rule fired
    assert np.isinf(want).any() and np.isnan(want).any()
    assert_same_bits(got, want)


# --- XLA's own algebraic simplifier (algsimp): rewrites the pipeline fences -----------------

# XLA's algebraic simplifier (AlgebraicSimplifierVisitor::HandleDivide) rewrites A / (B / C) to
# (A * C) / B, (A / B) / C to A / (B * C), exp(A) / exp(B) to exp(A - B) and A / sqrt(B) to
# A * rsqrt(B): products that overflow, and quotients rounded twice. lazy-keep-roundings fences
# such operands (passes/keep_roundings.py), so the divide is eager's.
_DIVISIONS = {
    "a/(b/c) overflow": lambda a, b, c: a / (b / c),  # eager 3e38, XLA (a * c) / b = inf
    "(a/b)/(c/b)": lambda a, b, c: (a / b) / (c / b),  # eager 1.0, XLA NaN
    "exp(a)/exp(b)": lambda a, b, c: torch.exp(a * 1e-36) / torch.exp(b * 1e-36),  # eager inf / inf = NaN
}
# A / Broadcast(B)'s rounding (x / 3.0: 1 ulp off in a third of the values) the CPU compile
# path undoes: lazy-to-stablehlo{division=exact}, tests/test_exact_division.py.


@pytest.mark.parametrize("name", sorted(_DIVISIONS))
def test_division_as_eager_computes_it(dev, name):
    a = torch.tensor([3e38, 1e10, 2.0])  # no subnormal on the way (XLA's CPU backend flushes them)
    b = torch.tensor([3e38, 1e20, 1e-30])
    torch_case(dev, _DIVISIONS[name], a, b, b)
