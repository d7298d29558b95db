"""Shape buckets: marked input dimensions padded to a bucket, masked, one program per bucket."""

import numpy as np
import pytest

import lazycore as lc
import lazycore.numpy as lnp
from lazycore.ir.config import configure, override
from lazycore.observe import debug, metrics
from lazycore.runtime import buckets

pytestmark = pytest.mark.usefixtures("clean_runtime")


@pytest.fixture
def debugging(capsys):
    """debug=1; yields a function returning the new ``buckets:`` lines on stderr."""
    debug.reset()
    capsys.readouterr()
    with override(debug=1):
        yield lambda: [ln for ln in capsys.readouterr().err.splitlines() if "buckets:" in ln]
    debug.reset()


def compiles() -> int:
    return metrics.counters()["compiles"]


def pipeline(a):
    """Reductions and contractions over axis 0, the one that varies."""
    e = lnp.exp(a - a.max(axis=0))
    soft = e / e.sum(axis=0)
    gram = a.T @ a
    return [a.sum(axis=0), a.mean(axis=0), a.min(axis=0), a.argmax(axis=0), soft, gram, (a * a).sum()]


def expected(h):
    e = np.exp(h - h.max(axis=0))
    return [h.sum(axis=0), h.mean(axis=0), h.min(axis=0), h.argmax(axis=0), e / e.sum(axis=0), h.T @ h, (h * h).sum()]


def test_numpy_reductions_over_sizes_of_one_bucket_compile_once(rng):
    for n in (17, 23, 30, 32):
        h = rng.standard_normal((n, 6)).astype(np.float32)
        got = pipeline(lnp.dynamic(lnp.asarray(h), 0))
        for g, w in zip(got, expected(h.astype(np.float64))):
            g = np.asarray(g)
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
    assert compiles() == 1  # 17..32: the bucket of 32


def test_padded_outputs_are_cut_and_feed_the_next_step(rng):
    outs = []
    for n in (5, 7):
        h = rng.standard_normal((n, 3)).astype(np.float32)
        y = lnp.dynamic(lnp.asarray(h), 0) * 2 + 1  # keeps the padded dimension
        lc.mark_step()
        z = (y * y).sum(axis=0)  # the cut result as an input of the next program
        np.testing.assert_array_equal(np.asarray(y), h * 2 + 1)
        np.testing.assert_allclose(np.asarray(z), ((h * 2 + 1) ** 2).sum(axis=0), rtol=1e-6)
        outs.append(n)
    assert metrics.counters()["compiles"] <= 4  # one bucketed program, one for z (per size)


def test_reshape_merging_the_padded_dimension_is_masked_exactly(rng):
    # (batch, seq, d) -> (batch * seq, d) @ w -> (batch, seq, k), summed over seq: as torch's linear on 3-d input
    w = rng.standard_normal((4, 5)).astype(np.float32)
    lw = lnp.asarray(w)
    for t in (9, 12, 14):
        h = rng.standard_normal((2, t, 4)).astype(np.float32)
        a = lnp.dynamic(lnp.asarray(h), 1)
        z = a.reshape(2 * t, 4) @ lw
        y = z.reshape(2, t, 5)
        got = np.asarray(np.tanh(y).sum(axis=1))
        want = np.tanh(h.astype(np.float64).reshape(2 * t, 4) @ w).reshape(2, t, 5).sum(axis=1)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.asarray(z), h.reshape(2 * t, 4) @ w, rtol=1e-5, atol=1e-6)  # cut on the host
        # y's storage, the (batch * seq, k) product, came back padded in that merged layout; y (a
        # reshape of it, its base's size) is read as NumPy has it, from the host copy of that base
        np.testing.assert_allclose(np.asarray(y), (h.reshape(2 * t, 4) @ w).reshape(2, t, 5), rtol=1e-5, atol=1e-6)
    assert compiles() == 1  # the sum's program, one for all three lengths (y's read runs none)


def test_an_op_that_mixes_padded_positions_falls_back_exactly(rng, debugging):
    sizes = (9, 11)
    for n in sizes:
        h = rng.standard_normal((n, 3)).astype(np.float32)
        a = lnp.dynamic(lnp.asarray(h), 0)
        got = np.asarray(lnp.cumsum(a, axis=0).sum(axis=0))  # a cumulative op along the padded dimension
        np.testing.assert_allclose(got, np.cumsum(h, axis=0).sum(axis=0), rtol=1e-5, atol=1e-5)
    assert compiles() == len(sizes)  # each size its own program, as without the mark
    lines = debugging()
    assert len(lines) == len(sizes) and all("not padded" in ln and "mixes positions along a padded dimension" in ln
                                            for ln in lines), lines


def test_slices_inside_the_valid_part_are_exact(rng):
    """``a[1:] - a[:-1]`` of a padded dimension: ``a[:-1]`` lies inside the
    valid part and reads the padded value's positions (refused before, see
    tests/torch/test_padded_parts.py); its size is ``n - 1``, so each size
    still has its own program."""
    sizes = (9, 11)
    for n in sizes:
        h = rng.standard_normal((n, 3)).astype(np.float32)
        a = lnp.dynamic(lnp.asarray(h), 0)
        got = np.asarray((a[1:] - a[:-1]).sum(axis=0))
        np.testing.assert_allclose(got, (h[1:] - h[:-1]).sum(axis=0), rtol=1e-6, atol=1e-6)
    assert compiles() == len(sizes)


