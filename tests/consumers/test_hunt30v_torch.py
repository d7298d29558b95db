"""Vision code nobody here ran before, unchanged on the lazy device against
eager CPU (issue 39, hunt 30v): torchvision's classification models not in the
zoo (EfficientNet-B0/V2-S, DenseNet-121, GoogLeNet and Inception-v3 with their
auxiliary heads, SqueezeNet, VGG11-BN, MNASNet, Swin-T/V2-T, MaxViT-T,
ConvNeXt-T), its segmentation models (FCN, DeepLabV3 with ASPP, LRASPP),
video models (S3D, MViT-V2-S, Swin3D-T) at tiny clips; timm's EfficientNet,
MixNet, CoAtNet, MaxViT, Swin, DeiT (distilled), BEiT, EVA-02, LeViT,
MobileViT, EfficientFormer, RepVGG, NFNet, CSPNet, DLA, HRNet, ResNeSt,
Res2Net, SelecSLS, each trained with one of timm's own optimizers (LAMB,
LARS, AdaBelief, NAdamW, Lion, MADGRAD, RMSpropTF) and its cosine schedule
with a warm-up; torchvision's transforms v2 (RandomResizedCrop, ColorJitter,
Normalize, MixUp/CutMix) on lazy images. The loops are in cases_hunt30v.py;
``python tests/consumers/cases_hunt30v.py [names]`` prints the table.

Every model traced one step with no fallback (35 of 35). The loops compile
graphs of 2,000-10,000 nodes (one to several minutes each under load); they
run with ``LAZYCORE_TEST_FULL=1``. CI runs the pieces the loops go through
that compile little: the transforms v2 pipeline on a lazy batch against
eager's values, and timm's optimizers with its scheduler on a small model.

Fixed: timm's ``reparameterize_model`` (RepVGG) sets a new CPU ``nn.Conv2d``'s
``weight.data`` to the folded lazy kernel, which torch refused for a wrapper
subclass (RuntimeError); frontends/torch/modules.py swaps the tensors as
torch moves data from CPU to CUDA, and a lazy tensor given a CPU value moves
to the CPU as a CUDA one does (tests/torch/test_set_data_to_lazy.py).

Found and left: RepVGG-A0 at 2x3x64x64 parts from eager within 4
steps (state 2.9e-2) with lazycore the nearer to float64 (first step's
gradients 5.3e-4 against eager's 3.0e-3); session 32 found the loop chaotic
(a float64 run whose weights move by 1e-7 ends 4.9e-2 away:
cases_hunt30v.float64_spread), so its first step is held to float64 and the
loop is a strict xfail. GoogLeNet likewise (6.0e-1), its first step parting
from float64 at one ReLU input that float32 rounds across zero.
Session 33 located Swin-T's and EfficientNet-V2-S's (AdamW) distances:
one step, lazycore is about as near float64 as eager, module by module,
and AdamW's first update ``lr * g / (|g| + eps)`` turns float32's rounding
at gradients near zero (0 in float64 at 31 of EfficientNet's batch norm
biases) into updates up to ``2 lr`` apart: the loops' end distances.
Session 34 holds Swin-T to zoo_harness.referee (_ELEMENTS): those elements
against the float64 run, every other one against eager at 1e-4, the first
step's gradients per parameter; EfficientNet-V2-S's loop amplifies past it.
Session 31 compared the loops hunt 30v left uncompared (figures at _REFEREE
and _KNOWN): LeViT-128s, MixNet-S, MobileViT-XXS, timm's EfficientNet-B0 and
torchvision's are nearer float64 than eager (referee); DLA34, MNASNet-0.5 and RegNet-X-400MF are chaotic at these
sizes (eager float32 itself ends 0.43, 3.3, 1.5 from float64), DLA34's first step held to
float64 instead; VGG11-BN's 1.6e-5 from float64 (eager 7.2e-6) is XLA
CPU's convolution summing with ~2x eager's error, located one step in, layer
by layer. Transforms v2 on lazy images compile a program per step where
a crop's size varies (``RandomResizedCrop``'s size is a shape); a varying
corner (``RandomCrop``) is a program parameter once it has varied (2 compiles
in 6 steps: tests/torch/test_varying_slice_starts.py).
torchvision's references apply them on the host in the DataLoader, where
they cost nothing to compile.
"""

import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))

pytest.importorskip("torchvision")
pytest.importorskip("timm")

