import pytest


@pytest.fixture(scope="session")
def dev():
    import lazycore.torch as ltorch

    return ltorch.device()
