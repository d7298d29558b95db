"""lazycore.torch.DeviceLoader: batches copied to the device by a background
thread, the step marked at each batch boundary (PyTorch/XLA's MpDeviceLoader)."""

import threading
import time

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

import lazycore
import lazycore.torch as ltorch
from lazycore.ir import events
from lazycore.observe import metrics


def _data(n=40, batch=8):
    g = torch.Generator().manual_seed(0)
    ds = TensorDataset(torch.randn(n, 6, generator=g), torch.randint(0, 3, (n,), generator=g))
    return DataLoader(ds, batch_size=batch)


def _train(dev, loader, captured=False):
    torch.manual_seed(0)
    model = torch.nn.Linear(6, 3).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    fn = ltorch.capture(step) if captured else step
    metrics.reset()  # (the model's upload)
    losses = [fn(x, y) for x, y in loader]
    if dev.type == "lazy":
        assert all(loss.device == dev for loss in losses)
    return [float(loss.cpu()) for loss in losses], [p.detach().cpu() for p in model.parameters()], fn


def _by_hand(dev, loader):
    """The loop the loader replaces: upload each batch, mark each step."""
    for i, (x, y) in enumerate(loader):
        if i:
            lazycore.mark_step()
        yield x.to(dev), y.to(dev)
    lazycore.mark_step()


@pytest.mark.parametrize("captured", [False, True])
def test_a_training_loop_over_the_loader_matches_eager_with_one_step_per_batch(dev, captured):
    eager = _train(torch.device("cpu"), _data())
    uploads = []
    record = lambda direction, t, nbytes: uploads.append(t.shape) if direction == "host-to-device" else None  # noqa: E731
    events.listen("transfer", record)
    try:
        got = _train(dev, ltorch.DeviceLoader(_data(), dev), captured)
    finally:
        events.unlisten("transfer", record)
    batches = [u for u in uploads if u[:1] == (8,)]  # (the optimizer uploads its 0-d learning rate once)
    assert sorted(batches) == sorted([(8,), (8, 6)] * len(_data()))  # each batch copied once
    np.testing.assert_allclose(got[0], eager[0], rtol=1e-5)
    for u, v in zip(got[1], eager[1]):
        np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-6)
    c = metrics.counters()
    assert c["executions"] == len(_data())  # one step per batch, the last when the data ended
    assert got[0] == _train(dev, _by_hand(dev, _data()), captured)[0]
    if captured:
        assert got[2].replays == len(_data()) - 2  # uploads happen outside the step


def test_batches_keep_their_structure_and_non_tensors(dev):
    loader = [{"x": torch.arange(6.0).reshape(2, 3), "n": 7, "s": torch.tensor(2.5), "ids": [torch.arange(3)]}]
    (batch,) = list(ltorch.DeviceLoader(loader, dev))
    assert batch["n"] == 7 and batch["x"].device == dev and batch["ids"][0].device == dev
    assert batch["s"].device == dev and batch["s"].dim() == 0
    np.testing.assert_array_equal(batch["x"].cpu().numpy(), np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(batch["ids"][0].cpu().numpy(), np.arange(3))
    assert batch["x"].dtype == torch.float32 and batch["ids"][0].dtype == torch.int64


def test_an_error_in_the_loader_is_raised_at_the_loop_with_its_type(dev):
    def bad():
        yield torch.ones(2)
        raise KeyError("missing sample")

    it = iter(ltorch.DeviceLoader(bad(), dev))
    next(it)
    with pytest.raises(KeyError, match="missing sample"):
        next(it)


def test_breaking_out_early_stops_the_background_thread(dev):
    def endless():
        while True:
            yield torch.ones(4)

    it = iter(ltorch.DeviceLoader(endless(), dev, prefetch=1))
    next(it)
    it.close()
    it.thread.join(timeout=5)
    assert not it.thread.is_alive()


def test_copies_overlap_the_step(dev):
    """The loader's thread copies while the tracing thread waits elsewhere."""
    seen = []

    def slow():
        for i in range(3):
            seen.append((i, threading.current_thread().name))
            yield torch.full((3,), float(i))

    loader = ltorch.DeviceLoader(slow(), dev, prefetch=2)
    it = iter(loader)
    first = next(it)
    deadline = time.time() + 5
    while len(seen) < 3 and time.time() < deadline:
        time.sleep(0.01)
    assert [name for _, name in seen] == ["lazycore-device-loader"] * 3  # read ahead, off the main thread
    assert float(first.sum().cpu()) == 0.0
    assert [float(b.sum().cpu()) for b in it] == [3.0, 6.0]
    lazycore.mark_step()


def test_len_and_bad_prefetch(dev):
    assert len(ltorch.DeviceLoader(_data(), dev)) == 5
    with pytest.raises(ValueError):
        ltorch.DeviceLoader(_data(), dev, prefetch=0)
