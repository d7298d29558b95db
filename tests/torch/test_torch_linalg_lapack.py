"""torch.linalg's factorizations and solvers on the lazy device, lowered to the
dialect's factorization ops (LAPACK on the CPU) instead of eager's kernels on
the host (issues 39/43): eager's values in float32 and float64 (complex64
where cheap), batched, forward and backward through torch's own autograd
formulas, with no fallback; the ``_ex`` ops' info, and eager's errors."""

import pytest
import torch

import lazycore
from lazycore.observe import metrics
from _bits import BY_HAND  # (tests/ is on the path)


@pytest.fixture
def ldev(clean_runtime):
    import lazycore.torch as ltorch

    metrics.reset()
    return ltorch.device()


def tol(dtype):
    return dict(rtol=1e-4, atol=1e-4) if dtype in (torch.float32, torch.complex64) else dict(rtol=1e-9, atol=1e-9)


def general(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, dtype=dtype, generator=g)


def spd(shape, dtype, seed=0):
    x = general(shape, dtype, seed)
    n = shape[-1]
    return x @ x.mH + n * torch.eye(n, dtype=dtype)


def no_fallback(*allowed):
    lazycore.mark_step()
    assert set(metrics.fallbacks()) <= set(allowed), metrics.fallbacks()


def check(fn, inputs, dev, grad=True, allowed=()):
    """``fn`` on eager CPU leaves and on lazy copies: outputs (and input gradients) agree."""
    dtype = inputs[0].dtype
    eager = [t.detach().clone().requires_grad_(grad) for t in inputs]
    lazy = [t.detach().clone().to(dev).requires_grad_(grad) for t in inputs]
    out_e, out_l = fn(*eager), fn(*lazy)
    outs_e = out_e if isinstance(out_e, (tuple, list)) else (out_e,)
    outs_l = out_l if isinstance(out_l, (tuple, list)) else (out_l,)
    for a, b in zip(outs_l, outs_e):
        torch.testing.assert_close(a.cpu(), b.detach(), **tol(dtype))
    if grad:
        loss_e = sum((o.abs() if o.is_complex() else o).sum() for o in outs_e if o.dtype.is_floating_point or o.is_complex())
        loss_l = sum((o.abs() if o.is_complex() else o).sum() for o in outs_l if o.dtype.is_floating_point or o.is_complex())
        loss_e.backward()
        loss_l.backward()
        for a, b in zip(lazy, eager):
            torch.testing.assert_close(a.grad.cpu(), b.grad, **tol(dtype))
    no_fallback(*allowed)


DTYPES = [torch.float32, torch.float64]
SHAPES = [(4, 4), (3, 5, 5)]


# CI: test_cholesky_ex[(3, 5, 5)-dtype0] and [(3, 5, 5)-dtype2] (batched) and [(4, 4)-dtype1] (float64) take the
# same path
@pytest.mark.parametrize("shape,dtype", [
    pytest.param(shape, dtype, id=f"{shape}-dtype{i}",
                 marks=BY_HAND if (shape == (4, 4)) == (dtype != torch.float64) else ())
    for shape in SHAPES for i, dtype in enumerate(DTYPES + [torch.complex64])])
def test_cholesky_ex(ldev, dtype, shape):
    a = spd(shape, dtype)
    check(lambda x: torch.linalg.cholesky_ex(x).L, [a], ldev)
    check(lambda x: torch.linalg.cholesky_ex(x, upper=True).L, [a], ldev, grad=False)


@pytest.mark.parametrize("dtype", DTYPES)
def test_cholesky_with_its_error_check(ldev, dtype):
    # linalg.cholesky is cholesky_ex and aten._linalg_check_errors, which reads info
    check(torch.linalg.cholesky, [spd((3, 4, 4), dtype)], ldev, allowed=("aten._linalg_check_errors.default",))