import cases_hunt30v as cases  # noqa: E402
from _bits import BY_HAND, MODEL_RUN, cpu_has_avx512, cpu_vendor  # noqa: E402
from test_hunt26_torch import dev  # noqa: E402, F401 (the shared harness; dev is a fixture)


def test_transforms_v2_on_lazy_images_as_eager(dev):
    """torchvision's transforms v2 on a lazy batch: the random parameters are
    drawn on the host from the seeded global generator, so both devices crop,
    flip and jitter alike; RandomResizedCrop's antialiased resize, ColorJitter
    (brightness, contrast, saturation, hue: RGB to HSV and back), Normalize
    and CutMix/MixUp give eager's values, no fallback."""
    from lazycore.observe import metrics
    from torchvision.transforms import v2

    tf = v2.Compose([v2.RandomResizedCrop(10, antialias=True), v2.RandomHorizontalFlip(),
                     v2.ColorJitter(0.4, 0.4, 0.4, 0.1), v2.Normalize([0.5, 0.4, 0.3], [0.2, 0.25, 0.3])])
    mix = v2.RandomChoice([v2.MixUp(num_classes=3), v2.CutMix(num_classes=3)])
    imgs = torch.rand(2, 3, 14, 12, generator=torch.Generator().manual_seed(0))
    labels = torch.tensor([0, 2])

    def run(device):
        torch.manual_seed(3)
        x = torch.stack([tf(i) for i in imgs.to(device)])
        return [t.cpu() for t in mix(x, labels.to(device))]

    want = run("cpu")
    metrics.reset()
    got = run(dev)
    assert metrics.counters().get("fallbacks", 0) == 0, metrics.fallbacks()
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("opt", ["lamb"] + [
    pytest.param(o, marks=BY_HAND) for o in ("lion", "lars", "adabelief", "nadamw", "madgrad", "rmsproptf")])
def test_timm_optimizers_with_schedule_as_eager(dev, opt):
    """timm's ``create_optimizer_v2`` optimizers with ``create_scheduler_v2``'s
    cosine schedule and warm-up (``step_update`` each step, as timm's
    train.py) on a small network: eager's losses and parameters, no fallback,
    no compile after the warm-up steps."""
    import torch.nn as nn
    import torch.nn.functional as F
    from cases_hunt27 import _cpu_state
    from test_hunt26_torch import _counts
    from zoo_harness import _rel, _state_diff

    import lazycore.torch as ltorch
    from lazycore.observe import metrics

    def loop(device, each):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(6, 8), nn.LayerNorm(8), nn.GELU(), nn.Linear(8, 3)).to(device)
        optim, sched = cases._optimizer(opt, model)
        g = torch.Generator().manual_seed(1)
        losses = []
        for step in range(5):
            x, y = torch.randn(4, 6, generator=g).to(device), torch.randint(0, 3, (4,), generator=g).to(device)
            loss = F.cross_entropy(model(x), y)
            optim.zero_grad()
            loss.backward()
            optim.step()
            sched.step_update(step + 1)
            losses.append(loss.detach())
            each()
        return [float(v) for v in losses], _cpu_state(model.state_dict())

    want, want_state = loop(torch.device("cpu"), lambda: None)
    metrics.reset()
    marks = [_counts()]

    def each():
        ltorch.mark_step()
        marks.append(_counts())

    got, got_state = loop(dev, each)
    assert metrics.counters().get("fallbacks", 0) == 0, metrics.fallbacks()
    assert max(_rel(a, b) for a, b in zip(got, want)) < 1e-5, (got, want)
    assert _state_diff(got_state, want_state)[0] < 1e-5
    compiles = [b[0] - a[0] for a, b in zip(marks, marks[1:])]
    assert sum(compiles[2:]) == 0, compiles


# Loops whose four steps amplify float32's rounding (eager float32 itself ends far from float64; see
# _KNOWN): their first step is held to float64 instead. name -> (model, image size). One step, largest
# distance of a parameter's gradient from float64's, eager / lazycore (by hand, per module, load 16):
# DLA34 7.9e-5 / 7.2e-5; RegNet-X-400MF 3.0e-1 / 9.4e-4 (eager's block4-9 lands on the other side of a
# boundary; its loss 1.9e-5 from float64's, lazycore's 1.0e-6).
# RepVGG-A0 (session 32, load 8-12): 3.0e-3 / 5.3e-4 (forward, per module, 1.7e-4 / 3.1e-5; loss 6.6e-7 /
# 5.4e-8 from float64's).
_FIRST_STEP = {"timm_dla34": (cases._timm("dla34"), 64), "tv_regnet_x_400mf": (cases._tv("regnet_x_400mf"), 64),
               "timm_repvgg_a0": (cases._timm("repvgg_a0"), 64)}


