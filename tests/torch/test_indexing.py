"""The torch frontend's indexing lowerings against eager CPU torch.

Each case runs one op on CPU tensors and on the same tensors moved to the lazy
device, compares the results, and checks that nothing fell back to the CPU.
"""

import pytest
import torch

import lazycore
import lazycore.torch as ltorch
from lazycore.observe import metrics
from _bits import BY_HAND  # (tests/ is on the path)


def _idtype_variants(cases, ids, kept):
    """``(idtype, *case)`` for each case in int64 and int32, int32 only in CI for the cases at ``kept``: the
    lowerings take both index types alike (converted to i64 where they wrap or offset, compared in their own type
    where checked)."""
    return [pytest.param(idtype, *case, id=f"idtype{i}-{ident}", marks=BY_HAND if i and j not in kept else ())
            for j, (case, ident) in enumerate(zip(cases, ids)) for i, idtype in enumerate([torch.int64, torch.int32])]


@pytest.fixture
def dev():
    lazycore.mark_step()
    metrics.reset()
    return ltorch.device()


def _to(x, dev):
    if isinstance(x, torch.Tensor):
        return x.to(dev)
    if isinstance(x, (list, tuple)):
        return type(x)(_to(v, dev) for v in x)
    return x


def check(dev, fn, *args, exact=False, **tol):
    """fn(*args) on the lazy device equals eager's, with no CPU fallback."""
    expected = fn(*args)
    metrics.reset()
    got = fn(*_to(args, dev))
    assert metrics.fallbacks() == {}
    got = got.cpu()
    if exact:
        tol = dict(rtol=0, atol=0)
    torch.testing.assert_close(got, expected, **tol)
    assert got.dtype == expected.dtype