def test_buckets_setting(rng):
    assert buckets.bucket(33) == 64 and buckets.bucket(32) == 32
    with override(buckets="16,48"):
        assert lc.config.settings.buckets == (16, 48)
        assert (buckets.bucket(17), buckets.bucket(48), buckets.bucket(49)) == (48, 48, None)
    with override(buckets="off"):
        for n in (5, 6):
            h = rng.standard_normal((n,)).astype(np.float32)
            assert np.asarray(lnp.dynamic(lnp.asarray(h), 0).sum()) == pytest.approx(h.sum(), rel=1e-6)
        assert compiles() == 2  # marks ignored
    with pytest.raises(ValueError):
        configure(buckets="16,x")


def test_learned_policy_marks_a_dimension_that_changed_twice(rng, debugging):
    with override(learn_buckets=True):
        for n in (10, 11, 12, 13, 14):
            h = rng.standard_normal((n, 4)).astype(np.float32)
            a = lnp.asarray(h)  # not marked
            np.testing.assert_allclose(np.asarray((a * 3).sum(axis=0)), (h * 3).sum(axis=0), rtol=1e-6, atol=1e-6)
    # 10 and 11 at their own sizes; 12 made the third size: marked, and 12..14 share the bucket of 16
    assert compiles() == 3
    lines = debugging()
    assert len(lines) == 1 and "has had sizes 10, 11, 12 along dim 0: marked dynamic" in lines[0], lines
    assert "test_buckets.py" in lines[0]  # the user's line


def test_learned_policy_is_off_by_default(rng):
    assert not lc.config.settings.learn_buckets
    for n in (10, 11, 12, 13):
        np.asarray((lnp.asarray(np.ones((n, 4), np.float32)) * 3).sum(axis=0))
    assert compiles() == 4


def test_dynamic_refuses_what_it_cannot_mark():
    a = lnp.asarray(np.ones((3, 4), np.float32))
    with pytest.raises(IndexError):
        lnp.dynamic(a, 2)
    with pytest.raises(ValueError, match="still a computation"):
        lnp.dynamic(a + 1, 0)
    with pytest.raises(ValueError, match="view"):
        lnp.dynamic(a[1:], 0)
    with pytest.raises(TypeError):
        lc.dynamic(np.ones(3), 0)
    assert lnp.dynamic(a, -1) is a


W = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
# name -> (program on a (n, 4) array marked along axis 0, whether it is padded: one program for two sizes)
PROGRAMS = {
    "var": (lambda x, m: x.var(axis=0), True),
    "argmin": (lambda x, m: x.argmin(axis=0), True),
    "logsumexp": (lambda x, m: m.log(m.exp(x).sum(axis=0)), True),
    "matmul": (lambda x, m: (x @ (W if m is np else lnp.asarray(W))).sum(axis=0), True),
    "flatten": (lambda x, m: x.T.reshape(-1).sum(), True),
    "prod": (lambda x, m: (x * 0.5 + 1).prod(axis=0), True),
    "all": (lambda x, m: (x > -1.5).all(axis=0), True),
    "log_of_padding": (lambda x, m: m.log(x * x).sum(axis=0), True),  # log(0) = -inf past the valid size
    "take_columns": (lambda x, m: m.take(x, [0, 2], axis=1).sum(axis=0), True),
    "cumsum": (lambda x, m: m.cumsum(x, axis=0), False),
    "flip": (lambda x, m: x[::-1].sum(axis=0), False),
    "concatenate_along_it": (lambda x, m: m.concatenate([x, x * 2], axis=0).sum(axis=0), True),  # (each at the valid sizes before it)
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_programs_agree_with_numpy_padded_or_not(name, rng):
    program, padded = PROGRAMS[name]
    for n in (5, 7):
        h = rng.standard_normal((n, 4)).astype(np.float32)
        got = np.asarray(program(lnp.dynamic(lnp.asarray(h), 0), lnp))
        want = np.asarray(program(h.astype(np.float64), np))
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert compiles() == (1 if padded else 2)


def test_a_padded_program_failing_while_it_runs_settles_its_results_exactly(restore_lowerings):
    """The failed program's outputs are computed again unpadded; a padded
    output's result is laid out again as padded, so its cut reads right."""
    from lazycore.passes import register_lowering
    from test_barrier_failures import FAILS_TO_RUN

    register_lowering("sign", FAILS_TO_RUN)
    n = 500  # the bucket of 512: not cheap, so PJRT runs it on its thread pool and the error comes later
    h = np.linspace(0, 1, n * 4, dtype=np.float32).reshape(n, 4)
    a = lnp.dynamic(lnp.asarray(h), 0)
    x = lc.apply("sign", lnp.asarray(np.ones((n, n), np.float32)).__lazycore_value__())  # fails while running
    y = a * 2  # padded: comes back cut
    lc.mark_step()
    lc.mark_step(wait=True)  # finds the failure, settles it
    np.testing.assert_array_equal(np.asarray(y), h * 2)
    with pytest.raises(lc.BarrierError):
        lc.to_numpy(x)


def test_the_buffer_of_a_padded_result_is_its_own(rng):
    h = rng.standard_normal((5, 3)).astype(np.float32)
    y = lc.apply("mul", lc.dynamic(lc.from_numpy(h), 0), lc.from_numpy(np.full((5, 3), 2, np.float32)))
    lc.mark_step()
    assert y.pending  # a cut of the padded (8, 3) result
    buffer = lc.to_buffer(y)  # the slice computed by a program of its own
    assert tuple(buffer.shape) == (5, 3) and not y.pending
    np.testing.assert_array_equal(np.asarray(buffer), h * 2)
