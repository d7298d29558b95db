"""What index checks cost an in-range program (issue 41, item 2: at most 3%).

Counted, not timed: the elements a program's checks reduce and the check
reductions it holds (StableHLO), and the kernels XLA runs for them
(``lazycore.profile.kernels``). An expanded index (``i[:, None].expand(-1, w)``,
whose strides repeat each value) is checked over its first row, and one
index checked by several ops, as a 2-D tensor or reshaped, is one reduction
per range the ops allow; out-of-range indices still fail with eager's type
and message.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import lazycore
import lazycore.torch as ltorch
from lazycore.ir.config import override
from lazycore.observe.testing import capture

from _bits import check_reductions

ROWS, WIDTH, N = 37, 24, 40

def _check_reductions(stablehlo: str) -> list[int]:
    """The element count of each index check's reduction (a float sum of a mask)."""
    return [math.prod(int(d) for d in shape.split("x") if d) for _, shape in check_reductions(stablehlo)]


def _data(bad: int | None = None):
    g = torch.Generator().manual_seed(5)
    table = torch.randn(ROWS, WIDTH, generator=g)
    flat = torch.randint(0, ROWS, (N,), generator=g)
    if bad is not None:
        flat[N // 3] = bad
    return table, flat


def _expanded_gather(table, flat):
    return torch.gather(table, 0, flat[:, None].expand(-1, table.shape[1]))


def test_an_expanded_gather_index_is_checked_over_its_first_row(clean_runtime):
    table, flat = _data()
    dev = ltorch.device()
    with override(index_checks=True), capture() as cap:
        got = _expanded_gather(table.to(dev), flat.to(dev)).cpu()
    torch.testing.assert_close(got, _expanded_gather(table, flat))
    sizes = _check_reductions(cap.text("stablehlo"))
    assert sizes == [N], sizes  # one check of N entries, not N x WIDTH


@pytest.mark.parametrize("bad", [ROWS, ROWS + 9, -1])
def test_an_expanded_gather_index_out_of_range_fails_as_eager(clean_runtime, bad):
    table, flat = _data(bad)
    with pytest.raises(RuntimeError) as eager:
        _expanded_gather(table, flat)
    dev = ltorch.device()
    with override(index_checks=True):
        r = _expanded_gather(table.to(dev), flat.to(dev))
        beside = (torch.arange(4, device=dev) + 1).sum()
        with pytest.raises(RuntimeError) as info:
            r.cpu()
    assert isinstance(info.value, lazycore.BarrierError)
    assert str(eager.value) in str(info.value), (str(eager.value), str(info.value))
    assert "test_index_check_cost.py" in str(info.value)
    assert beside.item() == 10


def _expanded_scatter_add(base, flat, src):
    return base.scatter_add(0, flat[:, None].expand(-1, base.shape[1]), src)


@pytest.mark.parametrize("bad", [None, ROWS + 3])
def test_an_expanded_scatter_index_is_checked_over_its_first_row(clean_runtime, bad):
    table, flat = _data(bad)
    src = torch.randn(N, WIDTH, generator=torch.Generator().manual_seed(4))
    dev = ltorch.device()
    with override(index_checks=True), capture() as cap:
        r = _expanded_scatter_add(table.to(dev), flat.to(dev), src.to(dev))
        if bad is None:
            torch.testing.assert_close(r.cpu(), _expanded_scatter_add(table, flat, src))
        else:
            with pytest.raises(RuntimeError) as eager:
                _expanded_scatter_add(table, flat, src)
            with pytest.raises(RuntimeError) as info:
                r.cpu()
            assert isinstance(info.value, lazycore.BarrierError)
            assert str(eager.value) in str(info.value), (str(eager.value), str(info.value))
    assert _check_reductions(cap.text("stablehlo", graph=0)) == [N]


def _many(table, i):
    """One (8, 5) index through six indexing ops, as benchmark 12's step."""
    flat = i.reshape(-1)
    counts = torch.zeros(table.shape[0], device=table.device)
    e = F.embedding(i, table)
    g = _expanded_gather(table, flat)
    s = table[flat]
    sel = torch.index_select(table, 0, flat)
    counts = counts.index_put((flat,), torch.ones_like(flat, dtype=counts.dtype), accumulate=True)
    counts = counts.scatter_add(0, flat, torch.ones_like(flat, dtype=counts.dtype))
    return e.sum() + g.sum() + s.sum() + sel.sum() + counts.sum()


def _index():
    return torch.randint(0, ROWS, (8, 5), generator=torch.Generator().manual_seed(9))


def test_one_index_checked_by_six_ops_is_checked_over_its_entries(clean_runtime):
    # embedding, gather (expanded), index_select and scatter_add allow 0..n-1,
    # x[i] and index_put -n..n-1: reductions of the 40 entries, none of 40 x 24
    table, i = _data()[0], _index()
    dev = ltorch.device()
    with override(index_checks=True), capture() as cap:
        got = _many(table.to(dev), i.to(dev)).item()
    assert got == pytest.approx(_many(table, i).item(), rel=1e-5)
    # (the expanded index's first row is a third, merged with the first by XLA: the next test)
    assert _check_reductions(cap.text("stablehlo")) == [40, 40, 40]


def _kernel_runs(fn, runs: int = 3) -> dict[str, int]:
    kept = fn()  # (a result nothing holds would not be computed)
    lazycore.mark_step(wait=True)
    with lazycore.profile.kernels() as prof:
        for _ in range(runs):
            kept = fn()
            lazycore.mark_step(wait=True)
    assert kept is not None
    out: dict[str, int] = {}
    for r in prof.rows:
        if not r.what.startswith("while"):
            out[r.what] = out.get(r.what, 0) + r.count // runs
    return out


def test_the_checks_of_one_index_through_six_ops_add_few_kernels(clean_runtime):
    table, i = _data()[0], _index()
    dev = ltorch.device()
    lt, li = table.to(dev), i.to(dev)
    counts = {}
    for on in (False, True):
        with override(index_checks=on):
            counts[on] = _kernel_runs(lambda: _many(lt, li))
    extra = sum(counts[True].values()) - sum(counts[False].values())
    # two masks and their two reductions (before: five of each, one over the
    # expanded 40 x 24 index), and the kernel returning the flags
    assert 0 < extra <= 5, (counts[True], counts[False])


def test_a_2d_index_checked_as_a_row_names_eagers_first_offending_entry(clean_runtime):
    # (row-major order is kept by the reshape: the first bad entry eager names)
    table = torch.randn(ROWS, WIDTH, generator=torch.Generator().manual_seed(1))
    idx = torch.zeros(6, WIDTH, dtype=torch.int64)
    idx[2, 5], idx[1, 7], idx[4, 0] = ROWS + 4, ROWS + 2, -3
    with pytest.raises(RuntimeError) as eager:
        torch.gather(table, 0, idx)
    assert f"index {ROWS + 2} is out of bounds" in str(eager.value)
    dev = ltorch.device()
    with override(index_checks=True), capture() as cap:
        r = torch.gather(table.to(dev), 0, idx.to(dev))
        with pytest.raises(RuntimeError) as info:
            r.cpu()
    assert str(eager.value) in str(info.value), (str(eager.value), str(info.value))
    assert _check_reductions(cap.text("stablehlo", graph=0)) == [6 * WIDTH]
    assert "tensor<144xf32>" in cap.text("stablehlo", graph=0)  # the mask as a row


def _steps(table, idx):
    """Benchmark 12's indexing step: ``_many``'s six ops per index, one index
    after the other (the copies of a rolled loop, each checking its own)."""
    total = torch.zeros((), device=table.device)
    counts = torch.zeros(table.shape[0], device=table.device)
    for i in idx:
        flat = i.reshape(-1)
        e = F.embedding(i, table)
        g = _expanded_gather(table, flat)
        s = table[flat]
        sel = torch.index_select(table, 0, flat)
        counts.index_put_((flat,), torch.ones_like(flat, dtype=counts.dtype), accumulate=True)
        counts = counts.scatter_add(0, flat, torch.ones_like(flat, dtype=counts.dtype))
        total = total + e.sum() + g.sum() + s.sum() + sel.sum()
    return total + counts.sum()


def test_a_rolled_loops_index_checks_cost_the_same_kernels_for_any_number_of_copies(clean_runtime, rolling_on):
    # each copy's indices are checked once over the stacked copies, before
    # the loop (passes/rolled_flags.py), not a mask and a reduction per
    # iteration: 42 kernel runs more with the checks on at 4 copies, 82 at 8,
    # before; the loops' own kernels still run once per copy either way
    table = _data()[0]
    dev = ltorch.device()
    extra = {}
    for copies in (4, 8):
        g = torch.Generator().manual_seed(copies)
        idx = [torch.randint(0, ROWS, (8, 5), generator=g) for _ in range(copies)]
        lt, li = table.to(dev), [i.to(dev) for i in idx]
        counts = {}
        for on in (False, True):
            with override(index_checks=on), capture() as cap:
                counts[on] = _kernel_runs(lambda: _steps(lt, li))
            assert "stablehlo.while" in cap.text("stablehlo")
        got = _steps(lt, li).item()
        assert got == pytest.approx(_steps(table, idx).item(), rel=1e-5)
        extra[copies] = sum(counts[True].values()) - sum(counts[False].values())
    assert extra[4] == extra[8], extra
    assert 0 < extra[4] <= 10, extra


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
@pytest.mark.parametrize("bad", [None, -1, ROWS, "min", "max"])
@pytest.mark.parametrize("op", ["index_select", "embedding"])
def test_a_check_from_zero_is_one_compare_of_the_index_read_as_unsigned(clean_runtime, dtype, bad, op):
    # a negative entry read as unsigned lies above every in-range one: one
    # compare for both ends of 0..n-1 (a node fewer than two and their or)
    from lazycore.ir.graph import LOG

    table = _data()[0]
    idx = torch.tensor([0, ROWS - 1, 3, ROWS - 1], dtype=dtype)
    if bad is not None:
        idx[2] = {"min": torch.iinfo(dtype).min, "max": torch.iinfo(dtype).max}.get(bad, bad)

    def f(t, i):
        return torch.index_select(t, 0, i) if op == "index_select" else F.embedding(i, t)

    dev = ltorch.device()
    lt, li = table.to(dev), idx.to(dev)
    lazycore.mark_step(wait=True)
    with override(index_checks=True):
        r = f(lt, li)
        made = [n.op for n in LOG.nodes]
        assert made.count("check") == 1 and made.count("or") == 0 and made.count("bitcast_convert") == 1, made
        if bad is None:
            torch.testing.assert_close(r.cpu(), f(table, idx))
            return
        with pytest.raises(Exception) as eager:
            f(table, idx)
        with pytest.raises(type(eager.value)) as info:
            r.cpu()
    assert isinstance(info.value, lazycore.BarrierError)
    assert str(eager.value) in str(info.value), (str(eager.value), str(info.value))
