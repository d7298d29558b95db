"""``torch.tensor`` and its kin over lazy 0-d tensors, as eager builds them from
CPU ones: Qwen2-VL's ``get_rope_index`` ends in ``torch.tensor(deltas,
device=...)`` over a list of ``llm_positions.max() + 1 - n``, and users collect
``torch.tensor([loss_a, loss_b])``. torch's constructors read each element by
``item()`` with the Python key excluded, which lands ``_local_scalar_dense`` at
the Lazy dispatch key, where lazycore had no kernel: every such call raised
torch's internal assert (``func != nullptr``). Each case here runs the same
call on eager CPU tensors and on lazy ones: same device kind, dtype and
values, or the same exception type."""

import pytest
import torch

import lazycore.torch as ltorch


def _cases(dev):
    """name -> fn(tensors made on ``dev``): the same call for eager and lazy inputs."""
    return {
        "list": lambda s, f, b: torch.tensor([s, s + 4]),
        "list on the device": lambda s, f, b: torch.tensor([s, s * 2], device=dev),
        "nested": lambda s, f, b: torch.tensor([[s], [s - 1]]),
        "mixed with ints": lambda s, f, b: torch.tensor([s, 3, 4]),
        "as float": lambda s, f, b: torch.tensor([s, s], dtype=torch.float32),
        "floats": lambda s, f, b: torch.tensor([f.sum(), f.mean(), f.max()]),
        "booleans": lambda s, f, b: torch.tensor([s > 2, s < 2]),
        "one-element 1-d": lambda s, f, b: torch.tensor([f[:1], f[2:3]]),
        "tuple on the device": lambda s, f, b: torch.tensor((s, s), device=dev),
        "as_tensor": lambda s, f, b: torch.as_tensor([s, s + 1]),
        "asarray": lambda s, f, b: torch.asarray([f.sum(), f.min()]),
        "LongTensor": lambda s, f, b: torch.LongTensor([s]),
        "new_tensor": lambda s, f, b: f.new_tensor([s, s]),
        "bfloat16": lambda s, f, b: torch.tensor([b.sum(), b.max()]),
        "several elements (refused)": lambda s, f, b: torch.tensor([f, f]),
    }


_ON_THE_DEVICE = ("list on the device", "tuple on the device", "new_tensor")


def _inputs(device):
    f = torch.linspace(-1.0, 2.5, 7).to(device)
    return torch.arange(6).to(device).max(), f, f.to(torch.bfloat16) * 3


@pytest.mark.parametrize("name", list(_cases("cpu")))
def test_tensor_of_lazy_scalars_is_eagers(name):
    dev = ltorch.device()
    try:
        want = _cases("cpu")[name](*_inputs("cpu"))
    except Exception as e:  # noqa: BLE001 (the lazy call must raise the same)
        with pytest.raises(type(e)):
            _cases(dev)[name](*_inputs(dev))
        return
    got = _cases(dev)[name](*_inputs(dev))
    assert got.device.type == ("lazy" if name in _ON_THE_DEVICE else "cpu")  # (eager: the CPU, where its inputs are)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert torch.equal(got.cpu(), want)

