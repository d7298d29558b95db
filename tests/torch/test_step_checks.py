"""Step checks (lazycore.runtime.checks, lazycore.frontends.torch.step_checks):
eager's errors raised from a value, checked with the step instead of cutting it.

torch.distributions validates arguments and samples with
``if not torch._is_all_true(valid): raise ValueError(...)``, and
``torch.linalg.cholesky``/``inv``/``solve`` end with
``aten._linalg_check_errors(info)``. Each used to read its value (a barrier):
a PPO step ran several programs. Now the step runs as one program; where a
check fails, the barrier raises eager's exception with eager's message, naming
the user's line, and the step's state stays as it was at the check.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributions as D
import torch.nn as nn

import lazycore
from lazycore.observe import metrics
from markers import markers

HERE, line_of, at = markers(__file__)


@pytest.fixture(autouse=True)
def _validation_on():
    """Validation on, as a fresh process has it (torch.compile's first call
    turns it off for the process: dynamo's set_default_validate_args(False))."""
    was = D.Distribution._validate_args
    D.Distribution.set_default_validate_args(True)
    lazycore.mark_step(wait=True)
    yield
    D.Distribution.set_default_validate_args(was)


def _programs() -> int:
    return metrics.counters()["executions"]


def _fallbacks() -> int:
    return sum(sum(v.values()) for v in metrics.fallbacks().values())


def _eager_text(text: str) -> str:
    """The message as eager's CPU run prints it (the tensor it shows is on the lazy device here)."""
    return text.replace(", device='lazy:0'", "")


class _ActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 16), nn.Tanh())
        self.mu = nn.Linear(16, 2)
        self.log_std = nn.Parameter(torch.full((2,), -0.5))
        self.logits = nn.Linear(16, 3)
        self.value = nn.Linear(16, 1)

    def loss(self, obs, cont, disc, adv, old_logp, ret):
        h = self.body(obs)
        normal = D.Normal(self.mu(h), self.log_std.exp())
        cat = D.Categorical(logits=self.logits(h))
        logp = normal.log_prob(cont).sum(-1) + cat.log_prob(disc)  # log-probs
        ratio = (logp - old_logp).exp()
        pg = -torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean()
        v = (self.value(h).squeeze(-1) - ret).pow(2).mean()
        ent = normal.entropy().sum(-1).mean() + cat.entropy().mean()
        return pg + 0.5 * v - 0.01 * ent


def _batches(n, bad=None):
    g = torch.Generator().manual_seed(3)
    out = []
    for k in range(n):
        obs = torch.randn(8, 4, generator=g)
        cont = torch.randn(8, 2, generator=g)
        disc = torch.randint(0, 3, (8,), generator=g)
        if k == bad:
            disc[5] = 3  # out of Categorical's support
        out.append((obs, cont, disc, torch.randn(8, generator=g), torch.randn(8, generator=g) - 3.0,
                    torch.randn(8, generator=g)))
    return out


def _model(device):
    torch.manual_seed(0)
    model = _ActorCritic().to(device)
    return model, torch.optim.Adam(model.parameters(), lr=1e-2)


def _eager_steps(batches):
    """Eager's training, a step that raises skipped (caught, as a user would)."""
    model, opt = _model("cpu")
    errors = []
    for batch in batches:
        opt.zero_grad()
        try:
            loss = model.loss(*batch)
        except ValueError as e:
            errors.append(str(e))
            continue
        loss.backward()
        opt.step()
    return model, opt, errors


def _state(model, opt):
    return [p.detach().cpu().clone() for p in model.parameters()] + [
        v.detach().cpu().clone() for s in opt.state.values() for v in s.values() if isinstance(v, torch.Tensor)]


def test_a_ppo_step_with_validation_runs_one_program_and_matches_eager(dev):
    batches = _batches(4)
    want, _, errors = _eager_steps(batches)
    assert not errors
    model, opt = _model(dev)
    lazycore.mark_step(wait=True)
    fallbacks = _fallbacks()
    per_step, compiles = [], []
    for batch in batches:
        before, compiled = _programs(), metrics.counters()["compiles"]
        opt.zero_grad()
        loss = model.loss(*(t.to(dev) for t in batch))
        loss.backward()
        opt.step()
        lazycore.mark_step()
        per_step.append(_programs() - before)
        compiles.append(metrics.counters()["compiles"] - compiled)
    assert per_step == [1, 1, 1, 1], per_step  # (each distribution's checks read a value before: 6 programs)
    assert compiles[2:] == [0, 0], compiles  # (the first two: before and after Adam's state exists)
    assert _fallbacks() == fallbacks
    torch.testing.assert_close([p.detach().cpu() for p in model.parameters()],
                               [p.detach() for p in want.parameters()], rtol=1e-5, atol=1e-6)


def test_an_out_of_support_sample_raises_at_the_barrier_and_keeps_the_state(dev):
    batches = _batches(3, bad=2)
    want, want_opt, errors = _eager_steps(batches)
    assert len(errors) == 1
    model, opt = _model(dev)
    for batch in batches[:2]:
        opt.zero_grad()
        model.loss(*(t.to(dev) for t in batch)).backward()
        opt.step()
        lazycore.mark_step()
    kept = _state(model, opt)
    opt.zero_grad()
    loss = model.loss(*(t.to(dev) for t in batches[2]))
    loss.backward()
    opt.step()
    with pytest.raises(ValueError) as info:
        lazycore.mark_step()
    e = info.value
    assert isinstance(e, lazycore.BarrierError)
    assert _eager_text(str(e)) == errors[0]
    assert e.location == at("log-probs")  # the user's line that called the failing log_prob
    got = _state(model, opt)  # parameters and Adam's moments: as before the step
    assert len(got) == len(kept) > len(list(model.parameters()))
    for a, b in zip(got, kept):
        assert torch.equal(a, b)
    with pytest.raises(ValueError, match="Expected value argument"):
        loss.item()  # made after the check: eager never made it
    torch.testing.assert_close(got[:len(list(model.parameters()))], [p.detach() for p in want.parameters()],
                               rtol=1e-5, atol=1e-6)


