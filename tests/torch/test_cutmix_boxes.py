"""CutMix's box, a new one every step (timm's Mixup, torchvision's v2.CutMix):
``x[:, :, y0:y1, x0:x1] = x.flip(0)[:, :, y0:y1, x0:x1]``. Its size was a
shape of the program, so every box compiled one more; once the box at the
line has changed it is written under a mask whose bounds are program
parameters: a loop of boxes compiles two programs, with eager's values bit
for bit (frontends/torch/boxes.py, ScalarPolicy.varies).

The timm run (Mixup with CutMix on a tiny DeiT) is LAZYCORE_TEST_FULL=1 only."""

import random

import numpy as np
import pytest
import torch

import lazycore as lc
from lazycore.observe import metrics
from lazycore.observe.inspect_graph import ir_text
from _bits import FULL  # (tests/ is on the path)

pytestmark = pytest.mark.usefixtures("clean_runtime")

# (y0, y1, x0, x1): sizes 2x3, 1x1, 3x4, 4x2, 2x2, 3x3, none spanning a whole dimension
BOXES = [(1, 3, 2, 5), (0, 1, 0, 1), (4, 7, 3, 7), (2, 6, 5, 7), (5, 7, 1, 3), (3, 6, 4, 7)]


def _timm(x, box):
    y0, y1, x0, x1 = box
    x[:, :, y0:y1, x0:x1] = x.flip(0)[:, :, y0:y1, x0:x1]  # timm's Mixup._mix_batch
    return x


def _torchvision(x, box):
    y0, y1, x0, x1 = box
    rolled = x.roll(1, 0)
    x[..., y0:y1, x0:x1] = rolled[..., y0:y1, x0:x1]  # torchvision.transforms.v2.CutMix
    return x


def _batch(i, dtype):
    g = torch.Generator().manual_seed(i)
    x = torch.randn(4, 3, 8, 8, generator=g) * 4
    return x.to(dtype) if dtype is not torch.bool else x > 0


def _loop(dev, mix, dtype, boxes):
    compiles = []
    for i, box in enumerate(boxes):
        x = _batch(i, dtype)
        want = mix(x.clone(), box)
        c0 = metrics.counters().get("compiles", 0)
        got = mix(x.to(dev), box).cpu()
        compiles.append(metrics.counters().get("compiles", 0) - c0)
        assert got.dtype == want.dtype
        assert torch.equal(got, want), (box, dtype)
    return compiles


@pytest.mark.parametrize("mix", [_timm, _torchvision])
def test_a_new_box_every_step_compiles_two_programs(dev, mix):
    # before: one program a box
    assert _loop(dev, mix, torch.float32, BOXES[:4]) == [1, 1, 0, 0]


@pytest.mark.parametrize("dtype", [torch.float64, torch.int32, torch.bool, torch.bfloat16])
def test_boxes_of_other_types_as_eager(dev, dtype):
    # (integer work may be answered on the host, compiling nothing: counts after the change only)
    assert sum(_loop(dev, _timm, dtype, BOXES[:4])[2:]) == 0


def test_a_box_that_never_changes_keeps_its_static_slices(dev):
    box = BOXES[0]
    assert _loop(dev, _timm, torch.float32, [box] * 3) == [1, 0, 0]
    x = _timm(_batch(0, torch.float32).to(dev), box)
    text = ir_text(x)
    assert "lazy.dynamic_update_slice" in text and "lazy.iota" not in text
    lc.mark_step()


def test_each_line_learns_its_own_box(dev):
    # a static box at one line stays static while another line's box varies
    def two(x, box):
        x[:, :, 0:2, 0:2] = x.flip(0)[:, :, 0:2, 0:2]  # static
        return _timm(x, box)

    assert _loop(dev, two, torch.float32, BOXES[:4]) == [1, 1, 0, 0]
    x = two(_batch(0, torch.float32).to(dev), BOXES[4])
    text = ir_text(x)
    assert "lazy.dynamic_update_slice" in text and "lazy.iota" in text
    lc.mark_step()


def test_other_copies_into_slices_stay_as_eager(dev):
    # not one box of two same-shaped arrays: the views write them, as before
    cases = [
        lambda x, k: x[:, :, 1:3].copy_(x.flip(1)[:, :, 2 + k:4 + k]),  # other bounds
        lambda x, k: x[1:3 + k][1:].copy_(x.flip(0)[1:3 + k][1:]),  # two slices of one dimension
        lambda x, k: x[:, :, ::2].copy_(x.flip(0)[:, :, ::2]),  # a step
        lambda x, k: x[:, :, k:k + 2, 1:3].copy_(x.flip(0)[:2, :, k:k + 2, 1:3].repeat(2, 1, 1, 1)),
        lambda x, k: x[:, :, k:k + 2].copy_(x.double().flip(0)[:, :, k:k + 2]),  # another dtype
    ]
    for case in cases:
        for k in range(2):  # (a second value: where a box's place would have learned it varies)
            x = _batch(k, torch.float32)
            want = x.clone()
            case(want, k)
            got = x.to(dev)
            case(got, k)
            assert torch.equal(got.cpu(), want)


def test_views_of_the_destination_see_the_box(dev):
    for k, box in enumerate(BOXES[:2]):
        x = _batch(k, torch.float32)
        rows = x[1]
        _timm(x, box)
        lx = _batch(k, torch.float32).to(dev)
        lrows = lx[1]
        _timm(lx, box)
        assert torch.equal(lrows.cpu(), rows) and torch.equal(lx.cpu(), x)


@pytest.mark.skipif(not FULL, reason="a model run: LAZYCORE_TEST_FULL=1")
def test_timm_cutmix_on_deit_compiles_a_bounded_number_of_programs(dev):
    """timm's Mixup with CutMix only (a new box every step) on a tiny DeiT with a
    warm-up schedule: 10 steps, eager's losses; before: a program a box."""
    timm = pytest.importorskip("timm")
    import timm.optim
    import timm.scheduler
    from timm.data import Mixup
    from timm.loss import SoftTargetCrossEntropy

    import lazycore.torch as ltorch

    def run(device, each):
        torch.manual_seed(0)
        model = timm.create_model("deit_tiny_patch16_224", pretrained=False, num_classes=5, img_size=32,
                                  patch_size=8, depth=1, qkv_bias=False).to(device)
        opt = timm.optim.create_optimizer_v2(model, "adamw", lr=1e-3, weight_decay=0.05)
        sched = timm.scheduler.CosineLRScheduler(opt, t_initial=10, warmup_t=2, warmup_lr_init=1e-5,
                                                 t_in_epochs=False)
        mixup = Mixup(mixup_alpha=0.0, cutmix_alpha=1.0, label_smoothing=0.1, num_classes=5)
        crit = SoftTargetCrossEntropy()
        np.random.seed(0)
        random.seed(0)
        g = torch.Generator().manual_seed(1)
        losses, compiles = [], []
        for i in range(10):
            x, y = torch.randn(4, 3, 32, 32, generator=g), torch.randint(0, 5, (4,), generator=g)
            c0 = metrics.counters().get("compiles", 0)
            x, y = mixup(x.to(device, copy=True), y.to(device))
            loss = crit(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            sched.step_update(num_updates=i + 1)
            each()
            losses.append(loss.detach())
            compiles.append(metrics.counters().get("compiles", 0) - c0)
        return [float(v.cpu()) for v in losses], compiles

    want, _ = run("cpu", lambda: None)
    got, compiles = run(dev, ltorch.mark_step)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=0)
    # step 0, step 1 (Adam's state), the box's promotion at step 1: nothing after
    assert sum(compiles[2:]) == 0, compiles