@MODEL_RUN
@pytest.mark.parametrize("name", list(_FIRST_STEP))
def test_first_step_layer_by_layer_as_near_float64_as_eager(dev, name):
    """A chaotic loop's first step (its loop below is an xfail: DLA34's four
    SGD steps end 0.43 from float64 in eager float32), held to a float64 run
    layer by layer: every convolution, batch norm (training) and linear layer
    of the model, given the input and output gradient eager float32's first
    step gave it, has its output, input gradient and parameter gradients no
    further from float64's than NOISE_FACTOR x eager's (at least GRAD_ULPS
    ulps of the largest; zoo_harness.first_step_check); the whole step's loss
    by the same rule; no fallback.

    Not the whole step's gradients against eager's distance (this test's rule
    until session 56): there a few batch norm channels over one nonzero value,
    and ReLU inputs within rounding of zero, amplify whichever rounding a run
    has, so eager's own distance is a draw. Measured on an AMD Zen 3 (session
    56; largest gradient distance from float64, relative to its tensor's
    largest): RegNet-X-400MF eager 7.9e-4 on one thread, 2.1e-1 on two (a
    ReLU crossing in block4), 1.2e-3 without oneDNN; RepVGG-A0 eager
    8.6e-4 to 2.1e-3, lazycore 6.5e-3 (stages.2.1's channel 180 is one value,
    0.011, a sum of three branches near 0.2, each rounded in its own order:
    its batch norm turns lazycore's 5.8e-7 and eager's 1.8e-7 into the
    difference). On the session-32 machine the draws went the other way
    (RepVGG eager 3.0e-3, lazycore 5.3e-4). Layer by layer, here, lazycore's
    largest error is at most 0.8x of what the rule admits."""
    from lazycore.observe import metrics
    from zoo_harness import EPS32, GRAD_ULPS, NOISE_FACTOR, first_step_check

    import lazycore.torch as ltorch

    build, size = _FIRST_STEP[name]
    layers, record = cases.layer_inputs(build, size=size)
    assert len(layers) > 50, len(layers)  # (every layer of the model, not a few)
    want = cases.layer_steps(layers, record, torch.device("cpu"))
    ref = cases.layer_steps(layers, record, torch.device("cpu"), torch.float64)
    metrics.reset()
    got = cases.layer_steps(layers, record, dev)
    assert metrics.counters().get("fallbacks", 0) == 0, metrics.fallbacks()

    def flat(steps):
        return {f"{k}: {q}": t for k, v in steps.items() for q, t in v.items()}

    _, bad, _ = first_step_check(flat(got), flat(want), flat(ref))
    assert not bad, bad

    want_loss, want_grads = cases.first_step_grads(build, torch.device("cpu"), size=size)
    ref_loss, _ = cases.first_step_grads(build, torch.device("cpu"), torch.float64, size=size)
    metrics.reset()
    got_loss, got_grads = cases.first_step_grads(build, dev, size=size)
    ltorch.mark_step(wait=True)
    assert metrics.counters().get("fallbacks", 0) == 0, metrics.fallbacks()
    assert set(got_grads) == set(want_grads)
    tol = NOISE_FACTOR * max(abs(want_loss - ref_loss), GRAD_ULPS * EPS32 * abs(ref_loss))
    assert abs(got_loss - ref_loss) <= tol, (got_loss, want_loss, ref_loss)