def test_cholesky_ex_info(ldev):
    a = spd((3, 4, 4), torch.float64)
    a[1, 2, 2] = -50.0
    want = torch.linalg.cholesky_ex(a).info
    got = torch.linalg.cholesky_ex(a.to(ldev)).info
    assert want.tolist() == got.cpu().tolist() and want.tolist()[1] > 0
    no_fallback()


def test_cholesky_raises_eagers_error(ldev):
    a = spd((4, 4), torch.float64)
    a[2, 2] = -50.0
    with pytest.raises(torch.linalg.LinAlgError, match="not positive-definite"):
        torch.linalg.cholesky(a)
    with pytest.raises(RuntimeError, match="not positive-definite"):
        torch.linalg.cholesky(a.to(ldev)).cpu()
    with pytest.raises(RuntimeError, match="not positive-definite"):
        torch.cholesky(a.to(ldev)).cpu()  # the legacy op checks on its own: at the barrier


# CI: test_solve_inv_det_slogdet[(3, 5, 5)-dtype0] (batched) and [(4, 4)-dtype1] (float64) take the same path
@pytest.mark.parametrize("shape,dtype", [
    pytest.param(shape, dtype, id=f"{shape}-dtype{i}",
                 marks=BY_HAND if (shape, dtype) == ((3, 5, 5), torch.float64) else ())
    for shape in SHAPES for i, dtype in enumerate(DTYPES)])
def test_solve_inv_det_slogdet(ldev, dtype, shape):
    a = general(shape, dtype) + 3 * torch.eye(shape[-1], dtype=dtype)
    b = general(shape[:-1] + (2,), dtype, seed=1)
    check(lambda x, y: torch.linalg.solve_ex(x, y).result, [a, b], ldev)
    check(lambda x: torch.linalg.inv_ex(x).inverse, [a], ldev)
    check(torch.linalg.det, [a], ldev)
    check(lambda x: torch.linalg.slogdet(x), [a], ldev)
    check(torch.logdet, [spd(shape, dtype, seed=3)], ldev)


@pytest.mark.parametrize("dtype", DTYPES)
def test_solve_triangular_and_cholesky_solve(ldev, dtype):
    a = spd((2, 5, 5), dtype)
    b = general((2, 5, 3), dtype, seed=2)
    for upper in (False, True):
        for left in (True, False):
            rhs = b if left else b.mT
            check(lambda x, y: torch.linalg.solve_triangular(x.triu() if upper else x.tril(), y, upper=upper, left=left),
                  [a, rhs], ldev)
    factor = torch.linalg.cholesky(a)
    check(lambda y, f: torch.cholesky_solve(y, f), [b, factor], ldev)
    check(lambda y, f: torch.cholesky_solve(y, f, upper=True), [b, factor.mH.contiguous()], ldev)


# CI: every mode and shape in float32, and every mode in float64 over the batched (2, 6, 4): the factorization takes
# the two types alike but for LAPACK's routine, so float64's square and wide matrices repeat float32's
@pytest.mark.parametrize("mode,shape,dtype", [
    pytest.param(mode, shape, dtype, id=f"{mode}-{shape}-dtype{i}",
                 marks=BY_HAND if dtype == torch.float64 and shape != (2, 6, 4) else ())
    for i, dtype in enumerate(DTYPES) for shape in [(4, 4), (2, 6, 4), (4, 6)]
    for mode in ["reduced", "complete", "r"]])
def test_qr(ldev, dtype, shape, mode):
    a = general(shape, dtype)
    grad = mode == "reduced" or shape[-2] <= shape[-1] and mode != "r"
    check(lambda x: torch.linalg.qr(x, mode=mode), [a], ldev, grad=grad)


# CI: test_eigh[(3, 5, 5)-dtype0] (batched) and [(4, 4)-dtype1] (float64) take the same path
@pytest.mark.parametrize("shape,dtype", [
    pytest.param(shape, dtype, id=f"{shape}-dtype{i}",
                 marks=BY_HAND if (shape == (4, 4)) == (dtype != torch.float64) else ())
    for shape in SHAPES for i, dtype in enumerate(DTYPES)])
