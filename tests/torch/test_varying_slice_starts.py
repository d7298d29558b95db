"""A slice whose start varies between steps compiles once after its place is
promoted (issue 39): torchvision's v2.RandomCrop on lazy images (its corner is
drawn on the host each step), a user's window ``x[:, i:i + 4]`` in a loop
over ``i``, and the window's gradient. The start was a slice attribute, so
every new start was a new program ("[1, 2, 3, 4] compiles in 4 steps",
tests/consumers/test_hunt30v_torch.py). Now it is a number of the scalar
policy (lazycore.trace.views.Slice.picked): baked until its place has seen
two values, then a parameter of a dynamic_slice (of a dynamic_update_slice
in the backward, frontends/torch/ops/slices.py), the sizes static: eager
clamps a Python int's start and stop, so a start near the end keeps eager's
shorter result."""

import pytest
import torch

import lazycore.torch as ltorch
from lazycore.observe import metrics

pytestmark = pytest.mark.usefixtures("clean_runtime", "fresh_cutter")


def _counted(step, n):
    compiles = []
    for i in range(n):
        c0 = metrics.counters().get("compiles", 0)
        step(i)
        ltorch.mark_step()
        compiles.append(metrics.counters().get("compiles", 0) - c0)
    return compiles


def test_random_crop_on_lazy_images_compiles_two_programs(dev):
    v2 = pytest.importorskip("torchvision.transforms.v2")
    imgs = torch.rand(2, 3, 14, 12, generator=torch.Generator().manual_seed(0))
    crop = v2.RandomCrop(8)

    def run(device):
        torch.manual_seed(3)  # corners (5, 3), (3, 2), (0, 0), (2, 0), (5, 4), (6, 1): 0 and repeats too
        x = imgs.to(device)
        ltorch.mark_step()
        out = []
        return out, lambda i: out.append(crop(x) * 2)

    want, step = run("cpu")
    for i in range(6):
        step(i)
    got, step = run(dev)
    compiles = _counted(step, 6)
    assert metrics.counters().get("fallbacks", 0) == 0
    for g, w in zip(got, want):
        assert torch.equal(g.cpu(), w)
    assert sum(compiles) <= 2, compiles  # before: [1, 1, 1, 1, 1, 1]


def test_a_window_over_a_loop_index_compiles_two_programs(dev):
    x = torch.randint(-9, 9, (3, 20), generator=torch.Generator().manual_seed(1)).float()  # (sums exact)
    xl = x.to(dev)
    ltorch.mark_step()
    got = []
    compiles = _counted(lambda i: got.append(xl[:, i:i + 4].sum()), 8)
    for i, g in enumerate(got):
        assert g.item() == x[:, i:i + 4].sum().item()
    assert compiles == [1, 1, 0, 0, 0, 0, 0, 0], compiles  # before: one a step


def test_narrow_and_a_window_past_the_end_as_eager(dev):
    # eager clamps the stop: the last windows are shorter (a shape: programs of their own)
    x = torch.randn(2, 10, generator=torch.Generator().manual_seed(2))
    xl = x.to(dev)
    ltorch.mark_step()
    got = []
    compiles = _counted(lambda i: got.append((xl.narrow(1, min(i, 7), 3) * 2, xl[:, i:i + 4] + 1)), 10)
    for i, (a, b) in enumerate(got):
        assert torch.equal(a.cpu(), x.narrow(1, min(i, 7), 3) * 2)
        assert torch.equal(b.cpu(), x[:, i:i + 4] + 1)
    # starts 0 and 1, then one program for 2..6, one for each shorter window at 7, 8, 9
    assert sum(compiles) <= 5, compiles


def test_a_windows_gradient_compiles_two_programs(dev):
    w = torch.randn(2, 20, generator=torch.Generator().manual_seed(3))
    wl = w.to(dev).requires_grad_()
    ltorch.mark_step()
    grads = []

    def step(i):
        wl.grad = None
        (wl[:, i:i + 4] * 3).sum().backward()
        grads.append(wl.grad)

    compiles = _counted(step, 8)
    for i, g in enumerate(grads):
        want = torch.zeros(2, 20)
        want[:, i:i + 4] = 3
        assert torch.equal(g.cpu(), want)
    # before: [1, 1, 1, 1, 0, ...] (torch's decomposition of slice_backward compared
    # an iota with the start and the end, two numbers more a step)
    assert compiles == [1, 1, 0, 0, 0, 0, 0, 0], compiles


def test_slice_scatter_at_a_varying_start_as_eager(dev):
    x = torch.randn(3, 9, generator=torch.Generator().manual_seed(4))
    src = torch.randn(3, 2, generator=torch.Generator().manual_seed(5))
    xl, sl = x.to(dev), src.to(dev)
    ltorch.mark_step()
    got = []
    compiles = _counted(lambda i: got.append(torch.slice_scatter(xl, sl, 1, i, i + 2)), 6)
    for i, g in enumerate(got):
        assert torch.equal(g.cpu(), torch.slice_scatter(x, src, 1, i, i + 2))
    assert sum(compiles[2:]) == 0, compiles


def _raised(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 (the type is compared)
        return type(e)
    return None


@pytest.mark.parametrize("bad", [lambda x: x[4], lambda x: x.narrow(0, 3, 2), lambda x: x.select(1, -4)])
def test_an_index_out_of_range_after_the_promotion_raises_eagers_error(dev, bad):
    xl = torch.zeros(4, 3).to(dev)
    for i in range(3):  # the start's place promoted at the second
        xl[i].sum()
        xl[:, i:i + 1].sum()
        ltorch.mark_step()
    want = _raised(lambda: bad(torch.zeros(4, 3)))
    assert want is not None and _raised(lambda: bad(xl)) is want