@MODEL_RUN
def test_efficientnet_v2_s_first_step_gradients_per_parameter(dev):
    """EfficientNet-V2-S's loop (AdamW) amplifies its first update's noise
    past any first-step rule (_KNOWN), so its lowering is held at the first
    step: every parameter's gradient no further from float64's than
    NOISE_FACTOR x eager's (at least 16 ulps of its largest), the check
    zoo_harness.referee makes (session 34, load 12, inside the loop: at most
    2.1x, features.6.14.block.2.fc2.weight), and the loss as near float64's
    as eager's by the same rule, no fallback."""
    from lazycore.observe import metrics
    from zoo_harness import EPS32, GRAD_ULPS, NOISE_FACTOR, first_step_check

    import lazycore.torch as ltorch

    build = cases._tv("efficientnet_v2_s")
    want_loss, want = cases.first_step_grads(build, torch.device("cpu"))
    ref_loss, ref = cases.first_step_grads(build, torch.device("cpu"), torch.float64)
    metrics.reset()
    got_loss, got = cases.first_step_grads(build, dev)
    ltorch.mark_step(wait=True)
    assert metrics.counters().get("fallbacks", 0) == 0, metrics.fallbacks()
    assert set(got) == set(ref)
    _, bad, _ = first_step_check(got, want, ref)
    assert not bad, bad
    # the loss held alike: loop's run, load 12: 3.1e-6 from float64's, eager's 9.8e-6
    tol = NOISE_FACTOR * max(abs(want_loss - ref_loss), GRAD_ULPS * EPS32 * abs(ref_loss))
    assert abs(got_loss - ref_loss) <= tol, (got_loss, want_loss, ref_loss)


# --- the loops (LAZYCORE_TEST_FULL=1) ---------------------------------------------------------------

# name -> bounds other than (loss rtol 1e-5, state 1e-5, no compile after 2 steps, 1 program a step)
_BOUNDS = {
    # RandomResizedCrop's crop sizes are shapes: a program a step
    "transforms_v2_mixup": dict(late=2),
}

# Loops where eager float32 itself ends far from the float64 answer (deep stacks of batch norms over a
# few numbers at tiny inputs): lazycore is held to that answer, no further from it than eager. (RepVGG-A0
# was here until session 32: chaotic, see _KNOWN.)
# By hand at load 3-4 (state from float64, eager / lazycore): repvgg_reparam 3.9e-1 / 3.8e-1, cspresnet50
# 9.8e-2 / 6.0e-5, deit_tiny_distilled (NAdamW's first steps on near-zero gradients) 2.0e-4 / 1.8e-4.
# Session 31 (cases_hunt30v.py's table with REFEREE=1, load 10-18): levit_128s (LARS; lazy from eager
# state 1.5e-4, at a batch norm's running_var) 9.9e-5 / 5.5e-5, efficientnet_b0 (LAMB; lazy from eager
# loss 2.4e-5, state 1.1e-5) 8.7e-6 / 5.8e-6, torchvision's efficientnet_b0 (SGD, chaotic at 2x3x64x64:
# lazy from eager loss 1.1e-1, state 3.1e-1) 4.1e-1 / 4.0e-1, mixnet_s (RMSpropTF; lazy from eager state
# 1.4e-5 at a running_var) 1.3e-5 / 1.1e-5, mobilevit_xxs (AdamW; lazy from eager state 4.2e-3 at a batch
# norm's bias) 2.8e-3 / 2.0e-3, coatnet_nano (AdamW; state 4.2e-3) 2.5e-3 / 2.2e-3, selecsls42b (SGD,
# chaotic: loss 1.7e-1, state 3.5e2 at the head's running_var) 1.8e3 / 3.5e2, hrnet_w18_small (SGD, chaotic:
# loss 4.5e-2, state 3.4e-1) 4.7e-1 / 3.5e-1.
_REFEREE = {"timm_repvgg_reparam", "timm_cspresnet50", "timm_deit_tiny_distilled",
            "timm_levit_128s", "timm_efficientnet_b0", "tv_efficientnet_b0", "timm_mixnet_s", "timm_mobilevit_xxs",
            "timm_selecsls42b", "timm_hrnet_w18_small",
            # session 31, after the helpers (REFEREE=1 table, quiet): densenet121 (SGD; lazy from eager loss
            # 8.2e-3, state 4.1e-2) 5.5e-2 / 4.7e-2, deeplabv3_mobilenet (state 2.1e-4) 8.3e-4 / 8.2e-4
            "tv_densenet121", "seg_deeplabv3_mobilenet",
            # session 32 (REFEREE=1 table, load 10-11; the figures session 31 measured, rerun): swin_v2_t (AdamW;
            # lazy from eager loss 2.6e-3, state 2.0e-3 at an attention's qkv weight) 2.0e-3 / 1.9e-3, maxvit_t
            # (AdamW, 1x3x224x224; loss 6.8e-6, state 3.1e-3 at an MBConv pre-norm bias) 1.9e-3 / 1.7e-3, s3d
            # (SGD, 1x3x16x224x224; loss 1.6e-2, state 1.9e-1 at the stem's weight) 2.43e-1 / 2.00e-1
            "tv_swin_v2_t", "tv_maxvit_t", "tv_s3d",
            # session 33 (REFEREE=1 table, load 9-15): swin3d_t (AdamW, 1x3x4x64x64; lazy from eager loss 2.1e-6,
            # state 3.9e-4 at an MLP weight, 0 fallbacks, compiles [1,1,0,0]) 4.94e-4 / 4.75e-4. As Swin-T's
            # (_KNOWN), an AdamW loop's distance is set by its first update at gradients near zero: a margin of
            # rounding, which a change of summation order can move either way. mvit_v2_s (AdamW, 1x3x16x224x224;
            # loss 4.4e-4, state 3.2e-3 at a pooling norm's bias, 0 fallbacks, compiles [1,1,0,0], load 8-17)
            # 2.295e-3 / 2.277e-3
            "tv_swin3d_t", "tv_mvit_v2_s"}