def randn(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(dtype)


def randint(high, shape, dtype=torch.int64, low=0, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(low, high, shape, generator=g, dtype=dtype)


def perm_index(n, shape, d, seed=1):
    """Index of ``shape`` whose entries along ``d`` are distinct (scatter replace is order-free then)."""
    g = torch.Generator().manual_seed(seed)
    k = shape[d]
    moved = list(shape)
    del moved[d]
    cols = [torch.randperm(n, generator=g)[:k] for _ in range(max(1, torch.Size(moved).numel()))]
    idx = torch.stack(cols, dim=-1).reshape([k] + moved)
    return idx.movedim(0, d).contiguous()


# --- torch.gather / scatter family ------------------------------------------------------------

GATHER_CASES = [
    ((7,), 0, (4,)),
    ((4, 5), 0, (6, 5)),
    ((4, 5), 1, (4, 3)),
    ((4, 5), -1, (2, 3)),  # index smaller than self in the other dim
    ((3, 4, 5), 1, (3, 6, 5)),
    ((3, 4, 5), 2, (2, 4, 2)),
    ((3, 4, 5), -3, (5, 2, 1)),
]


# CI: int64 in every case and int32 in the negative dims' ((4, 5), -1) and ((3, 4, 5), -3) keep the others' path
@pytest.mark.parametrize("idtype,shape,d,ishape", _idtype_variants(
    GATHER_CASES, [f"shape{j}-{d}-ishape{j}" for j, (_, d, _) in enumerate(GATHER_CASES)], kept=(3, 6)))
def test_gather(dev, shape, d, ishape, idtype):
    x = randn(*shape)
    idx = randint(shape[d], ishape, idtype)
    check(dev, lambda x, i: torch.gather(x, d, i), x, idx, exact=True)


def test_gather_int_and_scalar(dev):
    x = randint(100, (4, 5), torch.int32)
    check(dev, lambda x, i: torch.gather(x, 1, i), x, randint(5, (4, 7)), exact=True)
    s = torch.tensor(3.5)
    check(dev, lambda x, i: torch.gather(x, 0, i), s, torch.tensor(0), exact=True)


SCATTER_CASES = [
    ((7,), 0, (4,)),
    ((5, 4), 0, (3, 4)),
    ((4, 5), 1, (4, 3)),
    ((4, 5), -1, (2, 3)),
    ((3, 4, 5), 1, (3, 2, 5)),
    ((3, 4, 5), 0, (2, 3, 4)),
]


@pytest.mark.parametrize("shape,d,ishape", SCATTER_CASES)
def test_scatter_src_and_value(dev, shape, d, ishape):
    x = randn(*shape)
    idx = perm_index(shape[d], ishape, d)
    src = randn(*[n + 1 for n in ishape], seed=3)  # src may be larger than index
    check(dev, lambda x, i, s: torch.scatter(x, d, i, s), x, idx, src, exact=True)
    check(dev, lambda x, i: torch.scatter(x, d, i, 2.5), x, idx, exact=True)
    check(dev, lambda x, i: x.clone().scatter_(d, i, -1.0), x, idx, exact=True)


@pytest.mark.parametrize("shape,d,ishape", SCATTER_CASES)
def test_scatter_add_with_duplicates(dev, shape, d, ishape):
    x = randn(*shape)
    idx = randint(shape[d], ishape)
    src = randn(*ishape, seed=3)
    check(dev, lambda x, i, s: torch.scatter_add(x, d, i, s), x, idx, src)
    xi, si = randint(50, shape, torch.int32), randint(50, ishape, torch.int32, seed=4)
    check(dev, lambda x, i, s: x.scatter_add(d, i, s), xi, idx, si, exact=True)


@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")
@pytest.mark.parametrize("reduce", ["add", "multiply"])
def test_scatter_reduce_arg(dev, reduce):
    x = randn(4, 5)
    idx = randint(4, (6, 5))
    src = randn(6, 5, seed=3)
    check(dev, lambda x, i, s: torch.scatter(x, 0, i, s, reduce=reduce), x, idx, src)
    check(dev, lambda x, i: torch.scatter(x, 0, i, 1.5, reduce=reduce), x, idx)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_scatter_reduce(dev, reduce, include_self, dtype):
    for shape, d, ishape in [((5, 4), 0, (7, 4)), ((3, 6), 1, (3, 9)), ((2, 3, 4), -1, (2, 2, 6))]:
        if dtype.is_floating_point:
            x, src = randn(*shape), randn(*ishape, seed=3)
        else:
            x, src = randint(20, shape, dtype, low=-20), randint(20, ishape, dtype, low=-20, seed=3)
        idx = randint(shape[d], ishape, seed=5)

        def fn(x, i, s):
            return x.scatter_reduce(d, i, s, reduce, include_self=include_self)

        check(dev, fn, x, idx, src)


def test_scatter_reduce_untouched_positions_keep_self(dev):
    x = randn(6, 3)
    idx = torch.tensor([[0, 0, 1], [0, 2, 1]])  # rows 3..5 never receive anything
    src = randn(2, 3, seed=2)
    for reduce in ["sum", "prod", "mean", "amax", "amin"]:
        check(dev, lambda x, i, s: x.scatter_reduce(0, i, s, reduce, include_self=False), x, idx, src)


def test_gather_backward_is_scatter_add(dev):
    x = randn(4, 5)
    idx = randint(4, (6, 5))

    def grad(x, i):
        x = x.detach().requires_grad_(True)
        (torch.gather(x, 0, i) * torch.arange(30.0, device=x.device).reshape(6, 5)).sum().backward()
        return x.grad

    check(dev, grad, x, idx)


# --- index_add / index_copy / index_fill -------------------------------------------------------


INDEX_DIM_CASES = [((7,), 0), ((5, 4), 0), ((4, 5), 1), ((3, 4, 5), 1), ((3, 4, 5), -1)]


# CI: int64 in every case and int32 in ((3, 4, 5), 1) keep the others' path
@pytest.mark.parametrize("idtype,shape,d", _idtype_variants(
    INDEX_DIM_CASES, [f"shape{j}-{d}" for j, (_, d) in enumerate(INDEX_DIM_CASES)], kept=(3,)))
def test_index_add(dev, shape, d, idtype):
    x = randn(*shape)
    n = shape[d]
    idx = randint(n, (n + 3,), idtype)  # duplicates add up
    sshape = list(shape)
    sshape[d] = n + 3
    src = randn(*sshape, seed=2)
    check(dev, lambda x, i, s: x.index_add(d, i, s), x, idx, src)
    check(dev, lambda x, i, s: torch.index_add(x, d, i, s, alpha=2.5), x, idx, src)


def test_index_add_int(dev):
    x = randint(10, (4, 3), torch.int32)
    s = randint(10, (5, 3), torch.int32, seed=2)
    check(dev, lambda x, i, s: x.index_add(0, i, s, alpha=3), x, torch.tensor([0, 3, 3, 1, 0]), s, exact=True)


@pytest.mark.parametrize("shape,d", INDEX_DIM_CASES)
def test_index_copy(dev, shape, d):
    x = randn(*shape)
    n = shape[d]
    idx = torch.randperm(n, generator=torch.Generator().manual_seed(3))[: max(1, n - 2)]
    sshape = list(shape)
    sshape[d] = idx.numel()
    src = randn(*sshape, seed=2)
    check(dev, lambda x, i, s: x.index_copy(d, i, s), x, idx, src, exact=True)
    check(dev, lambda x, i, s: x.clone().index_copy_(d, i, s), x, idx, src, exact=True)


@pytest.mark.parametrize("shape,d", INDEX_DIM_CASES)
def test_index_fill(dev, shape, d):
    x = randn(*shape)
    n = shape[d]
    idx = torch.tensor([0, n - 1, -1, 0])  # duplicates and a negative index
    check(dev, lambda x, i: x.index_fill(d, i, 4.5), x, idx, exact=True)
    check(dev, lambda x, i, v: x.index_fill(d, i, v), x, idx, torch.tensor(-2.0), exact=True)
    check(dev, lambda x, i: x.clone().index_fill_(d, i, 0), x, idx, exact=True)


@pytest.mark.filterwarnings("ignore:index_reduce")
@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
def test_index_reduce(dev, reduce, include_self, dtype):
    for shape, d in [((6, 3), 0), ((3, 4, 5), 1), ((2, 7), -1)]:
        n = shape[d]
        sshape = list(shape)
        sshape[d] = n + 2
        if dtype.is_floating_point:
            x, src = randn(*shape), randn(*sshape, seed=3)
        else:
            x, src = randint(9, shape, dtype, low=-9), randint(9, sshape, dtype, low=-9, seed=3)
        idx = randint(n - 1, (n + 2,), seed=6)  # duplicates, and the last place left alone

        def fn(x, i, s):
            return x.index_reduce(d, i, s, reduce, include_self=include_self)

        check(dev, fn, x, idx, src)


def test_put(dev):
    x = randn(4, 5)
    idx = torch.tensor([[0, -1], [7, 13]])
    src = randn(2, 2, seed=2)
    check(dev, lambda x, i, s: x.put(i, s), x, idx, src, exact=True)
    check(dev, lambda x, i, s: x.clone().put_(i, s), x, idx, src, exact=True)
    dup = torch.tensor([3, 3, -17, 0])
    check(dev, lambda x, i, s: x.put(i, s, accumulate=True), x, dup, randn(4, seed=3))


# --- advanced indexing ----------------------------------------------------------------------------


INDEX_CASES = [
    ((6,), lambda i, j: (i,)),
    ((5, 4), lambda i, j: (i,)),
    ((4, 6, 5), lambda i, j: (slice(None), i)),
    ((4, 6, 5), lambda i, j: (Ellipsis, j)),
    ((4, 6, 5), lambda i, j: (i, j)),  # adjacent: batch dims where the indexed ones were
    ((4, 6, 5), lambda i, j: (slice(None), i, j)),
    ((4, 6, 5), lambda i, j: (i, slice(None), j)),  # not adjacent: batch dims first
    ((4, 6, 5), lambda i, j: (i, slice(1, 3), j)),
    ((3, 4, 6, 5), lambda i, j: (slice(None), i[:, None], j)),  # broadcast index tensors
    ((4, 6, 5), lambda i, j: (i, 2)),
]


# CI: int64 in every key and int32 in the adjacent (i, j) and the apart (i, :, j) keep the others' path
@pytest.mark.parametrize("idtype,shape,key", _idtype_variants(
    INDEX_CASES, [f"shape{j}-<lambda>" for j in range(len(INDEX_CASES))], kept=(4, 6)))
def test_index(dev, shape, key, idtype):
    x = randn(*shape)
    # indices valid for every dim they may land in, negatives included
    m = min(shape)
    i = randint(m, (3,), idtype, low=-m, seed=4)
    j = randint(m, (3,), idtype, low=-m, seed=5)
    check(dev, lambda x, i, j: x[key(i, j)], x, i, j, exact=True)


def test_index_2d_index_and_take(dev):
    x = randn(5, 6)
    idx = randint(5, (2, 3), low=-5)
    check(dev, lambda x, i: x[i], x, idx, exact=True)
    check(dev, lambda x, i: x[:, i], x, randint(6, (2, 4)), exact=True)
    check(dev, lambda x, i: torch.take(x, i), x, randint(30, (3, 4), low=-30), exact=True)
    check(dev, lambda x, i: torch.ops.aten.index.Tensor(x, [i]), x, torch.tensor(2), exact=True)


def test_index_with_a_list(dev):
    x = randn(5, 6)
    check(dev, lambda x: x[[0, 4, -1]], x, exact=True)


def test_bool_mask_index_reads_the_mask_and_lowers(dev):
    # the mask is computed and read, then its nonzero indices gather (issue 39):
    # no fallback (it was one, its barrier the same read)
    x = randn(4, 5)
    metrics.reset()
    got = x.to(dev)[x.to(dev) > 0].cpu()
    torch.testing.assert_close(got, x[x > 0])
    assert "aten.index.Tensor" not in metrics.fallbacks()


def test_index_backward(dev):
    x = randn(5, 3)
    idx = torch.tensor([0, 2, 2, -1, 0])

    def grad(x, i):
        x = x.detach().requires_grad_(True)
        (x[i] * torch.arange(15.0, device=x.device).reshape(5, 3)).sum().backward()
        return x.grad

    check(dev, grad, x, idx)


INDEX_PUT_CASES = [
    ((6,), lambda i, j: (i,), (3,)),
    ((5, 4), lambda i, j: (i,), (4,)),
    ((5, 4), lambda i, j: (i,), (3, 1)),
    ((4, 6, 5), lambda i, j: (slice(None), i), (4, 3, 5)),
    ((4, 6, 5), lambda i, j: (i, j), (5,)),
    ((4, 6, 5), lambda i, j: (i, slice(None), j), (3, 6)),
    ((4, 6, 5), lambda i, j: (slice(None), i, j), ()),
]


# CI: int64 in every key and int32 in the adjacent (i, j) and the apart (i, :, j) keep the others' path
@pytest.mark.parametrize("idtype,shape,key,vshape", _idtype_variants(
    INDEX_PUT_CASES, [f"shape{j}-<lambda>-vshape{j}" for j in range(len(INDEX_PUT_CASES))], kept=(4, 5)))
def test_index_put(dev, shape, key, vshape, idtype):
    x = randn(*shape)
    i = torch.tensor([0, -1, 2], dtype=idtype)  # distinct places, so replace is order-free
    j = torch.tensor([1, 0, -2], dtype=idtype)
    v = randn(*vshape, seed=7)

    def put(x, i, j, v):
        x = x.clone()
        x[key(i, j)] = v
        return x

    check(dev, put, x, i, j, v, exact=True)


@pytest.mark.parametrize("shape,key,vshape", INDEX_PUT_CASES)
def test_index_put_accumulate_sums_duplicates(dev, shape, key, vshape):
    x = randn(*shape)
    i = torch.tensor([0, 0, -1])
    j = torch.tensor([1, 1, 1])
    v = randn(*vshape, seed=7)
    aten = torch.ops.aten
    check(dev, lambda x, i, j, v: aten.index_put(x, key_tensors(key(i, j)), v, True), x, i, j, v)
    check(dev, lambda x, i, j, v: aten.index_put_(x.clone(), key_tensors(key(i, j)), v, True), x, i, j, v)


def key_tensors(key):
    """An indexing key as index_put's list of optional tensors."""
    out = []
    for k in key:
        if isinstance(k, torch.Tensor):
            out.append(k)
        elif isinstance(k, slice) and k == slice(None):
            out.append(None)
        else:
            raise AssertionError(k)
    return out


def test_index_put_scalar_and_mask(dev):
    x = randn(4, 5)

    def put_scalar(x, i):
        x = x.clone()
        x[i] = 1.5
        return x

    def put_mask(x):
        x = x.clone()
        x[x > 0] = 0.25
        return x

    def put_row_mask(x, m):
        x = x.clone()
        x[:, m] = -3.0
        return x

    def add_mask(x):
        return x.index_put((x < 0,), torch.tensor(2.0, device=x.device), accumulate=True)

    check(dev, put_scalar, x, torch.tensor([1, -1]), exact=True)
    check(dev, put_mask, x, exact=True)
    check(dev, put_row_mask, x, torch.tensor([True, False, True, True, False]), exact=True)
    check(dev, add_mask, x, exact=True)


def test_index_put_int_and_bool(dev):
    xi = randint(9, (5, 3), torch.int32)
    check(dev, lambda x, i, v: x.index_put((i,), v, accumulate=True), xi, torch.tensor([1, 1, 4]),
          randint(9, (3, 3), torch.int32), exact=True)
    xb = torch.zeros(6, dtype=torch.bool)
    check(dev, lambda x, i, v: x.index_put((i,), v), xb, torch.tensor([1, 4]), torch.tensor(True), exact=True)
    check(dev, lambda x, i, v: x.index_put((i,), v, accumulate=True), xb, torch.tensor([1, 1, 4]),
          torch.tensor([True, False, False]), exact=True)
    check(dev, lambda x, m: x.index_put((m,), torch.tensor(True, device=x.device), accumulate=True), xb,
          torch.tensor([True, False, False, True, False, False]), exact=True)


# --- embedding --------------------------------------------------------------------------------------


def test_embedding_and_backward(dev):
    w = randn(10, 4)
    idx = torch.tensor([[1, 2, 1], [9, 0, 2]])
    check(dev, torch.nn.functional.embedding, idx, w, exact=True)
    grad = randn(2, 3, 4, seed=3)
    for padding_idx in (-1, 2):
        def bwd(g, i):
            return torch.ops.aten.embedding_dense_backward(g, i, 10, padding_idx, False)

        check(dev, bwd, grad, idx)


def test_masked_scatter(dev):
    x = randn(4, 5)
    mask = randn(4, 5, seed=2) > 0
    src = randn(30, seed=3)
    check(dev, lambda x, m, s: x.masked_scatter(m, s), x, mask, src, exact=True)
    row = torch.tensor([True, False, False, True, True])  # broadcast over rows
    check(dev, lambda x, m, s: x.masked_scatter(m, s), x, row, src.reshape(5, 6), exact=True)
    check(dev, lambda x, m, s: x.clone().masked_scatter_(m, s), x, mask, src, exact=True)


@pytest.mark.parametrize("shape,mshape,sshape", [((4, 5), (4, 5), (30,)), ((2, 5, 4), (2, 5, 1), (6, 4)),
                                                 ((4, 3), (3,), (2, 7)), ((2, 3), (2, 3), (1, 1))])
def test_masked_scatter_backward(dev, shape, mshape, sshape):
    """The source's gradient (LLaVA's image features merged into the tokens):
    the held elements' gradient in order, zeros after, -0.0 kept; it was a
    fallback (``aten.masked_scatter_backward``)."""
    mask = randn(*mshape, seed=2) > 0
    if mask.expand(shape).sum() > torch.Size(sshape).numel():
        mask[...] = False
    grad = randn(*shape, seed=4)
    grad.view(-1)[: shape[-1]] = -0.0

    def source_grad(g, m):
        return torch.ops.aten.masked_scatter_backward(g, m, list(sshape))

    check(dev, source_grad, grad, mask, exact=True)
    got = source_grad(grad.to(dev), mask.to(dev)).cpu()
    assert torch.equal(got.view(-1).view(torch.int32), source_grad(grad, mask).view(-1).view(torch.int32))


@pytest.mark.parametrize("idtype", [torch.int64, torch.int32])
def test_repeat_interleave_with_uploaded_repeats_lowers(dev, idtype):
    """``repeat_interleave`` by a tensor of counts known on the host (uploaded
    data, a view of it: Qwen2-VL's ``grid_thw[:, 0]``) makes its indices on
    the host: no fallback, no program; computed counts are read first."""
    grid = torch.tensor([[1, 4, 4], [2, 2, 3], [0, 3, 1]], dtype=idtype)
    x = randn(3, 2)
    check(dev, lambda g: torch.repeat_interleave(g[:, 1] * g[:, 2], g[:, 0]), grid, exact=True)
    check(dev, lambda g: torch.repeat_interleave(g[:, 0]), grid, exact=True)
    check(dev, lambda x, g: x.repeat_interleave(g[:, 1], dim=0), x, grid, exact=True)
    check(dev, lambda g: torch.repeat_interleave(g[:, 0] * 2 + 1), grid, exact=True)  # computed: read, then made
    metrics.reset()
    g = grid.to(dev)
    torch.repeat_interleave(g[:, 2]).cpu()
    assert metrics.counters()["executions"] == 0  # the counts' host copy, no program
    with pytest.raises(RuntimeError, match="negative"):
        torch.repeat_interleave(torch.tensor([1, -1], dtype=idtype, device=dev))


# --- *_like ------------------------------------------------------------------------------------------


def test_like_factories(dev):
    x = randn(3, 4)
    check(dev, torch.zeros_like, x, exact=True)
    check(dev, torch.ones_like, x, exact=True)
    check(dev, lambda x: torch.full_like(x, 7.25), x, exact=True)
    check(dev, lambda x: torch.full_like(x, 3, dtype=torch.int32), x, exact=True)
    check(dev, lambda x: torch.zeros_like(x, dtype=torch.bool), x, exact=True)
    check(dev, lambda x: torch.empty_like(x).fill_(2.0), x, exact=True)
    check(dev, lambda x: torch.empty_like(x).zero_() + x, x, exact=True)
    check(dev, lambda x: torch.ones_like(x.t()), x, exact=True)  # preserves the transposed layout


def test_like_factories_keep_layout(dev):
    x = randn(3, 4)
    for fn in (torch.zeros_like, torch.empty_like, lambda t: torch.full_like(t, 2.0)):
        got = fn(x.to(dev).t())
        assert got.stride() == fn(x.t()).stride()
        torch.testing.assert_close((got * 0 + 1).cpu(), torch.ones(4, 3))
    assert metrics.fallbacks() == {}


# --- cumulative scans ---------------------------------------------------------------------------------


SCAN_CASES = [((1,), 0), ((7,), 0), ((64,), -1), ((5, 33), 1), ((5, 33), 0), ((3, 4, 9), 1), ((2, 3, 17), -1)]


@pytest.mark.parametrize("shape,d", SCAN_CASES)
def test_cumsum(dev, shape, d):
    check(dev, lambda x: torch.cumsum(x, d), randn(*shape), rtol=1e-5, atol=1e-5)
    check(dev, lambda x: torch.cumsum(x, d), randint(1000, shape, torch.int32, low=-1000), exact=True)
    check(dev, lambda x: x.cumsum(d, dtype=torch.float64), randn(*shape), rtol=1e-6, atol=1e-6)
    check(dev, lambda x: torch.cumsum(x, d), randn(*shape) > 0, exact=True)


@pytest.mark.parametrize("shape,d", SCAN_CASES)
def test_cumprod(dev, shape, d):
    x = 1 + 0.05 * randn(*shape)
    check(dev, lambda x: torch.cumprod(x, d), x, rtol=1e-5, atol=1e-6)
    check(dev, lambda x: torch.cumprod(x, d), randint(3, shape, low=-2), exact=True)


@pytest.mark.parametrize("shape,d", SCAN_CASES)
def test_logcumsumexp(dev, shape, d):
    x = randn(*shape)
    check(dev, lambda x: torch.logcumsumexp(x, d), x, rtol=1e-5, atol=1e-5)


def test_scans_half_and_edge_values(dev):
    check(dev, lambda x: torch.cumsum(x, 0), randn(40, dtype=torch.bfloat16), rtol=1e-2, atol=1e-2)
    check(dev, lambda x: torch.cumsum(x, 0), torch.tensor(2.5), exact=True)
    check(dev, lambda x: torch.cumsum(x, 1), torch.zeros(3, 0), exact=True)
    x = torch.tensor([-float("inf"), -float("inf"), 0.0, float("inf"), 1.0])
    check(dev, lambda x: torch.logcumsumexp(x, 0), x)


def test_cumsum_backward(dev):
    def grad(x):
        x = x.detach().requires_grad_(True)
        (torch.cumsum(x, 1) * torch.arange(12.0, device=x.device).reshape(3, 4)).sum().backward()
        return x.grad

    check(dev, grad, randn(3, 4), rtol=1e-5, atol=1e-5)


# --- errors at the call, as eager --------------------------------------------------------------------------


def _same_error(dev, fn, *args):
    with pytest.raises(Exception) as eager:
        fn(*args)
    with pytest.raises(type(eager.value)):
        fn(*_to(args, dev))


def test_out_of_range_dim_raises_like_eager(dev):
    x = randn(3, 4)
    i = torch.zeros(3, 4, dtype=torch.int64)
    _same_error(dev, lambda x, i: torch.gather(x, 2, i), x, i)
    _same_error(dev, lambda x, i: x.scatter(-3, i, 1.0), x, i)
    _same_error(dev, lambda x, i: x.scatter_add(5, i, x), x, i)
    _same_error(dev, lambda x, i: x.scatter_reduce(2, i, x, "amax"), x, i)
    _same_error(dev, lambda x, i: x.index_add(2, i[0], x), x, i)
    _same_error(dev, lambda x, i: x.index_fill(3, i[0], 0.0), x, i)
    _same_error(dev, lambda x: torch.cumsum(x, 2), x)
    _same_error(dev, lambda x: torch.cumprod(x, -3), x)


def test_bad_shapes_raise_like_eager(dev):
    x = randn(3, 4)
    _same_error(dev, lambda x, i: x[i, i, i], x, torch.tensor([0]))
    _same_error(dev, lambda x, i: x.index_put((i,), torch.ones(3)), x, torch.tensor([0, 1]))
    _same_error(dev, lambda x, i: torch.gather(x, 0, i), x, torch.zeros(2, 2, 2, dtype=torch.int64))
    _same_error(dev, lambda x, i: x.index_copy(0, i, torch.ones(2, 4)), x, torch.tensor([0.0, 1.0]))
