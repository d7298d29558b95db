"""torch.optim on the lazy device: a capturable device, so step counters live on it.

An optimizer that is not capturable keeps its step counter on the CPU and
turns the bias corrections into Python numbers (``step_t.item()``, then
``1 - beta1 ** step``), new numbers every step. Traced, they become program
parameters; captured, they are Python work a replay cannot redo, so a step
with Adam never replays. Capturable, the counter and the bias corrections are
device tensors computed in the program, as on CUDA graphs, and the step is
the same graph every call.

torch names the capturable device types in one function
(``torch.optim.optimizer._get_capturable_supported_devices``, "xla" among
them) that each optimizer module imports by name, so the lazy type is added
where each module looks it up. An optimizer over lazy parameters is made
capturable at its first step (a step counter already on the CPU, from
``load_state_dict`` or earlier steps, moves to the parameter's device); its
``capturable`` entry in ``param_groups`` then reads True.
"""

from __future__ import annotations

import sys

import torch
import torch.optim  # noqa: F401  (loads the optimizer modules patched below)
import torch.optim.optimizer as _optimizer

_LAZY = "lazy"


def _with_lazy(original):
    def supported(*args, **kwargs):
        return [*original(*args, **kwargs), _LAZY]

    supported.__wrapped__ = original
    return supported


def _make_capturable(opt, args, kwargs) -> None:
    for group in opt.param_groups:
        if group.get("capturable", True) or not group["params"]:
            continue  # capturable already, or an optimizer without the notion (SGD)
        if group["params"][0].device.type != _LAZY:
            continue
        for p in group["params"]:
            step = opt.state.get(p, {}).get("step")
            if isinstance(step, torch.Tensor) and step.device != p.device:
                opt.state[p]["step"] = step.to(p.device)
        group["capturable"] = True


def install() -> None:
    """Add the lazy device to torch's capturable devices and make optimizers
    over lazy parameters capturable (idempotent)."""
    for module in list(sys.modules.values()):
        name = getattr(module, "__name__", "") or ""
        if not name.startswith("torch.optim"):
            continue
        found = module.__dict__.get("_get_capturable_supported_devices")
        if found is not None and not hasattr(found, "__wrapped__"):
            module._get_capturable_supported_devices = _with_lazy(found)
    if not _HOOK:
        _HOOK.append(_optimizer.register_optimizer_step_pre_hook(_make_capturable))


_HOOK: list = []