def test_cholesky_of_a_non_positive_definite_matrix_raises_linalgerror_at_the_barrier(dev):
    a = torch.tensor([[1.0, 2.0], [2.0, 1.0]])
    with pytest.raises(torch.linalg.LinAlgError) as eager:
        torch.linalg.cholesky(a)
    w = torch.ones(2, device=dev)
    lazycore.mark_step(wait=True)
    fallbacks, before = _fallbacks(), _programs()
    w.add_(1.0)  # state changed before the call: kept
    factor = torch.linalg.cholesky(a.to(dev))  # the cholesky
    w.mul_(10.0)  # after it: undone
    out = factor.sum()
    with pytest.raises(torch.linalg.LinAlgError) as info:
        lazycore.mark_step()
    assert str(info.value) == str(eager.value)
    assert info.value.location == at("the cholesky")
    assert _programs() - before == 1 and _fallbacks() == fallbacks
    assert w.tolist() == [2.0, 2.0]
    with pytest.raises(RuntimeError, match="not positive-definite"):
        out.item()
    spd = torch.tensor([[4.0, 2.0], [2.0, 3.0]])  # a good one runs as one program, with eager's answer
    before = _programs()
    got = torch.linalg.cholesky(spd.to(dev)) * 2
    torch.testing.assert_close(got.cpu(), torch.linalg.cholesky(spd) * 2)
    assert _programs() - before == 1


def test_inv_and_solve_of_a_singular_matrix_raise_eagers_error_at_the_barrier(dev):
    a = torch.tensor([[1.0, 2.0], [2.0, 4.0]])
    for fn in (torch.linalg.inv, lambda m: torch.linalg.solve(m, torch.ones(2, device=m.device))):
        with pytest.raises(torch.linalg.LinAlgError) as eager:
            fn(a)
        r = fn(a.to(dev)) + 1
        with pytest.raises(torch.linalg.LinAlgError) as info:
            lazycore.mark_step()
        assert str(info.value) == str(eager.value)
        with pytest.raises(RuntimeError):
            r.cpu()  # made after the check


def test_unrelated_work_after_a_failure_still_runs(dev):
    batches = _batches(5, bad=2)
    want, _, errors = _eager_steps(batches)
    model, opt = _model(dev)
    raised = []
    lazycore.mark_step(wait=True)
    before = _programs()
    for batch in batches:
        opt.zero_grad()
        metric = batch[0].to(dev).abs().mean()  # made before the step's checks
        try:
            loss = model.loss(*(t.to(dev) for t in batch))
            loss.backward()
            opt.step()
            lazycore.mark_step()
        except ValueError as e:
            raised.append(_eager_text(str(e)))
            assert metric.item() == pytest.approx(float(batch[0].abs().mean()), rel=1e-6)
    assert raised == errors
    assert _programs() - before == len(batches)  # one a step, the failed one's too
    torch.testing.assert_close([p.detach().cpu() for p in model.parameters()],
                               [p.detach() for p in want.parameters()], rtol=1e-5, atol=1e-6)


def test_only_a_raise_after_is_all_true_is_speculated(dev):
    """The rule: an ``if [not] ..._is_all_true(...)`` (or ``_is_any_true``)
    whose whole body is ``raise E(...)`` is answered at once; any other use
    of the value reads it, and gets it exactly."""
    x = torch.tensor([True, False]).to(dev)
    lazycore.mark_step(wait=True)
    before, on_host = _programs(), metrics.counters()["host_reads"]
    if torch._is_all_true(x):
        branch = "all"
    else:
        branch = "not all"
    # read: of an uploaded mask, answered from its host copy (no program)
    assert branch == "not all" and _programs() - before == 0 and metrics.counters()["host_reads"] - on_host == 1
    flag = bool(torch._is_any_true(x))
    assert flag is True
    y = torch.tensor([1.0, -1.0]).to(dev)
    lazycore.mark_step(wait=True)
    before = _programs()
    z = y * 2
    if not torch._is_all_true(y > 0):  # the user's check
        raise ValueError(f"y must be positive, got {y}")
    z = z + 1
    with pytest.raises(ValueError) as info:
        lazycore.mark_step()
    assert _programs() - before == 1 and info.value.location == at("the user's check")
    assert str(info.value).replace(", device='lazy:0'", "") == "y must be positive, got tensor([ 1., -1.])"
    with pytest.raises(ValueError):
        z.cpu()
    before = _programs()
    w = y.abs()
    if torch._is_any_true(torch.isnan(w)):
        raise FloatingPointError("NaN in w")
    # held, and read: both computed from the float upload's host copy (|y| * 3 is exact;
    # a NaN fails the check there and goes to the device for the error), no program
    assert (w * 3).tolist() == [3.0, 3.0] and _programs() - before == 0
    w = y.log()
    if torch._is_any_true(torch.isnan(w)):  # a NaN check
        raise FloatingPointError("NaN in w")
    with pytest.raises(FloatingPointError) as info:
        lazycore.mark_step()
    assert str(info.value) == "NaN in w" and info.value.location == at("a NaN check")
