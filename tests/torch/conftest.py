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
