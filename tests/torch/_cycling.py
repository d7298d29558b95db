"""The small training run the cycled-hyperparameter tests share: a 2-layer MLP
stepped by an optimizer and a scheduler that cycles one of its
hyperparameters, eager, traced or captured."""

import torch
import torch.nn.functional as F

import lazycore.torch as ltorch


def batches(steps):
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(6, 8, generator=g), torch.randint(0, 4, (6,), generator=g)) for _ in range(steps)]


def train(dev, make, kwargs, captured, schedule, steps, hyper, dtype=torch.float32):
    """(losses, parameters, ``hyper(opt)`` before each step, the step function)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4)).to(dev, dtype)
    opt = make(model.parameters(), **kwargs)
    sched = schedule(opt)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    fn = ltorch.capture(step) if captured else step
    losses, seen = [], []
    for x, y in batches(steps):
        seen.append(hyper(opt))
        loss = fn(x.to(dev, dtype), y.to(dev))
        sched.step()
        if dev.type == "lazy":
            ltorch.mark_step()
        losses.append(float(loss.cpu()))
    return losses, [p.detach().cpu().numpy() for p in model.parameters()], seen, fn, opt
