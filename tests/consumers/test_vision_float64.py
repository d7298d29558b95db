"""torchvision's Faster R-CNN and DeepLabV3 trained on the lazy device, held to
the float64 answer where eager float32 itself is far from it (issue 39).

Each model trains 4 steps (SGD momentum 0.9, one seeded init, the same batches
and draws: tests/zoo/float64_table.py's :class:`Case` s) three times: eager
float32, eager float64 and lazycore float32. A step where lazycore is within
the zoo's bounds of eager (loss 1e-5 relative, parameters and buffers 1e-4)
passes; where it is not, lazycore must end no further from the float64 answer
than eager float32 does (so eager float32 is itself that far from it). The runs
compile graphs of thousands of nodes: ``LAZYCORE_TEST_FULL=1`` only.

Measured (2026-11-30, 2-core Xeon at load 20-28), DeepLabV3 (MobileNetV3-large
backbone, ASPP, 2 images of 64x64, 3 classes, aux off, dropout off), per step:
state eager32 - f64 2.9e-7, 8.9e-6, 2.2e-4, 1.4e-3; lazy32 - f64 2.1e-7,
8.3e-6, 2.1e-4, 1.2e-3; loss eager32 - f64 1.9e-8, 2.1e-7, 1.4e-5, 3.0e-4;
lazy32 - f64 1.9e-8, 1.1e-7, 1.2e-5, 2.4e-4 (lazy32 - eager32: 6.1e-5 at
step 4). Batch norm over 2 images' deep blocks (8x8 after the dilated stride
16) rounds the same float32 problem into percent-level gradient differences.
"""

import os
import sys

import pytest

pytest.importorskip("torchvision")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "zoo"))

import float64_table as ft  # noqa: E402
from _bits import MODEL_RUN  # noqa: E402 (tests/ is on the path)

WARMUP = 2  # steps that may compile: the model, then the optimizer's state


def _no_further_from_float64_than_eager(d, k=1.0):
    """Each step as eager, or no further than ``k`` times eager float32 from float64."""
    for step, ((le, se, we), (ll, sl, wl), (lx, sx, wx)) in enumerate(zip(d["eager-f64"], d["lazy-f64"],
                                                                             d["lazy-eager"]), 1):
        if lx > 1e-5:
            assert ll <= k * le, (step, "loss", lx, le, ll)
        if sx > 1e-4:
            assert sl <= k * se, (step, "state", wx, se, we, sl, wl)


CASES = {c.name: c for c in ft.CASES}


@MODEL_RUN
def test_deeplabv3_as_eager_or_no_further_from_float64():
    d = ft.case_distances(CASES["deeplabv3_mobilenet_v3_large-sgd"])
    _no_further_from_float64_than_eager(d)
    assert [c for c in d["counts"][WARMUP:]] == [(0, 1, 0)] * (len(d["counts"]) - WARMUP), d["counts"]
    assert sum(c[2] for c in d["counts"]) == 0, d["counts"]


@MODEL_RUN
def test_fasterrcnn_no_further_from_float64_than_a_relu_kink_takes_it():
    """Faster R-CNN (MobileNetV3-large FPN, 2 images of 64x64, 2 boxes each,
    3 classes). Step 1's gradients part at one ReLU: the box head's fc7
    pre-activation (proposal 15, unit 547) is -5.73e-7 in float64, eager float32
    rounds it to -5.51e-7 (error 2.2e-8), lazycore to +3.32e-7 (error 9.0e-7;
    lazycore's largest and median errors over that layer's 105472 outputs,
    2.60e-6 and 3.98e-7, are eager's 2.76e-6 and 4.09e-7, and 10 of the 105472 are
    within 1e-6 of 0). Eager float32 with that one mask element as lazycore
    rounds it gives lazycore's step-1 gradients (fc7.bias[547] -0.00298460247
    vs -0.00298460200; every gradient within 3.2e-4 of the largest, eager's own
    distance from float64 at that parameter being 2.9e-4). From there on the
    deep batch norms (2 images of 2x2 in ``backbone.body.16``) carry it:

    | step | state: eager32-f64, lazy32-f64, lazy32-eager32 | loss: same |
    |---|---|---|
    | 1 | 1.75e-06, 2.59e-06, 2.59e-06 | 2.4e-07, 1.2e-07, 1.2e-07 |
    | 2 | 6.78e-06, 1.06e-04, 1.06e-04 | 1.8e-08, 2.0e-06, 2.0e-06 |
    | 3 | 2.49e-04, 7.81e-04, 7.73e-04 | 6.3e-06, 2.5e-05, 3.1e-05 |
    | 4 | 3.16e-03, 6.57e-03, 7.64e-03 | 1.1e-04, 8.4e-04, 7.3e-04 |

    (the state's largest difference: ``backbone.body.16.1.running_var`` from step 2 on;
    2026-11-30, 2-core Xeon). ``k = 20``: that flip's 16x at step 2, not a
    wrong gradient's orders of magnitude."""
    d = ft.case_distances(CASES["fasterrcnn_mobilenet_v3_large_fpn"])
    _no_further_from_float64_than_eager(d, k=20.0)
    _fasterrcnn_counts(d["counts"])


def _fasterrcnn_counts(counts):
    """Per lazy step ``(compiles, programs, fallbacks)``; measured by hand
    (tests/zoo/float64_table.py's run_case, 2026-11-30, load 15-20):
    [(17, 18, 8), (9, 16, 8), (8, 14, 8), (4, 13, 8)], the losses bit for bit
    those before nms ran on the device.

    Fallbacks: 8 a step, all ``randperm`` (the samplers draw from eager's
    generator, ``_utils.py:55-56``, 2 images x 2 samplers); nms (2 a step) and
    ``torch.where`` of uint8 masks (4) ran eager's kernels before.

    Programs after the warm-up (13-14): each value torchvision reads cuts the
    step: per image ``remove_small_boxes`` (``ops/boxes.py:151``), the score
    threshold (``rpn.py:285``) and nms's kept count (``ops/boxes.py:54``); per
    image the RPN matcher's ``set_low_quality_matches_`` (``_utils.py:408``);
    the ROI sampler (``_utils.py:44``, one read apart), the pooler's levels
    (``poolers.py:201``) and the step itself. Compiles after the warm-up (8
    and 4 at steps 3-4): the programs whose shapes hold a kept count: image
    0's post-nms gathers ride in image 1's first read, image 1's in the
    matcher's, then the sampler, the pooler and the step (its forward and
    backward through the box head: a compile of about 110 s at load 20)."""
    assert [c[2] for c in counts] == [8] * len(counts), counts
    assert max(c[1] for c in counts[WARMUP:]) <= 14, counts
