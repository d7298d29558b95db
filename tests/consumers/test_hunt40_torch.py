"""transformers code nobody here ran, unchanged on the lazy device against eager
CPU (issue 39, hunt 40): cases_hunt40.py lists the loops (LayoutLMv3, CLAP, X-CLIP,
DAB-DETR, MGP-STR, ZoeDepth, OneFormer, DonutSwin under a BERT decoder, FLAVA,
BridgeTower, UDOP, DAC, Grounding DINO). The comparison is hunt 27's (losses, state,
fallbacks, compiles after the 2 warm-up steps, programs a step); ``python
tests/consumers/cases_hunt40.py [names]`` prints the table.

Found: Grounding DINO's text masks (``torch.cummax`` / ``cummin`` of positions) fell
back to eager, 8 fallbacks a step (lowered now; tests/torch/test_cummax_cummin.py).
FLAVA compiled again at step 4, where its masked-patch count (8) equals its bucket
and its text length: the padded walk widened the text's values made at 8 positions
and refused the padding (the embedding gradient's scatter kept as it was brought
back the old checks); values made at a count's size are now read as the walks at
other counts read them (runtime/padding.py ``READINGS``): one program. UDOP selects each
image's patches by a data-dependent count and makes them up to 16 with copies of a
filler (``torch.stack([filler] * m)``), then stacks the images: padding refused
the split of the joined patches (PyTorch's ``stack`` joins along the old dimension);
``stack`` now joins along the new one and the filler is selected past the count
(tests/torch/test_padded_to_length.py), but the two images' counts are symbols by
value (one symbol where they are equal, two where not) and a count equal to the
text's 10 widens the text: a program per combination, an expected failure.

All loops run with ``LAZYCORE_TEST_FULL=1`` (35 s to 5 minutes each); none in CI.
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import cases_hunt40 as cases  # noqa: E402
from cases_hunt27 import check_outcome, check_refereed_outcome  # noqa: E402
from _bits import MODEL_RUN  # noqa: E402 (tests/ is on the path)

# name -> bounds other than (loss rtol 1e-5, state 1e-5, no compile after 2 steps, 1 program a step)
_BOUNDS: dict = {
    # the Hungarian matcher's cost matrices on the host (the last decoder layer and the auxiliary
    # ones) and num_boxes: measured [4, 5, 4, 4]
    "dab_detr_detection_linear": dict(programs=5),
}

# gradients zero in exact arithmetic under softmax or normalisation (attention key biases, CLAP's and
# BridgeTower's; ZoeDepth's metric head under its bins' normalisation): held element by element to the
# float64 run
_ELEMENTS = ("clap_contrastive_cosine", "zoedepth_metric_l1", "bridgetower_contrastive_cosine")

_KNOWN = {
    "udop_document_seq2seq_linear": "a compile a step: a program per combination of the two images' counts",
    "xclip_video_text_linear": "float64 referee: a text key weight's first gradient 5.8x eager's distance",
}

# Grounding DINO, its fallbacks mended: the state passes the element referee (48,440 elements held to the
# float64 run, noise mean lazy 2.35e-5 / eager 2.38e-5), but its losses part from eager's (1e-7 at step 2,
# 4.6e-5 at step 4) past check_refereed_outcome's bound, while the float64 run is 1.0e-3 from lazycore's
# losses and 1.1e-3 from eager's: undecided whether that is float32's noise only; left out until it is
# OneFormer: losses equal, state 1.4e-5 from eager at a text attention in_proj bias (zero gradient in exact
# arithmetic), but its float64 run raises in eager (its contrastive loss multiplies a float32 tensor into
# float64 ones: "expected m1 and m2 to have the same dtype"), so no referee decides it; it reads on the host
# (the matcher, an isfinite check at modeling_oneformer.py:1122, a torch.where at :1881: 10 programs a step)
# and its fully masked rows change its shapes until step 4 (compiles [8, 3, 2, 0]): left out too
_UNSETTLED = ("grounding_dino_detection_linear", "oneformer_swin_linear")


@MODEL_RUN
@pytest.mark.parametrize("name", [n if n not in _KNOWN else pytest.param(n, marks=pytest.mark.xfail(
    reason=_KNOWN[n], strict=True)) for n in cases.CASES if n not in _UNSETTLED])
def test_loop_trains_as_eager(name):
    out = cases.compare(name, elements=name in _ELEMENTS)
    (check_refereed_outcome if name in _ELEMENTS else check_outcome)(out, _BOUNDS.get(name, {}), cases.WARMUP)
