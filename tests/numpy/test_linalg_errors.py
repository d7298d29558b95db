"""NumPy's LinAlgError from a lazy factorization whose values say the matrix is
singular or not positive definite: raised at the barrier, naming the user's
line, as NumPy's type (``except np.linalg.LinAlgError`` catches it; it was a
ValueError, LinAlgError's base)."""

import numpy as np
import pytest

import lazycore.numpy as lnp

_SINGULAR = np.array([[1.0, 2.0], [2.0, 4.0]])


@pytest.mark.parametrize("name,args", [("inv", ()), ("solve", (np.ones(2),)), ("cholesky", ())])
def test_a_failed_factorization_raises_numpys_linalgerror(name, args):
    with pytest.raises(np.linalg.LinAlgError) as numpy_error:
        getattr(np.linalg, name)(_SINGULAR, *args)
    with pytest.raises(np.linalg.LinAlgError, match=str(numpy_error.value)) as lazy_error:
        np.asarray(getattr(lnp.linalg, name)(lnp.asarray(_SINGULAR), *(lnp.asarray(a) for a in args)))
    assert "test_linalg_errors.py" in str(lazy_error.value)  # the user's line
