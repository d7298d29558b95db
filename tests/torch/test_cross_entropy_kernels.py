"""Cross-entropy's row sums are computed once per row in XLA's CPU program
(issue 42: benchmark 2's step after cross-entropy became eager's kernels).

``log_softmax`` as eager's kernels sums each row's exps in vector-lane order
(``lazy.lane_sum``: a slice and an add per element of a short row) and takes
SLEEF's log of the sum; its backward sums each row's gradient the same way.
Those are cheap elementwise ops, and XLA's CPU fusion copied them into every
loop that read the sums through a broadcast: each element of a (128, 10)
batch recomputed its row's 10 exps, their sum and the log (and the
gradient's sum): 1,173 HLO ops in the mean loss's fwd+bwd program where
767 do. These tests read the optimized
HLO of the program that ran: each row sum's slices are in the program once,
in a kernel of one value per row. The bits stay eager's
(``test_cross_entropy_bits``)."""

import re

import pytest
import torch
import torch.nn.functional as F

import lazycore
from lazycore.frontends.torch.ops.lane_sums import kernel_lanes
from test_pointwise_weight_grad_layout import _launched as _launches


def _launched(step) -> str:
    """The optimized HLO of the one program ``step`` runs (the launch log a kernel profile keeps)."""
    texts = _launches(step)
    assert len(texts) == 1, texts
    return texts[0]


def _slices(text: str) -> dict[str, int]:
    """Each fused computation's ``slice`` ops, by the computation's name."""
    out, name = {}, None
    for line in text.splitlines():
        head = re.match(r"%?([\w.\-]+) .*\{$", line)
        if head and not line.startswith(" "):
            name = head.group(1)
        elif line.startswith("}"):
            name = None
        elif name and re.search(r"\bslice\(", line):
            out[name] = out.get(name, 0) + 1
    return out


# rows shorter than a vector of eager's softmax kernels: 10 and 13 of 16 float32 lanes on
# AVX-512, 2 and 5 of AVX2's 8
_LANES = kernel_lanes(torch.float32)


@pytest.mark.parametrize("n, c", [(128, _LANES - 6), (6, _LANES - 3)])
def test_row_sums_are_computed_once(dev, n, c):
    torch.manual_seed(0)
    x = torch.randn(n, c).to(dev).requires_grad_()
    target = torch.randint(0, c, (n,)).to(dev)
    gy = torch.randn(n).to(dev)  # a gradient per row: the backward's sums are not a constant's
    lazycore.mark_step()

    def step():
        F.cross_entropy(x, target, reduction="none").backward(gy)
        assert x.grad is not None
        lazycore.mark_step()

    slices = _slices(_launched(step))
    # rows shorter than a vector are summed element by element: c slices
    # for the exps' sums and c for the gradient's, once each (copied into the loops that
    # read them, the program held 3c)
    assert sum(slices.values()) == 2 * c, slices
    assert sorted(slices.values()) == [c, c], slices
