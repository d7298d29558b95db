"""lazy.rng_bit_generator through the real stack: reproducible, state-driven, uniform."""

import numpy as np
import pytest

from lazycore.runtime import compiler
from lazycore.dialect import ShapeError, TensorType, infer

# (algorithm, state words) for every accepted combination
ALGORITHMS = [("three_fry", 2), ("philox", 2), ("philox", 3), ("default", 2), ("default", 3)]


def generator(algorithm, words, shape, dtype):
    """A compiled program: state -> (new_state, bits)."""
    state_t = f"tensor<{words}xui64>"
    bits_t = str(TensorType(tuple(shape), dtype))
    text = f"""
func.func @main(%s: {state_t}) -> ({state_t}, {bits_t}) {{
  %0:2 = "lazy.rng_bit_generator"(%s) {{algorithm = "{algorithm}"}} : ({state_t}) -> ({state_t}, {bits_t})
  return %0#0, %0#1 : {state_t}, {bits_t}
}}"""
    exe = compiler.compile_module(text)
    return lambda state: exe.run_numpy([np.asarray(state, dtype=np.uint64)])


@pytest.mark.parametrize("algorithm,words", ALGORITHMS)
@pytest.mark.parametrize("dtype,np_dtype", [("ui8", np.uint8), ("ui32", np.uint32), ("ui64", np.uint64)])
def test_shape_dtype_and_determinism(algorithm, words, dtype, np_dtype):
    run = generator(algorithm, words, (3, 5), dtype)
    state = np.arange(7, 7 + words, dtype=np.uint64)
    new_state, bits = run(state)
    assert bits.shape == (3, 5) and bits.dtype == np_dtype
    assert new_state.shape == (words,) and new_state.dtype == np.uint64
    again_state, again = run(state)
    np.testing.assert_array_equal(again, bits)
    np.testing.assert_array_equal(again_state, new_state)


@pytest.mark.parametrize("algorithm,words", ALGORITHMS)
def test_state_drives_the_stream(algorithm, words):
    run = generator(algorithm, words, (64,), "ui32")
    state = np.full(words, 42, dtype=np.uint64)
    new_state, first = run(state)
    assert not np.array_equal(new_state, state)
    _, second = run(new_state)  # threading the state on gives fresh bits
    other = state.copy()
    other[0] += 1  # another seed gives another stream
    _, third = run(other)
    for a, b in [(first, second), (first, third), (second, third)]:
        assert np.mean(a == b) < 0.05


@pytest.mark.parametrize("algorithm,words", [("three_fry", 2), ("philox", 2)])
def test_bits_look_uniform(algorithm, words):
    n = 100_000
    _, bits = generator(algorithm, words, (n,), "ui32")(np.array([1234, 5678][:words], dtype=np.uint64))
    # Floats in [0, 1) from the top 24 bits, as frontends build uniform().
    u = (bits >> 8).astype(np.float64) * 2.0**-24
    assert abs(u.mean() - 0.5) < 0.005  # std of the mean is 0.29 / sqrt(n) ~ 0.0009
    assert abs(u.var() - 1 / 12) < 0.002
    # Chi-square over 64 buckets (63 degrees of freedom): P(chi2 > 120) ~ 1e-5.
    counts = np.bincount((u * 64).astype(np.int64), minlength=64)
    expected = n / 64
    assert ((counts - expected) ** 2 / expected).sum() < 120
    # Every bit position, low ones included, is set about half the time.
    per_bit = ((bits[:, None] >> np.arange(32, dtype=np.uint32)) & 1).mean(axis=0)
    assert np.all(np.abs(per_bit - 0.5) < 0.01)


@pytest.mark.parametrize("state,algorithm,message", [
    (TensorType((3,), "ui64"), "three_fry", r"state must be tensor<2xui64> for algorithm 'three_fry'"),
    (TensorType((4,), "ui64"), "philox", r"state must be tensor<2xui64> or tensor<3xui64>"),
    (TensorType((2,), "i64"), "philox", r"state must be"),
    (TensorType((2,), "ui64"), "mersenne", r"algorithm must be one of three_fry, philox, default"),
])
def test_rule_checks_state_and_algorithm(state, algorithm, message):
    with pytest.raises(ShapeError, match=message):
        infer("rng_bit_generator", state, algorithm=algorithm, shape=(4,), dtype="ui32")


def test_rule_wants_unsigned_bits():
    with pytest.raises(ShapeError, match="bits must have unsigned integer element type, got f32"):
        infer("rng_bit_generator", TensorType((2,), "ui64"), algorithm="default", shape=(4,), dtype="f32")
    assert infer("rng_bit_generator", TensorType((2,), "ui64"), algorithm="default", shape=(4,), dtype="ui16") == (
        TensorType((2,), "ui64"),
        TensorType((4,), "ui16"),
    )
