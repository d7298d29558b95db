"""Checkpoints written from the lazy device load without lazycore (issue 43 item 3).

``torch.save`` of a lazy tensor writes a CPU tensor's pickle (PyTorch/XLA's
``xm.save`` habit), so a process that never imports lazycore loads a model's
or an optimizer's state dict with plain ``torch.load`` (weights_only), and
loading it back into a lazy model and optimizer continues training as eager
does from the same checkpoint.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest
import torch

import lazycore

PLAIN = r"""
import sys, torch
model = torch.load(sys.argv[1])             # weights_only=True: torch's own rebuild functions
optim = torch.load(sys.argv[2])
grad = torch.load(sys.argv[3], weights_only=False)
assert "lazycore" not in sys.modules, sorted(m for m in sys.modules if "lazycore" in m)
assert all(v.device.type == "cpu" for v in model.values())
states = optim["state"].values()
assert all(v.device.type == "cpu" for s in states for v in s.values() if isinstance(v, torch.Tensor))
assert grad.requires_grad and grad.is_leaf and grad.note == "kept"
torch.save({"model": model, "optim": optim, "grad": grad.detach()}, sys.argv[4])
print("plain ok")
"""


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.Tanh(), torch.nn.Linear(12, 3))


def _steps(model, opt, dev, n, seed):
    g = torch.Generator().manual_seed(seed)
    losses = []
    for _ in range(n):
        x, y = torch.randn(5, 6, generator=g).to(dev), torch.randn(5, 3, generator=g).to(dev)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        lazycore.mark_step()
        losses.append(float(loss.detach().cpu()))
    return losses


def test_a_lazy_checkpoint_loads_in_a_process_without_lazycore(dev, tmp_path):
    model = _mlp().to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)  # its state lives on the device
    _steps(model, opt, dev, 2, seed=1)
    paths = [str(tmp_path / name) for name in ("model.pt", "optim.pt", "grad.pt", "back.pt")]
    torch.save(model.state_dict(), paths[0])
    torch.save(opt.state_dict(), paths[1])
    grad = model[0].weight.detach().clone().requires_grad_()
    grad.note = "kept"
    torch.save(grad, paths[2])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAZYCORE", "PYTHONPATH"))}
    run = subprocess.run([sys.executable, "-c", PLAIN, *paths], env=env, capture_output=True, text=True,
                         timeout=300, cwd=str(tmp_path))
    assert run.returncode == 0 and "plain ok" in run.stdout, run.stdout + run.stderr[-3000:]

    back = torch.load(paths[3])  # what the plain process read, saved again by plain torch
    for name, value in model.state_dict().items():
        assert torch.equal(back["model"][name], value.cpu()), name
    assert torch.equal(back["grad"], model[0].weight.detach().cpu())
    saved_state = opt.state_dict()["state"]
    for k, s in back["optim"]["state"].items():
        for name, v in s.items():
            if isinstance(v, torch.Tensor):
                assert torch.equal(v, saved_state[k][name].cpu()), (k, name)

    # the checkpoint into a fresh lazy model and optimizer, and into eager ones: training goes on the same
    lazy = _mlp().to(dev)
    lazy.load_state_dict(torch.load(paths[0]))
    lazy_opt = torch.optim.Adam(lazy.parameters(), lr=1e-2)
    lazy_opt.load_state_dict(torch.load(paths[1]))
    assert all(v.device == dev for v in lazy.state_dict().values())
    assert all(v.device == dev for s in lazy_opt.state.values() for n, v in s.items() if n != "step")
    eager = _mlp()
    eager.load_state_dict(torch.load(paths[0]))
    eager_opt = torch.optim.Adam(eager.parameters(), lr=1e-2)
    eager_opt.load_state_dict(torch.load(paths[1]))
    # the lazy optimizer ran capturable (frontends/torch/optim.py), as on CUDA, but its
    # state_dict says what the user asked for: a CPU optimizer cannot be capturable
    assert not any(group["capturable"] for group in eager_opt.param_groups)
    got, want = _steps(lazy, lazy_opt, dev, 3, seed=2), _steps(eager, eager_opt, "cpu", 3, seed=2)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    for p, q in zip(lazy.parameters(), eager.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-5, atol=1e-6)


# torch.optim over lazy parameters runs capturable (frontends/torch/optim.py); its
# state_dict reports the user's own flag, so a checkpoint resumes on the CPU
OPTIMIZERS = {
    "adam": lambda ps: torch.optim.Adam(ps, lr=1e-2),
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1),
    "sgd_momentum": lambda ps: torch.optim.SGD(ps, lr=1e-2, momentum=0.9),
    "nadam": lambda ps: torch.optim.NAdam(ps, lr=1e-2),
    "radam": lambda ps: torch.optim.RAdam(ps, lr=1e-2),
    "adamax": lambda ps: torch.optim.Adamax(ps, lr=1e-2),
}


def _checkpoint(model, opt) -> bytes:
    buf = io.BytesIO()
    torch.save({"model": model.state_dict(), "optim": opt.state_dict()}, buf)
    return buf.getvalue()


def _read(checkpoint: bytes):
    return torch.load(io.BytesIO(checkpoint))  # weights_only: what any process reads back


def _resumed(checkpoint: bytes, name, dev):
    # (a fresh copy each: a CPU optimizer steps the loaded state's tensors in place)
    saved = _read(checkpoint)
    model = _mlp().to(dev)
    model.load_state_dict(saved["model"])
    opt = OPTIMIZERS[name](model.parameters())
    opt.load_state_dict(saved["optim"])
    return model, opt


def _eager_run(name):
    """Eager's: 2 steps, its checkpoint, and 3 steps of a CPU optimizer resumed from it."""
    model = _mlp()
    opt = OPTIMIZERS[name](model.parameters())
    _steps(model, opt, "cpu", 2, seed=1)
    saved = _checkpoint(model, opt)
    model, opt = _resumed(saved, name, "cpu")
    return saved, model, _steps(model, opt, "cpu", 3, seed=2)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_a_lazy_optimizers_checkpoint_resumes_on_the_cpu_as_eagers(dev, name):
    want_saved, want_model, want = _eager_run(name)
    model = _mlp().to(dev)
    opt = OPTIMIZERS[name](model.parameters())
    _steps(model, opt, dev, 2, seed=1)
    saved = _checkpoint(model, opt)
    assert _read(saved)["optim"]["param_groups"] == _read(want_saved)["optim"]["param_groups"]
    assert all(g["capturable"] for g in opt.param_groups if "capturable" in g)  # (it runs so)

    cpu, cpu_opt = _resumed(saved, name, "cpu")
    got = _steps(cpu, cpu_opt, "cpu", 3, seed=2)  # (a CPU optimizer told capturable raises here)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    for p, q in zip(cpu.parameters(), want_model.parameters()):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_a_cpu_checkpoint_resumes_on_the_lazy_device_as_on_the_cpu(dev, name):
    want_saved, want_model, want = _eager_run(name)
    model, opt = _resumed(want_saved, name, dev)
    got = _steps(model, opt, dev, 3, seed=2)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    for p, q in zip(model.parameters(), want_model.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-5, atol=1e-6)
    # and saved again, it still reads as the CPU's
    assert _read(_checkpoint(model, opt))["optim"]["param_groups"] == _read(want_saved)["optim"]["param_groups"]


def test_a_capturable_the_user_asked_for_is_reported(dev):
    model = _mlp().to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, capturable=True)
    _steps(model, opt, dev, 1, seed=1)
    assert [g["capturable"] for g in opt.state_dict()["param_groups"]] == [True]
