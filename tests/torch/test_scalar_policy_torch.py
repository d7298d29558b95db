"""The learned scalar policy with torch's Python scalars (they enter through the
op lowerings' lazycore.scalar): x * k over k compiles twice; shapes stay baked."""

import numpy as np
import pytest
import torch

import lazycore as lc
from lazycore.observe import metrics

pytestmark = pytest.mark.usefixtures("clean_runtime")


@pytest.mark.parametrize("ks", [range(5), [0.0, 1.0, 0.5, 2.0, 1.0]])
def test_x_times_k_compiles_twice(dev, ks):
    x = torch.arange(6.0, device=dev)
    lc.mark_step(wait=True)
    c0 = metrics.counters()["compiles"]
    for k in ks:
        np.testing.assert_array_equal((x * k).cpu().numpy(), (torch.arange(6.0) * k).numpy())
    assert metrics.counters()["compiles"] - c0 == 2


def test_a_shape_deciding_integer_stays_baked(dev):
    x = torch.arange(3.0, device=dev).reshape(3, 1)
    lc.mark_step(wait=True)
    c0 = metrics.counters()["compiles"]
    for k in range(1, 5):
        # (times 2: a view of a program's result alone is read without a program, runtime/reads.py _moved)
        np.testing.assert_array_equal((x.expand(3, k) * 2).cpu().numpy(),
                                      torch.arange(3.0).reshape(3, 1).expand(3, k) * 2)
    assert metrics.counters()["compiles"] - c0 == 4  # one program per shape


def test_a_cpu_counter_moved_to_the_device_compiles_once(dev):
    # torch.optim.swa_utils.AveragedModel: n_averaged (a CPU tensor) .to(device)
    # every step, 1, 2, 3, ...: baked while 0 or 1, it compiled again at 2, a
    # program after warm-up. A CPU tensor's value moved to the device is data:
    # a parameter whatever its value
    x = torch.arange(6.0, device=dev)
    lc.mark_step(wait=True)
    c0 = metrics.counters()["compiles"]
    for k in range(5):
        n = torch.tensor(k).to(dev)
        np.testing.assert_array_equal((x * (n + 1)).cpu().numpy(), (torch.arange(6.0) * (k + 1)).numpy())
    assert metrics.counters()["compiles"] - c0 == 1
