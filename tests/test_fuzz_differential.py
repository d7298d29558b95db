"""A differential fuzzer in the suite: seeded random programs (tests/fuzz_programs.py)
run on eager torch / NumPy and on lazycore, statement by statement; errors compared
by type and statement, every array compared after an error and at the end.

CI runs a small budget; ``python -m tests.fuzz_programs torch 2000`` (or numpy)
runs a large one by hand. Programs known to differ are listed with the reason;
they are strict xfails, so fixing one fails its entry until it is removed."""

import warnings

import pytest

import fuzz_adapters
import fuzz_programs

BUDGET = 40

KNOWN = {
    "numpy": {},
    "torch": {},
}


def _cases():
    for frontend in ("torch", "numpy"):
        for seed in range(BUDGET):
            reason = KNOWN[frontend].get(seed)
            marks = [pytest.mark.xfail(reason=reason, strict=True, raises=fuzz_programs.Mismatch)] if reason else []
            yield pytest.param(frontend, seed, marks=marks, id=f"{frontend}-{seed}")


_PAIRS = {}


@pytest.mark.parametrize("frontend,seed", list(_cases()))
def test_a_random_program_behaves_as_eager(frontend, seed):
    if frontend not in _PAIRS:
        _PAIRS[frontend] = fuzz_adapters.pair(frontend)
    ref, lazy = _PAIRS[frontend]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NumPy's divide-by-zero and invalid-value warnings
        fuzz_programs.run(seed, ref, lazy)
