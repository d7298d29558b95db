"""Random draws over a padded dimension (dropout over a marked batch or
sequence): one program for every size of a bucket, drawing the numbers the
unpadded step draws (lazycore.runtime.padding._random_bits)."""

import numpy as np
import pytest
import torch

import lazycore as lc
import lazycore.torch as ltorch
from lazycore.ir.config import override
from lazycore.observe import metrics

pytestmark = pytest.mark.usefixtures("clean_runtime")

SIZES = (30, 31, 32, 29)


def _draw(bits, state, shape):
    new_state, out = lc.apply("rng_bit_generator", state, algorithm="three_fry", shape=shape, dtype=bits)
    return np.asarray(lc.to_numpy(new_state)), np.asarray(lc.to_numpy(out))


@pytest.mark.parametrize("bits", ["ui8", "ui32", "ui64"])
def test_a_draw_is_the_streams_first_bits_in_row_major_order_and_moves_its_counter_by_them(bits):
    """What the padding rule relies on: a draw's bits whatever its shape are
    the first of any longer draw from its state, and the state's counter word
    moves by the count (64-bit bits) or half of it rounded up (narrower);
    the key word stays. (XLA lays out a draw of several dimensions by its
    shape: (30, 24) and (32, 24)[:30] differ there; our lowering draws flat.)"""
    state = lc.from_numpy(np.array([7, 2**64 - 3], np.uint64))
    _, longest = _draw(bits, state, (32 * 24 + 5,))
    for shape in [(30, 24), (31, 24), (24, 30), (3, 1, 10, 8), (5,), ()]:
        after, got = _draw(bits, state, shape)
        n = int(np.prod(shape))
        np.testing.assert_array_equal(got.ravel(), longest[:n])
        moved = n if bits == "ui64" else (n + 1) // 2
        assert after[0] == 7 and after[1] == (2**64 - 3 + moved) % 2**64, (shape, after)


def _draws(shape, dims, dtype, n):
    """rand, randn and dropout of a ones tensor with ``dims`` at ``n``, marked."""
    dev = ltorch.device()
    size = [n if d in dims else s for d, s in enumerate(shape)]
    x = torch.ones(size, dtype=dtype).to(dev)
    for d in dims:
        x = ltorch.dynamic(x, d)
    out = torch.rand_like(x) * x + torch.randn_like(x) * 3 * x + torch.nn.functional.dropout(x, 0.5)
    return out.cpu()


@pytest.mark.parametrize("shape, dims, dtype", [
    ((0, 24), (0,), torch.float32),  # the first dimension: the valid bits come first
    ((3, 0, 5), (1,), torch.float32),  # inside: each valid position reads its unpadded index
    ((2, 0, 0), (1, 2), torch.float32),  # two padded dimensions of one symbol
    ((1, 0, 4), (1,), torch.float64),  # 64-bit bits; a leading dimension of one
])
def test_draws_over_a_padded_dimension_are_the_unpadded_draws_in_one_program(shape, dims, dtype):
    def run():
        torch.manual_seed(0)
        before = metrics.counters()["compiles"]
        outs = [_draws(shape, dims, dtype, n) for n in SIZES]
        return outs, metrics.counters()["compiles"] - before

    padded, compiles = run()
    with override(buckets="off"):
        unpadded, apart = run()
    assert compiles == 1 and apart == len(SIZES)
    for a, b in zip(padded, unpadded):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_a_step_that_draws_its_dropout_over_the_batch_reads_at_new_sizes_what_it_padded_once(counted):
    """The shape-bucket guide's training step with a dropout layer: one program
    for every batch size (one per size before: random bits refused padding),
    eager's draws of the unpadded step, and a new size runs the plan padded at
    another (the draw's shape is checked through its bits' type) without
    padding the graph again."""
    sizes = (30, 31, 32, 29, 27, 30, 28, 26)

    def train():
        dev = ltorch.device()
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(10, 24), torch.nn.ReLU(), torch.nn.Dropout(0.3),
                                    torch.nn.Linear(24, 5)).to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        before = metrics.counters()["compiles"]
        losses = []
        for n in sizes:
            x = ltorch.dynamic(torch.randn(n, 10).to(dev), 0)
            y = ltorch.dynamic(torch.randint(0, 5, (n,)).to(dev), 0)
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            ltorch.mark_step()
            losses.append(loss.item())
        return losses, metrics.counters()["compiles"] - before

    losses, compiles = train()
    assert compiles == 1
    assert counted["padded"] <= 2, counted  # (the first size, and the second: the plan's sizes then differ)
    with override(buckets="off"):
        unpadded, apart = train()
    assert apart == len(set(sizes))
    assert losses == unpadded
