"""torch's window functions made on the lazy device are eager's values."""

import pytest
import torch

import lazycore.torch as ltorch


@pytest.mark.parametrize("args", [(8,), (8, False), (9, True, 5.0), (1,), (0,)])
@pytest.mark.parametrize("dtype", [None, torch.float64])
def test_window_functions_on_the_device_are_eagers(args, dtype):
    """The window functions users make on the device (audio front ends): each
    eager's values. ``kaiser_window``'s torch kernel is a CPU/CUDA DispatchStub,
    which raised ``unsupported device type lazy``; the others are composites."""
    dev = ltorch.device()
    for window in (torch.kaiser_window, torch.hann_window, torch.hamming_window, torch.blackman_window,
                   torch.bartlett_window):
        if window is not torch.kaiser_window and len(args) > 2:
            continue
        got = window(*args, dtype=dtype, device=dev)
        want = window(*args, dtype=dtype)
        assert got.device.type == "lazy" and got.dtype == want.dtype
        assert torch.equal(got.cpu(), want), window.__name__