# Left open (issue 39), each failing in full mode as committed; strict, so a change shows. DLA34 (SGD,
# 4 steps at 2x3x64x64) ends further from float64 than eager does (state 5.5e-1 against 4.3e-1), but the
# loop is chaotic, not a lowering's error: eager float32 itself (one thread) ends 0.46-0.88 from float64
# at every batch, size and learning rate tried (2, 4, 8 x 64x64, 2 and 4 x 128x128; lr 1e-2, 3e-3, 1e-3,
# 1e-4: at lr 1e-4 the third loss is 6.89 in float32 and 7.55 in float64), while lazycore's first step
# is as near float64 as eager's (test_first_step_layer_by_layer_as_near_float64_as_eager; per module, forward
# and backward, lazycore's largest distance 4.7e-5 / 7.2e-5 against eager's 7.5e-5 / 7.9e-5). MNASNet-0.5
# (SGD, 2x3x64x64) likewise: eager float32 ends 3.3 from float64 (losses 6.94, 12.70, 1.60, 7.72 against
# float64's 6.94, 12.67, 4.98, 3.37), lazycore 4.0; one step, per module, lazycore's largest distance
# from float64 forward 7.1e-5 / output gradients 1.1e-4 against eager's 8.7e-5 / 1.4e-4, yet its first
# loss 4.2e-5 from float64's against eager's 2.8e-5 (absolute). RegNet-X-400MF (SGD, 2x3x64x64): eager
# float32 ends 1.5 from float64, lazycore 1.8 (5.5e-2 apart in loss). VGG11-BN (SGD, 2x3x32x32) ends 1.6e-5
# from float64 against eager's 7.2e-6 (1.7e-5 from eager, at features.23.running_var): located, one
# step, to its convolutions: the first (27 products), its batch norm and pool give eager's bits, the second (64 -> 128
# channels, sums of 576 products) on eager's input is 8.1e-7 from float64 against eager's 3.6e-7, and
# every later layer about 2x eager's: XLA CPU's convolution sums in its own order with ~2x eager's error
# (docs/status.md; tests/torch/test_conv_bn_numerics.py), which a float64 sum would fix at 2-3x the time.
_KNOWN = {
    "timm_maxvit_nano": "Lion: state 4.6e-3 from eager's (a pre-norm bias), float64 eager 4.6e-3 / lazycore "
                        "4.6e-3 (equal to 2 digits); not located",
    "tv_mnasnet0_5": "chaotic loop: eager float32 ends 3.3 from float64, lazycore 4.0",
    "tv_regnet_x_400mf": "chaotic loop: eager float32 ends 1.5 from float64, lazycore 1.8; its first step is "
                         "as near float64 as eager's layer by layer "
                         "(test_first_step_layer_by_layer_as_near_float64_as_eager)",
    "tv_vgg11_bn": "XLA CPU's convolution sums with ~2x eager's error: state 1.6e-5 from float64 against "
                   "eager's 7.2e-6 (1.7e-5 from eager)",
    "timm_efficientformer_l1": "eager cannot referee it: torch 2.13.0's CPU batch norm backward (training, batch "
                               "1) gives wrong weight and bias gradients when the gradient arrives with transposed "
                               "strides (the Meta4D block before Flat's flatten(2).transpose(1, 2)), float64 too; "
                               "lazycore's are the true ones (tests/torch/test_batch_norm_transposed_gradient.py)",
    "tv_convnext_tiny": "chaotic loop: float64 itself, its initial weights moved by 1e-7 (relative), ends 7.5e-4 "
                        "from the unmoved run (cases.float64_spread), further than both float32 runs: state 2.1e-4 "
                        "from eager; float64 eager 6.6e-4 / lazycore 7.2e-4. Not eager's "
                        "strides: its float64 run with every backward kernel's inputs made contiguous "
                        "(cases.float64_strides; 88 convolution_backward and 16 native_layer_norm_backward calls had "
                        "strided ones) ends where the plain one does (0.0 at float32 precision)",
    "tv_efficientnet_v2_s": "AdamW's first update amplifies float32's rounding (located, session 33): one step, "
                            "per module, lazycore is about as near float64 as eager (forward 3.4e-5 / eager 3.6e-5, "
                            "output gradients 4.9e-5 / 5.3e-5, parameter gradients 6.1e-5 / 4.7e-5, each relative "
                            "to its tensor's largest value; none over 2.3x eager's), but 31 batch norm biases' "
                            "gradients are 0 in float64 (1e-15) and rounding (5e-7) in float32, and 125 (eager) / 151 "
                            "(lazycore) of 2.0e7 gradient elements near zero change sign, so lr * g / (|g| + eps) puts "
                            "the first update 2.0e-3 (two steps of lr 1e-3) from float64's in both runs. Loop: loss "
                            "3.5e-2 / state 3.3e-2 from eager; float64 eager 3.1e-2 / lazycore 3.9e-2. Not eager's "
                            "strides: no backward kernel gets a strided input. float64 with its weights moved by 1e-7 "
                            "ends 1.2e-2 away (cases.float64_spread; last loss 3.767 against 3.826). Session 34, "
                            "zoo_harness.referee (ELEMENTS=1, load 12): no parameter's first-step gradient over 2.1x "
                            "eager's error (the lowering holds; 49001 elements in 269 tensors noise-determined, "
                            "lazycore's mean distance from float64 there 2.1e-4 / eager's 2.0e-4), but the rest of "
                            "the state ends 3.0e-3 from eager (features.6.6.block.0.0.weight), 145 running "
                            "statistics over 1e-4 from it: the loop amplifies its first update's noise "
                            "past what a rule at the first step can referee (losses 3.6700 eager, 3.7984 lazycore, "
                            "3.8262 float64 at step 4)",
    "timm_repvgg_a0": "chaotic loop: float64 itself, its initial weights moved by 1e-7 (relative), ends 4.9e-2 "
                      "from the unmoved run (cases.float64_spread; eager float32 5.2e-2 on one thread); lazycore "
                      "6.9e-2, eager 5.3e-2; "
                      "its first step is as near float64 as eager's layer by layer "
                      "(test_first_step_layer_by_layer_as_near_float64_as_eager)",
    "tv_googlenet": "chaotic loop: float64 itself, its initial weights moved by 1e-7 (relative), ends 6.0e-1 from "
                    "the unmoved run (cases.float64_spread; eager float32 1.3e-1 on one thread); lazycore 6.6e-1, "
                    "eager 9.3e-2. Its first "
                    "step parts at one ReLU input: inception5b.branch3.1's batch norm output at (0, 119, 0, 1) is "
                    "-5.7e-5 in float64, -1.7e-5 in eager float32, +2.3e-5 in lazycore (that layer's forward 8.9e-5 "
                    "from float64, eager's 8.8e-5), so its gradient 1.0e-3 passes there in lazycore alone",
    "tv_inception_v3": "chaotic from its first step (session 33, load 12-17): 4 SGD steps at 2x3x299x299 end "
                       "7.8 (eager float32) / 6.5 (lazycore) from float64 (state 1.0e1 from eager at AuxLogits.conv1"
                       ".bn.running_var, loss 4.2e-2; 0 fallbacks, compiles [1,1,0,0]); one step (first_step_grads), "
                       "both float32 runs' gradients already part from float64's by a third: eager 0.33 (at "
                       "Mixed_6d.branch7x7dbl_4.conv.weight), lazycore 0.37 (Mixed_7c.branch3x3dbl_2.conv.weight, "
                       "where eager's is 4.5e-2), each relative to its tensor's largest value, while the loss is "
                       "3.5e-5 / 1.6e-5 from float64's: a first-step test would rank two runs already apart (it "
                       "fails, 0.37 > 0.33). Not located further",
    "timm_dla34": "chaotic loop: eager float32 ends 0.43 from float64 (0.46 on one thread), lazycore 0.55; "
                  "its first step is as near float64 as eager's layer by layer "
                  "(test_first_step_layer_by_layer_as_near_float64_as_eager)",
}
if cpu_vendor() == "GenuineIntel" and cpu_has_avx512():
    # measured on an Intel Xeon (model 207, AVX-512, AMX), session 59; it passed _REFEREE's rule where session 32
    # added it (lazycore from eager: loss 2.6e-3)
    _KNOWN["tv_swin_v2_t"] = (
        "chaotic loop on Intel AVX-512: float64 itself, its initial weights moved by 1e-7, ends 2.4e-3 from the "
        "unmoved run (cases.float64_spread), further than eager float32 (2.0e-3); lazycore 4.2e-3 (_REFEREE's rule "
        "fails). Every first-step gradient is within 4x eager's error from float64 (zoo_harness.referee: none "
        "bad), but the second loss is already 1.1e-4 from eager's (eager at 1 and 2 torch threads: 1.9e-5) and "
        "the third 5.5e-2 (4.396 against 4.654; eager's two thread counts 8.9e-4 apart), the state 3.9e-3 from "
        "eager at features.7.0.attn.qkv.weight. Not located further")


