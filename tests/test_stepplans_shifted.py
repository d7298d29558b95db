"""Step plans recalled at other sizes (lazycore.runtime.stepplans.alike): a
padded step whose nodes differ from the step before in their padded sizes
alone (a sequence grown by one, as generation's tokens) runs that step's
program without walking its graph; anything else that differs is walked."""

import numpy as np
import pytest

import lazycore as lc
from lazycore.runtime import barrier, buckets

pytestmark = pytest.mark.usefixtures("clean_runtime")


@pytest.fixture
def walks(monkeypatch):
    """How many barrier walks were made."""
    made = [0]
    real = barrier.Walk

    class Counted(real):
        def __init__(self, outputs):
            made[0] += 1
            super().__init__(outputs)

    monkeypatch.setattr(barrier, "Walk", Counted)
    return made


def grow(steps: int, extra=None, walks=None):
    """A (2, n) sequence grown by one column a step, padded in one bucket of
    16, with its row sums; ``extra(x, k)``: more outputs of step ``k``.
    Returns per step (the sequence, its sums, the extras) as NumPy, and the
    walks made from the third step on."""
    x = lc.dynamic(lc.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3)), 1)
    out, late = [], 0
    with buckets.fixed(16):
        for k in range(steps):
            before = walks[0]
            col = lc.from_numpy(np.full((2, 1), k + 1.5, np.float32))
            x = lc.apply("concatenate", x, col, dim=1)
            sums = lc.apply("reduce_sum", x, dims=(1,))
            more = extra(x, k) if extra is not None else []
            lc.mark_step()
            if k >= 2:
                late += walks[0] - before
            out.append((lc.to_numpy(x), lc.to_numpy(sums), [lc.to_numpy(m) for m in more]))
    return out, late


def expected(steps: int):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = []
    for k in range(steps):
        x = np.concatenate([x, np.full((2, 1), k + 1.5, np.float32)], axis=1)
        out.append((x, x.sum(axis=1)))
    return out


def test_a_grown_step_recalls_the_step_before_it(walks):
    got, late = grow(8, walks=walks)
    for (x, sums, _), (wx, wsums) in zip(got, expected(8)):
        np.testing.assert_array_equal(x, wx)
        np.testing.assert_allclose(sums, wsums, rtol=1e-6)
    assert late == 0  # every step from the third on: the plan of the one before, shifted


def test_a_constant_read_as_a_size_is_walked_when_the_size_moves(walks):
    # the second step (lengths 4 and 5, walked) holds an integer constant
    # 5, which its program takes as the length 5's parameter; the next
    # steps hold the same 5, not their length: walked, and their value
    # adds 5, not the length. (From the second step on: a walk that met the
    # 5 while no length was 5 would hold it as a number from then on,
    # runtime/padding.py's LITERALS)
    def extra(x, k):
        if k == 0:
            return []
        three = lc.scalar(3, dtype="i32", fold=False)
        return [lc.apply("add", lc.apply("constant", value=np.asarray(5, np.int32)), three)]

    got, late = grow(6, extra, walks)
    assert [int(m[0]) for _, _, m in got[1:]] == [8] * 5
    for (x, sums, _), (wx, wsums) in zip(got, expected(6)):
        np.testing.assert_array_equal(x, wx)
        np.testing.assert_allclose(sums, wsums, rtol=1e-6)
    # the third and fourth steps walk (the programs before them took 5 as a
    # length); from the fifth on, the fourth's program holds 5 as a literal
    assert late == 2


def test_a_value_of_a_fixed_size_equal_to_the_length_is_walked(walks):
    # ones of shape (2, 5), made without inputs, are widened in the second
    # step, where 5 is the grown length; the steps after it, where the
    # length moved on, must not cut them at their length. (Made from the
    # second step on: a walk that met them while the length was 4 would
    # read them unwidened at 5, runtime/padding.py's READINGS)
    def extra(x, k):
        if k == 0:
            return []
        one = lc.apply("constant", value=np.asarray(1.0, np.float32))
        return [lc.apply("broadcast_in_dim", one, dims=(), shape=(2, 5))]

    got, late = grow(6, extra, walks)
    for _, _, (ones,) in got[1:]:
        np.testing.assert_array_equal(ones, np.ones((2, 5), np.float32))
    for (x, sums, _), (wx, wsums) in zip(got, expected(6)):
        np.testing.assert_array_equal(x, wx)
    assert late > 0


def test_a_mean_over_the_length_is_recalled(walks):
    # the mean's divisor, a constant equal to the length, is read from the
    # valid size: a step one longer has the same program (it was walked for
    # its divisor's new value)
    def extra(x, k):
        n = lc.apply("constant", value=np.asarray(float(k + 4), np.float32))
        return [lc.apply("div", lc.apply("reduce_sum", x, dims=(1,)),
                         lc.apply("broadcast_in_dim", n, dims=(), shape=(2,)))]

    got, late = grow(8, extra, walks)
    for (x, _, (means,)), (wx, _) in zip(got, expected(8)):
        np.testing.assert_allclose(means, wx.mean(axis=1), rtol=1e-6)
    assert late == 0


def test_rows_looked_up_whole_along_the_length_are_recalled(walks):
    # (a gather's window sizes hold the length, as its result's type does)
    def extra(x, k):
        rows = lc.from_numpy(np.array([1, 0], np.int64))
        n = 3 + k + 1
        return [lc.apply("gather", x, rows, offset_dims=(1,), collapsed_slice_dims=(0,), operand_batching_dims=(),
                         start_indices_batching_dims=(), start_index_map=(0,), index_vector_dim=1,
                         slice_sizes=(1, n), indices_are_sorted=False)]

    got, late = grow(8, extra, walks)
    for (x, _, (swapped,)), (wx, _) in zip(got, expected(8)):
        np.testing.assert_array_equal(swapped, wx[::-1])
    assert late == 0


def test_a_dropped_value_of_the_length_does_not_walk(walks):
    # (a value made from the sequence and dropped, as an LSTM's final cell
    # state nobody reads: in the step's log, outside its program)
    def extra(x, k):
        lc.apply("mul", x, x)
        return []

    got, late = grow(8, extra, walks)
    for (x, sums, _), (wx, wsums) in zip(got, expected(8)):
        np.testing.assert_array_equal(x, wx)
    assert late == 0


def test_a_mean_divisor_another_op_reads_as_a_number_is_walked(walks):
    # (the divisor read from the valid size where the mean uses it, the same
    # constant node baked where a product uses it: a step one longer must
    # not reuse that program, whose product would still be by the old length)
    def extra(x, k):
        n = lc.apply("constant", value=np.asarray(float(k + 4), np.float32))
        spread = lc.apply("broadcast_in_dim", n, dims=(), shape=(2,))
        sums = lc.apply("reduce_sum", x, dims=(1,))
        return [lc.apply("div", sums, spread), lc.apply("mul", sums, spread)]

    got, late = grow(8, extra, walks)
    for k, ((x, _, (means, scaled)), (wx, _)) in enumerate(zip(got, expected(8))):
        np.testing.assert_allclose(means, wx.mean(axis=1), rtol=1e-6)
        np.testing.assert_allclose(scaled, wx.sum(axis=1) * (k + 4), rtol=1e-6)
