"""Partial updates (passes/updates.py): the slice and update chains that
lazy-canonicalize flattens, and lazy-update-to-select, all checked by running
each program with and without them on random data, and end to end through
the frontends against eager NumPy and torch."""

import numpy as np
import pytest

from lazycore.runtime import compiler

PLAIN = "lazy-to-stablehlo"


def run_both(text: str, args: list, pipeline: str):
    """(results with ``pipeline``, results lowered as written)."""
    return compiler.run_module(text, args, pipeline=pipeline), compiler.run_module(text, args, pipeline=PLAIN)


def lowered(text: str, pipeline: str) -> str:
    module = compiler.parse(text)
    compiler.lower(module, pipeline)
    return str(module)


def _slices(rng, shape):
    """Random (start, limit, strides) for a slice of ``shape`` (empty dims too)."""
    start, limit, strides = [], [], []
    for n in shape:
        b = int(rng.integers(0, n + 1))
        e = int(rng.integers(b, n + 1))
        start.append(b)
        limit.append(e)
        strides.append(int(rng.integers(1, 4)))
    out = tuple(-(-(e - b) // s) for b, e, s in zip(start, limit, strides))
    return start, limit, strides, out


def _slice_op(name, src, start, limit, strides, src_shape, out_shape):
    arr = lambda v: f"array<i64: {', '.join(map(str, v))}>"  # noqa: E731
    t = lambda s: f"tensor<{'x'.join(map(str, s))}xf32>"  # noqa: E731
    return (f'  {name} = "lazy.slice"({src}) {{start = {arr(start)}, limit = {arr(limit)}, strides = {arr(strides)}}}'
            f" : ({t(src_shape)}) -> {t(out_shape)}")


@pytest.mark.parametrize("seed", range(12))
def test_slice_of_slice_selects_the_same_elements(seed):
    rng = np.random.default_rng(seed)
    shape = (int(rng.integers(1, 9)), int(rng.integers(1, 9)))
    s1 = _slices(rng, shape)
    s2 = _slices(rng, s1[3])
    text = "\n".join([
        f"func.func @main(%x: tensor<{shape[0]}x{shape[1]}xf32>) -> tensor<{s2[3][0]}x{s2[3][1]}xf32> {{",
        _slice_op("%0", "%x", *s1[:3], shape, s1[3]),
        _slice_op("%1", "%0", *s2[:3], s1[3], s2[3]),
        f"  return %1 : tensor<{s2[3][0]}x{s2[3][1]}xf32>",
        "}",
    ])
    x = rng.standard_normal(shape).astype(np.float32)
    (got,), (want,) = run_both(text, [x], "lazy-canonicalize,lazy-to-stablehlo")
    np.testing.assert_array_equal(got, want)
    expected = x[tuple(slice(b, e, s) for b, e, s in zip(*s1[:3]))][tuple(slice(b, e, s) for b, e, s in zip(*s2[:3]))]
    np.testing.assert_array_equal(got, expected)
    assert lowered(text, "lazy-canonicalize").count("lazy.slice") == 1


UPDATE_OF_UPDATE = """
func.func @main(%x: tensor<6x7xf32>, %v: tensor<3x3xf32>) -> tensor<6x7xf32> {{
  %r = "lazy.constant"() {{value = dense<{row}> : tensor<i64>}} : () -> tensor<i64>
  %c = "lazy.constant"() {{value = dense<{col}> : tensor<i64>}} : () -> tensor<i64>
  %z = "lazy.constant"() {{value = dense<0> : tensor<i64>}} : () -> tensor<i64>
  %band = "lazy.slice"(%x) {{start = array<i64: {band}, 0>, limit = array<i64: {band_end}, 7>, strides = array<i64: 1, 1>}} : (tensor<6x7xf32>) -> tensor<4x7xf32>
  %in = "lazy.dynamic_update_slice"(%band, %v, %z, %c) {{operandSegmentSizes = array<i32: 1, 1, 2>}} : (tensor<4x7xf32>, tensor<3x3xf32>, tensor<i64>, tensor<i64>) -> tensor<4x7xf32>
  %out = "lazy.dynamic_update_slice"(%x, %in, %r, %z) {{operandSegmentSizes = array<i32: 1, 1, 2>}} : (tensor<6x7xf32>, tensor<4x7xf32>, tensor<i64>, tensor<i64>) -> tensor<6x7xf32>
  return %out : tensor<6x7xf32>
}}"""


@pytest.mark.parametrize("row,col,band", [(1, 2, 1), (2, 4, 2), (5, 9, 2), (-3, -1, 0), (1, 2, 2)])
def test_update_of_update_writes_the_same_elements(row, col, band):
    """Out-of-range starts are clamped by XLA; the flattened update clamps the same way.
    The last case reads one band and writes another: it must stay as written."""
    text = UPDATE_OF_UPDATE.format(row=row, col=col, band=band, band_end=band + 4)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 7)).astype(np.float32)
    v = rng.standard_normal((3, 3)).astype(np.float32)
    (got,), (want,) = run_both(text, [x, v], "lazy-canonicalize,lazy-to-stablehlo")
    np.testing.assert_array_equal(got, want)
    flattened = lowered(text, "lazy-canonicalize").count("lazy.dynamic_update_slice") == 1
    assert flattened == (band == min(max(row, 0), 2))