# Held to zoo_harness.referee, the float64 referee element by element: an element whose float64 first-step
# gradient is within the error admitted of lazycore's (4x eager's) is noise-determined under AdamW (its
# first update lr * g / (|g| + eps) takes rounding's sign) and held to float64; every other element keeps
# eager's 1e-4, and lazycore's first-step gradients are checked per parameter. name -> what it moved (by
# hand, session 34, load 10-15).
_ELEMENTS = {
    # was a strict xfail (session 33 located it): features.6.reduction.weight's gradient -2.9e-9 in float64
    # (3e-8 of its tensor's largest) puts lazycore 6.4e-4 from eager there; the rest of the state is 3.1e-5
    # from eager, and no parameter's first-step gradient over 2.3x eager's error (head.bias 6.3e-8 / 2.8e-8)
    "tv_swin_t": "20556 of 27.5M elements in 73 tensors: 10055 with float64 gradient exactly 0 (10008 of them "
                 "relative position bias entries no 64x64 window uses), 10501 weights' near-zero gradients; "
                 "lazycore's mean distance from float64 there 1.28e-6 / eager's 1.24e-6, largest 6.7e-4 "
                 "(features.6.reduction.weight; bound 8.4e-3)",
    # was in _REFEREE (whole state, lazycore 2.0e-3 / eager 2.5e-3 from float64: a coin toss between two runs'
    # noise); state 3.8e-3 from eager at stages.0.blocks.0.pre_norm.bias
    "timm_coatnet_nano": "17196 elements in 81 tensors (pre-norm biases, a third of qkv biases, weights' near-zero "
                         "gradients) and 7 norm1 running means; mean distance from float64 1.98e-5 / eager's "
                         "2.08e-5, largest 2.0e-3 (bound 8.4e-3); the rest 4.5e-5 from eager",
}


@MODEL_RUN
@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.xfail(reason=_KNOWN[n], strict=True)) if n in _KNOWN else n
    for n in cases.CASES])
def test_loop_trains_as_eager(name):
    out = cases.compare(name, referee=name in _REFEREE, elements=name in _ELEMENTS)
    b = _BOUNDS.get(name, {})
    if name in _ELEMENTS:
        print(name, out.refereed.moved())  # pytest -s
        assert out.loss_rel < out.loss_bound(b.get("loss", 1e-5)), (out.eager_losses, out.lazy_losses,
                                                                     out.eager_spread)
        out.refereed.check()
    elif name in _REFEREE:
        assert out.lazy_f64 <= max(out.eager_f64, 1e-5), (out.lazy_f64, out.eager_f64)
    else:
        assert out.loss_rel < b.get("loss", 1e-5), (out.eager_losses, out.lazy_losses)
        assert out.state_diff < b.get("state", 1e-5), (out.worst, out.state_diff)
    assert out.fallbacks == 0, out.fallback_ops
    assert sum(out.compiles[cases.WARMUP:]) <= b.get("late", 0), out.compiles
    assert max(out.programs[cases.WARMUP:]) <= b.get("programs", 1), out.programs
