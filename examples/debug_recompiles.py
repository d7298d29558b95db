"""The dynamic-graph trap from the PyTorch/XLA LazyTensor blog, and its fix.

    LAZYCORE_DEBUG=1 python examples/debug_recompiles.py          # the trap: a compile every step
    LAZYCORE_DEBUG=1 python examples/debug_recompiles.py --fixed  # the fix: one program for every step
"""

import sys

import torch

import lazycore
import lazycore.torch as ltorch

dev = ltorch.device()
torch.manual_seed(0)
model = torch.nn.Linear(8, 1).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(16, 8).to(dev), torch.randn(16, 1).to(dev)
fixed = "--fixed" in sys.argv

history = torch.zeros(0, device=dev)  # the trap: a tensor that grows every step
total = torch.zeros((), device=dev)   # the fix: a running sum with a fixed shape
for step in range(5):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    if fixed:
        total = total + loss.detach()
    else:
        history = torch.cat([history, loss.detach().reshape(1)])
    lazycore.mark_step()

print("mean loss:", (total / 5).item() if fixed else history.mean().item())
print(lazycore.metrics.counters()["compiles"], "compiles")
