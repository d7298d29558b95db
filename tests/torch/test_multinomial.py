"""torch.multinomial on the lazy device's generator, with no fallback (issue 39:
transformers' sampling, ``generate(do_sample=True)``, draws every token with it,
and each draw was eager's kernel, a fallback and a barrier per token). Eager and
lazy draw different numbers; the distribution and eager's errors are checked."""

import pytest
import torch

P = torch.tensor([0.1, 0.0, 0.3, 0.6])
N = 20000


def _freq(x, n=4):
    return torch.bincount(x.reshape(-1), minlength=n).double() / x.numel()


@pytest.mark.parametrize("replacement,k", [(True, 1), (False, 1), (True, 3)])
def test_draws_follow_the_probabilities(dev, no_fallback, replacement, k):
    torch.manual_seed(0)
    got = torch.multinomial(P.expand(N, 4).contiguous().to(dev), k, replacement=replacement).cpu()
    assert got.shape == (N, k) and got.dtype == torch.int64
    assert torch.allclose(_freq(got), P.double(), atol=0.015), _freq(got)


def test_draws_without_replacement_are_successive_renormalized_draws(dev, no_fallback):
    torch.manual_seed(0)
    got = torch.multinomial(P.expand(N, 4).contiguous().to(dev), 3).cpu()
    assert all(len(set(row)) == 3 for row in got.tolist())
    # the second draw: sum over the first's i of p_i * p_j / (1 - p_i)
    second = torch.zeros(4, dtype=torch.float64)
    for i in range(4):
        for j in range(4):
            if i != j and P[i] > 0:
                second[j] += P[i] * P[j] / (1 - P[i])
    assert torch.allclose(_freq(got[:, 1]), second, atol=0.015)
    assert (got[:, :2] != 1).all()  # the category of probability 0 comes last


def test_one_dimensional_and_half_probabilities_and_fresh_draws(dev, no_fallback):
    torch.manual_seed(0)
    one = torch.multinomial(P.to(dev), 2)
    assert one.shape == (2,) and set(one.cpu().tolist()) <= {0, 2, 3}
    half = torch.multinomial(P.half().to(dev), 1)
    assert half.shape == (1,) and half.cpu().item() in (0, 2, 3)
    rows = P.expand(64, 4).contiguous().to(dev)
    assert not torch.equal(torch.multinomial(rows, 1).cpu(), torch.multinomial(rows, 1).cpu())


@pytest.mark.parametrize("probs", [[0.5, -0.1], [0.5, float("nan")], [0.5, float("inf")], [0.0, 0.0]])
def test_eagers_errors_for_bad_probabilities(dev, probs):
    x = torch.tensor(probs)
    with pytest.raises(RuntimeError) as want:
        torch.multinomial(x, 1)
    with pytest.raises(RuntimeError) as got:
        torch.multinomial(x.to(dev), 1).cpu()
    assert str(want.value) in str(got.value)
