"""Weight averaging (``torch.optim.swa_utils``) in a plain training loop:
no program compiled after warm-up, eager's values (issue 39/40).

Step 3 compiled once more, for two reasons, both fixed:
- SWA's running mean moves ``n_averaged`` (a CPU tensor) to the device each
  step: baked while 1, a parameter at 2. A CPU tensor's value moved to the
  device is a parameter whatever its value (frontends/torch/special.py;
  tests/torch/test_scalar_policy_torch.py's counter test).
- The first update copies the model's parameters into the average's
  (``p_averaged.copy_(p_model)``, as a copy or clone anywhere). Both tensors
  then hold one value; with one barrier output for it, the next step's
  program read them as one input, and the step after, once the average moved
  away, as two: a program more after warm-up. Each live handle is an output
  of its own now (lazycore.runtime.planning.walk;
  tests/test_runtime_barrier.py::test_handles_sharing_a_value_get_an_output_each)."""

import pytest
import torch
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

import lazycore as lc
from lazycore.observe import metrics
from _bits import MODEL_RUN  # (tests/ is on the path)

pytestmark = pytest.mark.usefixtures("clean_runtime")


def _programs() -> int:
    c = metrics.counters()
    return c["compiles"] + c.get("disk_cache_hits", 0)


def _buffers() -> int:
    lc.mark_step(wait=True)
    return sum(d["buffers"] for d in metrics.memory().values())


def _train(device, steps, **averaging):
    """A plain loop: forward, backward, SGD, the average's update, a barrier.
    Returns the model's and the average's parameters, and per step the
    programs it compiled."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).to(device)
    average = AveragedModel(model, **averaging)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    programs = []
    for i in range(steps):
        g = torch.Generator().manual_seed(i)
        x, y = torch.randn(4, 8, generator=g).to(device), torch.randn(4, 4, generator=g).to(device)
        before = _programs()
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        average.update_parameters(model)
        if device != "cpu":
            lc.mark_step()
        programs.append(_programs() - before)
    return ([p.detach().cpu() for p in model.parameters()], [p.detach().cpu() for p in average.parameters()],
            programs, int(average.n_averaged))


@MODEL_RUN
@pytest.mark.parametrize("averaging", [
    {"multi_avg_fn": get_ema_multi_avg_fn(0.9)},  # EMA (torch._foreach_lerp_)
    {},  # SWA's running mean (the default: _foreach_addcdiv_ by n_averaged + 1, a tensor)
], ids=["ema", "swa"])
def test_averaged_model_compiles_nothing_after_warm_up(dev, averaging):
    want_model, want_avg, _, want_n = _train("cpu", 6, **averaging)
    got_model, got_avg, programs, n = _train(dev, 6, **averaging)
    # step 1 copies, step 2 averages for the first time; then nothing new
    # (before: [1, 1, 1, 0, 0, 0], step 3 read the average as inputs of its own)
    assert sum(programs[2:]) == 0, programs
    assert n == want_n == 6
    # (float32 matmuls and eager's vectorized lerp, an FMA, round in another order: ulps)
    for a, b in zip(got_model + got_avg, want_model + want_avg):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)


def test_a_copy_then_both_written_has_one_program(dev):
    def run(device):
        a = torch.randint(-8, 8, (4, 4), generator=torch.Generator().manual_seed(0)).float().to(device) * 2  # exact sums
        b = torch.zeros(4, 4).to(device)
        b.copy_(a)
        c = a.clone()
        if device != "cpu":
            lc.mark_step()
        before = _programs()
        for _ in range(3):
            a.mul_(1.5)
            b.add_(a)
            c.sub_(a)
            if device != "cpu":
                lc.mark_step()
        return [t.cpu() for t in (a, b, c)], _programs() - before, _buffers()

    want, _, _ = run("cpu")
    held = _buffers()
    got, programs, buffers = run(dev)
    # (before: 2, the first step read a, b and c as one input, the later ones as three)
    assert programs == 1
    assert buffers == held + 3  # a buffer each, as eager's: none more
    for x, y in zip(got, want):
        assert torch.equal(x, y)
