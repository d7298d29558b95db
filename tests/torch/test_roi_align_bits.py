"""torchvision's ``roi_align`` (a fixed sampling grid) and its input gradient are eager's CPU
kernel's bits (issue 39): each bin's samples added to 0 one after another (iy, then ix),
then divided by their count (XLA's reduction of the grid summed in another order: 311 of
1,176 float32 values differed); ``1. - l`` a double difference; the backward one scatter-add
in eager's order (box, channel, bin, sample, the four corners; four scatter-adds, one per
corner, added in another order), a sample outside the map adding nothing."""

import pytest
import torch

torchvision = pytest.importorskip("torchvision")

BOXES = [[0, 1.3, 2.2, 9.7, 12.1], [1, 0.5, 0.5, 15.2, 7.9], [0, 3.3, 4.1, 5.9, 6.2], [1, -3.0, -2.0, 70.0, 40.0],
         [0, 10.0, 10.0, 10.2, 10.1]]


@pytest.mark.parametrize("dtype,aligned,spatial_scale,sampling_ratio", [
    (torch.float32, True, 0.25, 2), (torch.float32, False, 0.5, 2), (torch.float32, False, 1.0, 3),
    (torch.float64, True, 0.5, 2), (torch.float64, False, 0.25, 2)], ids=str)
def test_values_and_gradient_are_eagers_bits(dev, no_fallback, dtype, aligned, spatial_scale, sampling_ratio):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 8, 16, 16, generator=gen, dtype=dtype)
    boxes = torch.tensor(BOXES, dtype=dtype)
    g = torch.randn(len(BOXES), 8, 7, 7, generator=gen, dtype=dtype)

    def run(device):
        xs = x.clone().to(device).requires_grad_()
        out = torchvision.ops.roi_align(xs, boxes.to(device), (7, 7), spatial_scale, sampling_ratio, aligned)
        out.backward(g.to(device))
        return out.detach().cpu(), xs.grad.cpu()

    (want, want_grad), (got, got_grad) = run("cpu"), run(dev)
    assert torch.equal(got, want), f"{int((got != want).sum())} of {want.numel()} values differ"
    assert torch.equal(got_grad, want_grad), f"{int((got_grad != want_grad).sum())} gradients differ"


def test_infinite_gradient_skips_outside_samples(dev, no_fallback):
    # eager adds nothing for a sample outside the map: an infinite bin gradient stays off
    # the pixels such a sample would have been clamped onto (no 0 * inf)
    x = torch.randn(1, 2, 8, 8, generator=torch.Generator().manual_seed(2))
    boxes = torch.tensor([[0, -6.0, -6.0, 3.0, 3.0], [0, 2.0, 2.0, 5.0, 5.0]])
    g = torch.ones(2, 2, 3, 3)
    g[0, :, 0, 0] = float("inf")

    def run(device):
        xs = x.clone().to(device).requires_grad_()
        torchvision.ops.roi_align(xs, boxes.to(device), (3, 3), 1.0, 2, False).backward(g.to(device))
        return xs.grad.cpu()

    torch.testing.assert_close(run(dev), run("cpu"), rtol=0, atol=0, equal_nan=True)