def test_eigh(ldev, dtype, shape):
    # torch asks for eigenvectors of any tensor subclass (eigvalsh too); they
    # are LAPACK's syevd's, whose signs the implementation picks: eager's MKL
    # and jaxlib's (OpenBLAS, NumPy's) differ for most matrices with 3 <= n <=
    # 25 (frontends/torch/ops/decompositions.py, _eigh), so the vectors are
    # compared up to sign and through sign-free functions, as test_svd's
    a = general(shape, dtype)
    a = a + a.mT
    check(torch.linalg.eigvalsh, [a], ldev)
    values, vectors = torch.linalg.eigh(a.triu().to(ldev), UPLO="U")
    want = torch.linalg.eigh(a.triu(), UPLO="U")
    torch.testing.assert_close(values.cpu(), want.eigenvalues, **tol(dtype))
    signs = torch.sign((vectors.cpu() * want.eigenvectors).sum(-2, keepdim=True))
    torch.testing.assert_close(vectors.cpu() * signs, want.eigenvectors, **tol(dtype))
    check(lambda x: torch.linalg.eigh(x).eigenvectors.abs().sum(-1), [a], ldev)
    no_fallback()


def test_eigh_of_empty_matrices(ldev):
    for shape in [(0, 0), (0, 5, 5), (3, 0, 0)]:
        check(torch.linalg.eigh, [torch.zeros(shape)], ldev, grad=False)
    no_fallback()


def test_eigh_raises_eagers_error(ldev):
    a = torch.full((3, 3), float("nan"), dtype=torch.float64)
    with pytest.raises(torch.linalg.LinAlgError, match="failed to converge"):
        torch.linalg.eigh(a)
    with pytest.raises(torch.linalg.LinAlgError, match="linalg.eigh: The algorithm failed to converge"):
        torch.linalg.eigh(a.to(ldev)).eigenvalues.cpu()
    no_fallback()


# CI: every shape in float32 and the batched (2, 6, 3) in float64 (the same factorization but for LAPACK's routine)
@pytest.mark.parametrize("shape,dtype", [
    pytest.param(shape, dtype, id=f"{shape}-dtype{i}", marks=BY_HAND if dtype == torch.float64 and shape != (2, 6, 3)
                 else ())
    for i, dtype in enumerate(DTYPES) for shape in [(4, 4), (3, 5), (2, 6, 3)]])
def test_svd(ldev, dtype, shape):
    a = general(shape, dtype)
    check(torch.linalg.svdvals, [a], ldev)
    u, s, vh = torch.linalg.svd(a.to(ldev), full_matrices=False)
    torch.testing.assert_close((u * s.unsqueeze(-2)) @ vh, a.to(ldev), **tol(dtype))
    u_full, _, vh_full = torch.linalg.svd(a.to(ldev))
    assert u_full.shape == torch.linalg.svd(a).U.shape and vh_full.shape == torch.linalg.svd(a).Vh.shape
    # the gradient of a sign-free function of U and V through torch's formula
    check(lambda x: torch.linalg.svd(x, full_matrices=False).U.abs().sum(-1), [a], ldev)


@pytest.mark.parametrize("dtype", DTYPES)
def test_lu_and_householder_product(ldev, dtype):
    a = general((2, 5, 4), dtype)
    check(lambda x: torch.linalg.lu(x), [a], ldev)
    check(lambda x: torch.linalg.lu_factor_ex(x)[:2], [a], ldev, grad=False)
    geqrf, tau = torch.geqrf(a)
    check(torch.linalg.householder_product, [geqrf, tau], ldev)


def test_pinv_and_matrix_norms(ldev):
    a = general((3, 5), torch.float64)
    check(torch.linalg.pinv, [a], ldev)
    check(lambda x: torch.linalg.matrix_norm(x, 2), [a], ldev)
    check(lambda x: torch.linalg.matrix_norm(x, "nuc"), [a], ldev)
