"""torch.multinomial on the lazy device, with no fallback (issue 39:
transformers' sampling, ``generate(do_sample=True)``, draws every token with it,
and each draw was eager's kernel, a fallback and a barrier per token). Its
random part is drawn on the host from eager's CPU generator, so it picks
eager's categories and leaves the generator where eager does
(frontends/torch/ops/random.py); in a step recorded for replay
(``GENERATORS.device_draws``) it draws from the device's generator: the
distribution is checked there. Eager's errors are checked too."""

import pytest
import torch

from lazycore.frontends.torch.ops.random import GENERATORS

P = torch.tensor([0.1, 0.0, 0.3, 0.6])
N = 20000


def _freq(x, n=4):
    return torch.bincount(x.reshape(-1), minlength=n).double() / x.numel()


@pytest.fixture(params=["eagers", "device"])
def draws(request):
    """Both streams: eager's CPU generator's, drawn on the host, and the device's."""
    if request.param == "eagers":
        yield
    else:
        with GENERATORS.device_draws():
            yield


@pytest.mark.parametrize("replacement,k", [(True, 1), (False, 1), (True, 3)])
def test_draws_follow_the_probabilities(dev, no_fallback, draws, replacement, k):
    torch.manual_seed(0)
    got = torch.multinomial(P.expand(N, 4).contiguous().to(dev), k, replacement=replacement).cpu()
    assert got.shape == (N, k) and got.dtype == torch.int64
    assert torch.allclose(_freq(got), P.double(), atol=0.015), _freq(got)


def test_draws_without_replacement_are_successive_renormalized_draws(dev, no_fallback, draws):
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


def test_one_dimensional_and_half_probabilities_and_fresh_draws(dev, no_fallback, draws):
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


def _probs(shape, dtype, zeros, seed):
    g = torch.Generator().manual_seed(seed)
    p = torch.rand(shape, dtype=torch.float64, generator=g).mul(6).softmax(-1).to(dtype)
    if zeros:  # top-k masked: all but the 3 largest of a row are 0
        p = torch.where(p < p.topk(3, dim=-1).values[..., -1:], torch.zeros((), dtype=dtype), p)
    return p


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("shape", [(16,), (3, 300)], ids=["1d", "2d"])
@pytest.mark.parametrize("k,replacement", [(1, False), (1, True), (3, False), (4, True)])
@pytest.mark.parametrize("zeros", [False, True], ids=["all", "zeros"])
def test_eagers_categories_and_generator(dev, no_fallback, dtype, shape, k, replacement, zeros):
    # the same seed picks eager's categories (the random part is the CPU
    # generator's, drawn as eager draws it), and the generator is left where
    # eager leaves it: the next CPU draw is eager's too. Before: the device's
    # own stream picked other categories and left the CPU generator unmoved.
    p = _probs(shape, dtype, zeros, seed=k + 7 * zeros)
    torch.manual_seed(3)
    want, after = torch.multinomial(p, k, replacement), torch.rand(2)
    torch.manual_seed(3)
    got = torch.multinomial(p.to(dev), k, replacement)
    assert torch.equal(torch.rand(2), after)  # (before the read: the draw was made on the host, at the call)
    assert torch.equal(got.cpu(), want), (got.cpu(), want)


def test_eagers_categories_over_a_vocabulary(dev, no_fallback):
    # GPT-2's vocabulary, a batch of rows, several draws in a row (one program)
    p = torch.randn(4, 50257).mul(3).softmax(-1)
    torch.manual_seed(11)
    want = [torch.multinomial(p, 1) for _ in range(3)]
    torch.manual_seed(11)
    got = [torch.multinomial(p.to(dev), 1) for _ in range(3)]
    assert all(torch.equal(g.cpu(), w) for g, w in zip(got, want))


def test_a_generator_argument_draws_from_it(dev):
    # (eager's kernel with the user's generator: eager's categories, and that generator moved as eager moves it)
    p = _probs((3, 40), torch.float32, False, seed=1)
    g = torch.Generator().manual_seed(5)
    want = torch.multinomial(p, 2, generator=g), torch.rand(2, generator=g)
    g.manual_seed(5)
    got = torch.multinomial(p.to(dev), 2, generator=g).cpu(), torch.rand(2, generator=g)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def test_ties_past_the_positive_categories_are_not_eagers(dev, no_fallback):
    # Known and kept (docs/guides/generation.md): without replacement, more
    # samples than positive probabilities take zeros, which tie; eager's topk
    # orders ties as std::nth_element/partial_sort leave them, lazycore the
    # lower index first. The positive categories come first in both, in the same order.
    p = torch.tensor([0.0, 0.0, 0.5, 0.0, 0.25, 0.0, 0.25, 0.0])
    torch.manual_seed(0)
    want = torch.multinomial(p, 5)
    torch.manual_seed(0)
    got = torch.multinomial(p.to(dev), 5).cpu()
    assert torch.equal(got[:3], want[:3]) and set(got[3:].tolist()) <= {0, 1, 3, 5, 7}
    assert got[3:].tolist() == [0, 1]


def test_a_captured_step_draws_on_the_device_and_replays(dev, no_fallback):
    # eager's stream is drawn on the host, an upload no replay makes again:
    # in a captured step the draws are the device's, and the step replays
    import lazycore.torch as ltorch

    p = torch.rand(4, 10).to(dev)

    @ltorch.capture
    def step(p):
        return torch.multinomial(p.softmax(-1), 2)

    seen = set()
    for _ in range(6):
        seen.add(tuple(step(p).cpu().flatten().tolist()))
        ltorch.mark_step()
    assert step.why is None and step.recordings == 2 and step.replays == 4
    assert len(seen) > 1  # fresh draws at every call, replayed too
