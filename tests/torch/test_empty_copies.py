"""A copy into a lazy tensor of no elements writes nothing: transformers'
``DynamicCache`` makes ``torch.tensor([], device=x.device)`` for its keys and
values at every forward, training included (GPT-2, Llama: 4 a step), and the
upload behind it made a constant, a broadcast and a write each time (~150 us a
call, issue 40). The copy still checks its arguments as eager does."""

import sys

import pytest
import torch

import lazycore.torch as ltorch
from lazycore.ir.graph import LOG
from _bits import MODEL_RUN  # (tests/ is on the path)


def _nodes(f) -> int:
    n0 = len(LOG.nodes)
    f()
    return len(LOG.nodes) - n0


def _python_calls(f) -> int:
    n = [0]

    def prof(frame, event, arg):
        if event in ("call", "c_call"):
            n[0] += 1

    sys.setprofile(prof)
    try:
        f()
    finally:
        sys.setprofile(None)
    return n[0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_an_empty_host_tensor_moved_to_the_device_makes_no_node(dev, dtype):
    make = lambda: torch.tensor([], dtype=dtype, device=dev)  # noqa: E731
    for _ in range(3):  # recorded, then replayed
        make()
    ltorch.mark_step()
    x = make()
    assert x.device == dev and x.dtype == dtype and x.shape == (0,)
    assert _nodes(make) == 0
    assert x.cpu().shape == (0,) and x.cpu().dtype == dtype


def test_copying_into_an_empty_lazy_tensor_makes_no_node(dev):
    d = torch.empty(2, 0, 3, device=dev)
    src = torch.empty(2, 0, 3, dtype=torch.float64)
    ltorch.mark_step()
    assert _nodes(lambda: d.copy_(src)) == 0
    lazy_src = torch.empty(0, 3, device=dev)
    assert _nodes(lambda: d.copy_(lazy_src)) == 0  # (broadcast from a lazy one)
    assert d.cpu().shape == (2, 0, 3)


def test_an_empty_upload_costs_few_python_calls(dev):
    make = lambda: torch.tensor([], dtype=torch.float32, device=dev)  # noqa: E731
    for _ in range(3):
        make()
    # 256 Python calls before (the upload's constant and broadcast, the convert and the write), 88 after:
    # torch's empty, lift_fresh and the copy's checks
    assert _python_calls(make) <= 100


def test_a_bad_copy_into_an_empty_tensor_is_eagers_error(dev):
    d = torch.empty(0, 3, device=dev)
    with pytest.raises(RuntimeError) as want:
        torch.empty(0, 3).copy_(torch.empty(0, 4))
    with pytest.raises(RuntimeError) as got:
        d.copy_(torch.empty(0, 4))
    assert str(got.value) == str(want.value)


# CI: test_keep_roundings.py::test_tied_transformer_gradients_are_eagers_bits[gelu] runs GPT-2's forward and loss
@MODEL_RUN
def test_the_empty_cache_of_a_transformers_forward_gives_eagers_loss(dev):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=64, n_positions=32,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = transformers.GPT2LMHeadModel(cfg).train()
    ids = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(1))
    want = model(input_ids=ids, labels=ids).loss
    lazy = model.to(dev)
    got = lazy(input_ids=ids.to(dev), labels=ids.to(dev)).loss
    torch.testing.assert_close(got.cpu(), want.detach(), rtol=1e-5, atol=1e-6)
