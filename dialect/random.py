"""Random ops: a counter-based generator with explicit state.

The state is a value like any other, so a program stays pure: the frontend
threads ``new_state`` into the next call and random results are reproducible
from the seed that built the first state.
"""

from __future__ import annotations

from .rules import check_shape
from .spec import op
from .types import ShapeError, TensorType, check_dtype, is_unsigned

# algorithm -> allowed state sizes (u64 words). "default" is XLA's choice,
# Philox on the XLA backends, so it takes Philox's sizes.
RNG_ALGORITHMS = {"three_fry": (2,), "philox": (2, 3), "default": (2, 3)}


@op(
    "rng_bit_generator",
    ("state",),
    attrs={"algorithm": "str"},
    results=("new_state", "bits"),
    result_params=("shape", "dtype"),
    params_from="bits",
    padding="own",  # the valid sizes' bits: lazycore.runtime.padding._random_bits
)
def _rng_bit_generator(state, *, algorithm, shape, dtype):
    """Uniformly random ``bits`` of the given shape and state after drawing them.

    The bits are the algorithm's stream from ``state`` in row-major order,
    whatever the shape: a draw's bits are the first of any longer draw's
    (the lowering draws flat: XLA lays a draw of several dimensions out by
    its shape)."""
    if algorithm not in RNG_ALGORITHMS:
        raise ShapeError(f"algorithm must be one of {', '.join(RNG_ALGORITHMS)}, got '{algorithm}'")
    sizes = RNG_ALGORITHMS[algorithm]
    if state.dtype != "ui64" or state.rank != 1 or state.shape[0] not in sizes:
        want = " or ".join(f"tensor<{n}xui64>" for n in sizes)
        raise ShapeError(f"state must be {want} for algorithm '{algorithm}', got {state}")
    shape = check_shape(shape, "bits shape")
    if not is_unsigned(check_dtype(dtype)):
        raise ShapeError(f"bits must have unsigned integer element type, got {dtype}")
    return state, TensorType(shape, dtype)