STENCIL = """
func.func @main(%x: tensor<{n}x{n}xf32>, %a: tensor<f32>) -> tensor<{n}x{n}xf32> {{
  %c1 = "lazy.constant"() {{value = dense<1> : tensor<i64>}} : () -> tensor<i64>
  %up = "lazy.slice"(%x) {{start = array<i64: 0, 1>, limit = array<i64: {m}, {n1}>, strides = array<i64: 1, 1>}} : (tensor<{n}x{n}xf32>) -> tensor<{m}x{m}xf32>
  %down = "lazy.slice"(%x) {{start = array<i64: 2, 1>, limit = array<i64: {n}, {n1}>, strides = array<i64: 1, 1>}} : (tensor<{n}x{n}xf32>) -> tensor<{m}x{m}xf32>
  %ab = "lazy.broadcast_in_dim"(%a) {{dims = array<i64>, shape = array<i64: {m}, {m}>}} : (tensor<f32>) -> tensor<{m}x{m}xf32>
  %s = "lazy.add"(%up, %down) : (tensor<{m}x{m}xf32>, tensor<{m}x{m}xf32>) -> tensor<{m}x{m}xf32>
  %v = "lazy.mul"(%s, %ab) : (tensor<{m}x{m}xf32>, tensor<{m}x{m}xf32>) -> tensor<{m}x{m}xf32>
  %x1 = "lazy.dynamic_update_slice"(%x, %v, %c1, %c1) {{operandSegmentSizes = array<i32: 1, 1, 2>}} : (tensor<{n}x{n}xf32>, tensor<{m}x{m}xf32>, tensor<i64>, tensor<i64>) -> tensor<{n}x{n}xf32>
  %up2 = "lazy.slice"(%x1) {{start = array<i64: 0, 1>, limit = array<i64: {m}, {n1}>, strides = array<i64: 1, 1>}} : (tensor<{n}x{n}xf32>) -> tensor<{m}x{m}xf32>
  %down2 = "lazy.slice"(%x1) {{start = array<i64: 2, 1>, limit = array<i64: {n}, {n1}>, strides = array<i64: 1, 1>}} : (tensor<{n}x{n}xf32>) -> tensor<{m}x{m}xf32>
  %s2 = "lazy.add"(%up2, %down2) : (tensor<{m}x{m}xf32>, tensor<{m}x{m}xf32>) -> tensor<{m}x{m}xf32>
  %v2 = "lazy.mul"(%s2, %ab) : (tensor<{m}x{m}xf32>, tensor<{m}x{m}xf32>) -> tensor<{m}x{m}xf32>
  %x2 = "lazy.dynamic_update_slice"(%x1, %v2, %c1, %c1) {{operandSegmentSizes = array<i32: 1, 1, 2>}} : (tensor<{n}x{n}xf32>, tensor<{m}x{m}xf32>, tensor<i64>, tensor<i64>) -> tensor<{n}x{n}xf32>
  return %x2 : tensor<{n}x{n}xf32>
}}"""


