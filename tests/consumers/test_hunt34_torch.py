"""timm and torchvision vision code nobody here trained, run unchanged on the
lazy device against eager CPU (issue 39, hunt 34): architectures no earlier
hunt and not the zoo reached (cases_hunt34.py lists them: ConvMixer,
MLP-Mixer, ResMLP, gMLP, ConvFormer, MambaOut, Sequencer2D, CaiT, XCiT,
PVT-v2, EdgeNeXt, ViT with relative-position MLP biases, torchvision's
MobileNetV2 in train mode, its VisionTransformer and FCOS), each a tiny random
config (32x32 images, a batch of 2, nothing downloaded) trained 4 steps with
timm's optimizer factory and cosine schedule or torchvision's SGD/AdamW. The
loops are hunt 30v's classification loop; the comparison is hunt 27's
(losses, state, fallbacks, compiles after the 2 warm-up steps, programs a
step); ``python tests/consumers/cases_hunt34.py [names]`` prints the table.

Every loop gives eager's values with no fallback; 13 of 15 hold the bounds
below, 1 compile a step for the first two steps and none after, 1 program a
step. Found and left (bounds and the xfails below say where): XCiT's class
attention key bias is rounding noise in both runs (its gradient is 0 in exact
arithmetic); MobileNetV2 at this size is chaotic in eager float32 itself;
FCOS's loss reads its foreground count and boolean masks on the host (3
programs a step, a compile per new count).

CI runs one loop (see ``_CI``); the others compile step programs of
thousands of nodes (a minute or more each under load) and run with
``LAZYCORE_TEST_FULL=1``.
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

pytest.importorskip("timm")
pytest.importorskip("torchvision")

import cases_hunt34 as cases  # noqa: E402
from cases_hunt27 import check_outcome, check_refereed_outcome  # noqa: E402
from _bits import MODEL_RUN  # noqa: E402 (tests/ is on the path)

_CI = ("tv_vit_one_layer_16px",)  # 2 compiles of ~1,900 nodes: 82 s at load 8.6 on the 2 cores, 24-30 s XLA each

# name -> bounds other than (loss rtol 1e-5, state 1e-5, no compile after 2 steps, 1 program a step)
_BOUNDS: dict = {
    # the class-attention layer's key bias (timm/models/xcit.py ClassAttn: q of the class token against
    # k of every token) adds q.b to every score of a row: softmax is shift invariant, so its gradient is 0
    # in exact arithmetic and AdamW moves it by lr-sized steps in the sign of each run's rounding. Eager
    # float32 itself ends 2.4e-5 from the float64 run there (3.8e-6 everywhere else); lazycore 2.8e-5 from eager
    "timm_xcit_cross_covariance": dict(state=5e-5),
    # the same for nn.MultiheadAttention's key bias (the middle third of in_proj_bias): eager float32's key
    # bias is only rounding (|k bias| <= 1.7e-5 after 4 steps, 1.7e-5 from the float64 run; lazycore 5.1e-6
    # from it, 1.2e-5 from eager); everything else is held to 1e-5 apart (_key_third_apart)
    "tv_vit_one_layer_16px": dict(state=5e-5),
    # the same key bias in its two layers (session 48, load 1: key thirds 1.7e-5 and 2.0e-6 from eager, query
    # and value thirds 1.3e-7 at most, the loss eager's bits), and the first layer's key weight: its gradient
    # sum_j dk_j x_j^T is ~0 too where the tokens are alike (this ViT barely trains: losses 2.3026, 2.3063,
    # 2.3032, 2.3159, ln 10 = 2.3026), so the float64 referee classes every element noise (zoo_harness.referee);
    # on an Intel Xeon with AVX-512 (session 59) it ends 1.25e-5 from eager, the query and value thirds 4.5e-8
    # and 3.6e-7. The rest within 1e-5 (_key_third_apart)
    "tv_vit_tiny": dict(state=5e-5),
}

# held element by element to the float64 run: PVT-v2's second-stage MLP weight ends 1.2e-5 from eager on an
# Intel Xeon with AVX-512 (session 63), where eager float32 itself is 1.2e-5 from float64 and lazycore 2.1e-6
_ELEMENTS = ("timm_pvt_v2_spatial_reduction",)

# name -> why the loop is a strict xfail (the fix shows as an XPASS)
_XFAIL: dict = {
    "tv_mobilenet_v2_train":
        "chaotic at this size, eager's own float32 is no reference: width 0.25 at 32x32 and a batch of 2, "
        "the last stages' batch norms normalize 2 numbers a channel (1x1 maps); eager float32 ends with an "
        "infinite features.6.conv.1.1.running_var, losses 2.0605 2.3036 2.3029 2.3082 against float64's "
        "2.0621 3.0634 2.8722 4.7129 (lazycore: loss 1.1 relative from eager, fallbacks 0, 1 program a step, "
        "no compile after the warm-up). At 64x64 and a batch of 4 eager float32 is still 0.26 (AdamW) to 0.56 "
        "(SGD) from float64 after 4 steps, 2e-3 apart in the second loss",
    "tv_fcos_focal_giou":
        "eager's values (loss 8.8e-8, state 1.5e-8, no fallback) but 3 programs a step and compiles [3, 2, 2, 1]: "
        "FCOS.compute_loss reads `foregroud_mask.sum().item()` (torchvision/models/detection/fcos.py:86, a "
        "program of its own), then indexes by that boolean mask (fcos.py:90, :99-100: the foreground count decides "
        "the shapes, a new program per count) and generalized_box_iou_loss's `intsctk[mask] = ...` "
        "(torchvision/ops/_utils.py:103) reads its mask (a second program); docs/status.md, boolean-mask indexing",
}


def _key_third_apart(out, first_weight=False):
    """torchvision's ViTs: every state tensor within 1e-5 of eager's but the key
    third of each attention's in_proj_bias and, with ``first_weight``, of the
    first layer's in_proj_weight (the query and value thirds: 1.3e-9 in
    tv_vit_one_layer_16px, 3.6e-7 in tv_vit_tiny), which the loop's bound
    holds."""
    from zoo_harness import _max_diff

    for name, got in out.lazy_state.items():
        want = out.eager_state[name]
        if name.endswith("in_proj_bias") or (first_weight and name.endswith("layer_0.self_attention.in_proj_weight")):
            third = got.shape[0] // 3  # rows: query, key, value
            for part in (slice(0, third), slice(2 * third, None)):
                assert _max_diff(got[part], want[part]) < 1e-5, name
        elif got.is_floating_point():
            assert _max_diff(got, want) < 1e-5, name


def _check(name):
    out = cases.compare(name, elements=name in _ELEMENTS)
    (check_refereed_outcome if name in _ELEMENTS else check_outcome)(out, _BOUNDS.get(name, {}), cases.WARMUP)
    if name in ("tv_vit_one_layer_16px", "tv_vit_tiny"):
        _key_third_apart(out, first_weight=name == "tv_vit_tiny")


@pytest.mark.parametrize("name", _CI)
def test_cheap_loop_trains_as_eager(name):
    _check(name)


@MODEL_RUN
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=_XFAIL[n])) if n in _XFAIL
                                  else n for n in cases.CASES if n not in _CI])
def test_loop_trains_as_eager(name):
    _check(name)
