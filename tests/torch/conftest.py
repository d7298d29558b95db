import pytest


@pytest.fixture(scope="session")
def dev():
    import lazycore.torch as ltorch

    return ltorch.device()


@pytest.fixture
def no_fallback():
    """The test runs no op through eager's kernels (a fallback)."""
    from lazycore.observe import metrics

    before = sum(sum(v.values()) for v in metrics.fallbacks().values())
    yield
    after = metrics.fallbacks()
    assert sum(sum(v.values()) for v in after.values()) == before, after


@pytest.fixture
def device_values(monkeypatch):
    """No upload keeps a host copy: values are the device's, as a model's are."""
    from lazycore.runtime import hostreads

    monkeypatch.setattr(hostreads, "KEPT_BYTES", 0)


@pytest.fixture(params=[1, 2], ids=["1-thread", "2-threads"])
def threads(request):
    """torch's thread count for the test: eager's kernels split rows by it, and
    a loop run in the calling thread can be compiled apart from its threads'."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(before)
