"""``add``/``sub`` with ``alpha`` round as eager's CPU kernels: one fused
multiply-add in float32 (also when the first operand is a product, where XLA
contracts the other product), and float16/bfloat16 in float32 with alpha
rounded to the result's type. Found through torchvision's saturation
(TrivialAugmentWide's and AutoAugment's Color) on a uint8 image on the lazy
device: one level off in up to 3% of the pixels, which a later Solarize
turned into 142."""

import pytest
import torch

import lazycore.torch as ltorch

N = 4096  # one chunk of eager's loop, a multiple of every vector width: no tail


def _pair(dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(N, generator=g).to(dtype), torch.randn(N, generator=g).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("alpha", [0.587, -3.3])
def test_add_and_sub_with_alpha_are_eagers_bits(dtype, alpha):
    dev = ltorch.device()
    a, b = _pair(dtype)
    for f in (lambda x, y: x.add(y, alpha=alpha), lambda x, y: x.sub(y, alpha=alpha),
              lambda x, y: x.mul(1.7).add_(y, alpha=alpha)):  # the first operand a product too
        want = f(a, b)
        got = f(a.to(dev), b.to(dev)).cpu()
        assert got.dtype == want.dtype
        assert torch.equal(got, want), int((got != want).sum())


def test_uint8_grayscale_blend_is_eagers():
    tf = pytest.importorskip("torchvision.transforms.v2.functional")
    dev = ltorch.device()
    g = torch.Generator().manual_seed(1)
    img = torch.randint(0, 256, (3, 48, 48), dtype=torch.uint8, generator=g)
    for factor in (0.2, 1.37, 1.8):
        want = tf.adjust_saturation(img, factor)
        got = tf.adjust_saturation(img.to(dev), factor).cpu()
        assert torch.equal(got, want), (factor, int((got != want).sum()))