@pytest.mark.parametrize("n", [3, 8, 33])
def test_self_reading_updates_become_selects_with_the_same_values(n):
    text = STENCIL.format(n=n, m=n - 2, n1=n - 1)
    rng = np.random.default_rng(n)
    x = rng.standard_normal((n, n)).astype(np.float32)
    a = np.float32(0.25)
    (got,), (want,) = run_both(text, [x, a], "lazy-update-to-select,lazy-to-stablehlo")
    np.testing.assert_array_equal(got, want)
    ref = x.copy()
    for _ in range(2):
        ref[1:-1, 1:-1] = (ref[:-2, 1:-1] + ref[2:, 1:-1]) * a
    np.testing.assert_array_equal(got, ref)
    text_after = lowered(text, "lazy-update-to-select")
    if n == 3:  # a 1x1 interior is under half of the array: written in place
        assert text_after.count("lazy.dynamic_update_slice") == 2 and "lazy.select" not in text_after
        return
    assert "lazy.dynamic_update_slice" not in text_after
    # the second select's outside reads x itself, not the first select
    assert text_after.count('"lazy.select"') == 2 and text_after.count(", %arg0) :") == 2


@pytest.mark.usefixtures("clean_runtime")  # zeroed counters: the donation seen is this test's
def test_default_pipeline_with_donation_keeps_a_stencil_loop_exact():
    """Ten heat steps per program through lazycore.numpy, the update donated
    in place, equal eager NumPy."""
    import lazycore
    import lazycore.numpy as lnp

    def steps(np_, u, k):
        for _ in range(k):
            inner = u[1:-1, 1:-1]
            lap = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * inner
            u[1:-1, 1:-1] = inner + 0.2 * lap
        return u

    rng = np.random.default_rng(1)
    start = rng.standard_normal((40, 40)).astype(np.float32)
    ref = steps(np, start.copy(), 30)
    u = lnp.asarray(start)
    for _ in range(3):
        u = steps(lnp, u, 10)
        lazycore.mark_step()
    np.testing.assert_allclose(np.asarray(u), ref, rtol=1e-5, atol=1e-6)
    assert lazycore.metrics.counters()["donated_buffers"] > 0


def test_torch_slice_assignment_through_views_matches_eager():
    import torch

    import lazycore.torch as ltorch

    dev = ltorch.device()
    x = torch.randn(16, 16)
    lx = x.to(dev)
    for t in (x, lx):
        for _ in range(4):
            t[1:-1, 2:-1] = t[:-2, 2:-1] * 0.5 + t[2:, 1:-2]
            t[::2, 1:][1:, ::3] += 1.0  # a strided view of a view, written in place
    torch.testing.assert_close(lx.cpu(), x, rtol=0, atol=0)


SELECTS = """
func.func @main(%p: tensor<5xi1>, %q: tensor<5xi1>, %a: tensor<5xf32>, %b: tensor<5xf32>, %c: tensor<5xf32>) -> (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>) {
  %in_false = "lazy.select"(%p, %b, %c) : (tensor<5xi1>, tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  %r0 = "lazy.select"(%p, %a, %in_false) : (tensor<5xi1>, tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  %in_true = "lazy.select"(%p, %a, %b) : (tensor<5xi1>, tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  %r1 = "lazy.select"(%p, %in_true, %c) : (tensor<5xi1>, tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  %other = "lazy.select"(%q, %b, %c) : (tensor<5xi1>, tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  %r2 = "lazy.select"(%p, %a, %other) : (tensor<5xi1>, tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  return %r0, %r1, %r2 : tensor<5xf32>, tensor<5xf32>, tensor<5xf32>
}"""


def test_select_of_select_under_one_predicate():
    rng = np.random.default_rng(3)
    p, q = np.array([1, 0, 1, 0, 1], bool), np.array([1, 1, 0, 0, 1], bool)
    a, b, c = (rng.standard_normal(5).astype(np.float32) for _ in range(3))
    got, want = run_both(SELECTS, [p, q, a, b, c], "lazy-canonicalize,lazy-to-stablehlo")
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    left = lowered(SELECTS, "lazy-canonicalize,cse")
    assert left.count('"lazy.select"') == 3  # r0 and r1 both become select(p, a, c), cse makes them one; r2 and its inner select stay
