"""``torch.distributions`` on the lazy device (issue 39): log-probabilities,
entropies and KL divergences as eager's, in a policy-gradient and a VAE loss
trained a few steps, with no fallback.

A distribution checks its arguments and ``log_prob``'s values by default
(``validate_args``), each check ``torch._is_all_true(constraint.check(x))``;
anomaly mode's NaN check is ``_is_any_true``. Neither was lowered: every
check fell back, reading its input to the host. (The checks are now step
checks, raised at the barrier: tests/torch/test_step_checks.py.)"""

from __future__ import annotations

import pytest
import torch
import torch.distributions as D
import torch.nn as nn

import lazycore
from lazycore.observe import metrics


@pytest.fixture(autouse=True)
def _validation_on():
    """Argument checks on, as a fresh process has them: torch.compile's first
    call turns them off for the whole process (torch/_dynamo/eval_frame.py,
    ``set_default_validate_args(False)``), and another test file in the same
    worker may have made one."""
    was = D.Distribution._validate_args
    D.Distribution.set_default_validate_args(True)
    yield
    D.Distribution.set_default_validate_args(was)


def _fallbacks() -> int:
    return sum(sum(v.values()) for v in metrics.fallbacks().values())


class _ActorVAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.policy = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
        self.enc = nn.Linear(4, 4)
        self.dec = nn.Linear(2, 4)

    def loss(self, obs, actions, advantages, old_logp, eps, bits):
        dist = D.Categorical(logits=self.policy(obs))
        ratio = (dist.log_prob(actions) - old_logp).exp()
        pg = -torch.min(ratio * advantages, ratio.clamp(0.8, 1.2) * advantages).mean()
        h = self.enc(obs)
        q = D.Normal(h[:, :2], (0.5 * h[:, 2:]).exp())
        z = q.loc + q.scale * eps  # rsample's draw, given
        rec = D.Bernoulli(logits=self.dec(z)).log_prob(bits).sum(-1)
        kl = D.kl_divergence(q, D.Normal(torch.zeros_like(q.loc), torch.ones_like(q.scale))).sum(-1)
        return pg - 0.01 * dist.entropy().mean() + (kl - rec).mean()


def _train(device, batches):
    torch.manual_seed(0)
    model = _ActorVAE().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for batch in batches:
        loss = model.loss(*(t.to(device) for t in batch))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
        lazycore.mark_step()
    return [float(v.cpu()) for v in losses], [p.detach().cpu() for p in model.parameters()]


def test_a_policy_gradient_and_vae_loss_trains_as_eager(dev):
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(6, 4, generator=g), torch.randint(0, 3, (6,), generator=g), torch.randn(6, generator=g),
                torch.randn(6, generator=g) * 0.1 - 1.1, torch.randn(6, 2, generator=g),
                (torch.rand(6, 4, generator=g) > 0.5).float()) for _ in range(3)]
    want, want_params = _train("cpu", batches)
    before = _fallbacks()
    got, got_params = _train(dev, batches)
    assert _fallbacks() == before
    torch.testing.assert_close(got, want, rtol=1e-5, atol=0)
    torch.testing.assert_close(got_params, want_params, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("values", [[True, True], [True, False], [False, False], []])
def test_is_all_true_and_is_any_true_are_eagers(dev, values):
    x = torch.tensor(values, dtype=torch.bool)
    before = _fallbacks()
    for fn in (torch._is_all_true, torch._is_any_true):
        got = fn(x.to(dev))
        assert got.dtype == torch.bool and got.shape == ()
        assert bool(got) == bool(fn(x))
    assert _fallbacks() == before


def test_a_value_out_of_support_raises_eagers_error(dev):
    dist = D.Categorical(probs=torch.tensor([0.5, 0.5]).to(dev))
    before = _fallbacks()
    with pytest.raises(ValueError, match="within the support"):
        dist.log_prob(torch.tensor(3).to(dev)).cpu()  # (at the barrier: tests/torch/test_step_checks.py)
    assert _fallbacks() == before
