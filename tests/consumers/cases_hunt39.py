"""The loops of test_hunt39_torch.py: transformers models no earlier hunt trained,
run unchanged in hunt 27's shape (``loop(device, each, dtype) -> (losses,
state)``, cases_hunt27.py) and compared by its ``compare``.

Mask2Former (universal segmentation on a Swin backbone: Swin's window padding
after its layer norms, multi-scale deformable attention in the pixel decoder,
masked attention in the transformer decoder, the Hungarian matcher on points
sampled at random, the uncertainty-sampled mask losses). Its first step never
finished compiling before (LLVM's vectorizer on a layer norm's mean copied
into the window pad's loop; tests/torch/test_layer_norm_eager_bits.py).
``python tests/consumers/cases_hunt39.py [names]`` prints the table.
"""

from __future__ import annotations

import contextlib
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "zoo"))

from cases_hunt27 import registry  # noqa: E402 (after the path)
from cases_hunt36 import _hf_loop  # noqa: E402

STEPS = 4
WARMUP = 2
CASES, case = registry()


@contextlib.contextmanager
def cpu_draws(dtype):
    """``torch.rand``/``randn`` asked for on a device drawn from eager's CPU
    generator and moved there, in the eager run and the lazy one alike: a
    model's own random sampling (Mask2Former's points) then draws the same
    numbers on both, as a replay buffer's data would be. Without it the lazy
    device draws from its own generator, as a GPU does. Draws of the default
    type are float32's numbers in ``dtype`` (the loop's), so the float64
    referee samples the same points (transformers' float64 Mask2Former cannot
    run otherwise: its float32 points meet float64 masks in grid_sample)."""
    from torch.overrides import TorchFunctionMode

    class CpuDraws(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if func in (torch.rand, torch.randn) and kwargs.get("device") is not None:
                device = kwargs.pop("device")
                drawn = func(*args, **kwargs)
                return drawn.to(device, dtype if "dtype" not in kwargs else drawn.dtype)
            return func(*args, **kwargs)

    with CpuDraws():
        yield


def _masks_batch(g, size=64):
    """Two images with 2 and 3 square instances of 3 classes: Mask2Former's
    per-image ``mask_labels`` and ``class_labels`` lists."""
    masks, classes = [], []
    for n in (2, 3):
        m = torch.zeros(n, size, size)
        for i in range(n):
            y, x = torch.randint(0, size - 24, (2,), generator=g).tolist()
            m[i, y:y + 20, x:x + 20] = 1
        masks.append(m)
        classes.append(torch.randint(0, 3, (n,), generator=g))
    return {"pixel_values": torch.randn(2, 3, size, size, generator=g), "mask_labels": masks, "class_labels": classes}


@case
def mask2former_swin_linear(device, each, dtype=torch.float32):
    """Mask2Former on a 4-stage Swin (embedding 16, windows of 4, 64 x 64
    images), 8 queries, two decoder layers with auxiliary losses, 64 sampled
    points: transformers' segmentation fine-tuning loop."""
    import transformers

    def build():
        backbone = transformers.SwinConfig(image_size=64, patch_size=4, embed_dim=16, depths=[1, 1, 1, 1],
                                           num_heads=[1, 2, 2, 4], window_size=4, drop_path_rate=0.0,
                                           out_features=["stage1", "stage2", "stage3", "stage4"])
        cfg = transformers.Mask2FormerConfig(backbone_config=backbone, feature_size=32, mask_feature_size=32,
                                             hidden_dim=32, encoder_feedforward_dim=64, dim_feedforward=64,
                                             encoder_layers=1, decoder_layers=2, num_attention_heads=4,
                                             num_queries=8, num_labels=3, train_num_points=64, common_stride=4,
                                             dropout=0.0, use_auxiliary_loss=True)
        return transformers.Mask2FormerForUniversalSegmentation(cfg)

    with cpu_draws(dtype):
        return _hf_loop(device, each, dtype, build, _masks_batch, schedule="linear", lr=1e-3)


def compare(name, referee=False, elements=False):
    """Run loop ``name`` on eager CPU and on the lazy device as hunt 27's
    ``compare`` does: a cases_hunt27.Outcome."""
    import cases_hunt27

    return cases_hunt27.compare(name, referee, cases=CASES, elements=elements)


if __name__ == "__main__":  # python tests/consumers/cases_hunt39.py [names...]: a table
    from cases_hunt27 import print_table

    print_table(compare, CASES, sys.argv[1:])
