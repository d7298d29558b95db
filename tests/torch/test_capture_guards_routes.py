"""Every route by which a model or its config changes after a captured step
recorded is seen before the next replay (issue 41, never silently stale), now
that the guards on unchanged modules and configs are checked in C loops
(issue 40: a replayed decoding token checks ~430 of them).

The model is library code, as transformers' is (compiled as ``<library>``,
which capture does not watch line by line): its modules' attributes, the plain
attributes of the config it holds, its submodules, parameters and flags are
what the guards hold. Each change is made after the recording replayed, with
the old object kept alive where one is replaced (a swapped submodule, a
replaced parameter: while it lives its graph could be replayed)."""

import pytest
import torch

import lazycore.torch as ltorch

_LIBRARY = """
import torch


class Block(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.lin = torch.nn.Linear(4, 4)
        self.act = torch.nn.ReLU()
        self.scale = 1.0
        self.table = {"shift": 0.0}
        self.steps = [1.0]

    def forward(self, x):
        y = self.act(self.lin(x)) * self.scale * self.config.scale
        y = y + self.table["shift"] + self.steps[-1] + self.config.offsets[0]
        if self.config.mapping.get("double"):
            y = y * 2
        if self.training:
            y = y * 3
        return y
"""


class _Config:
    def __init__(self):
        self.scale = 1.0
        self.offsets = [0.0]
        self.mapping = {"double": False}


def _model():
    space = {}
    exec(compile(_LIBRARY, "<library>", "exec"), space)
    torch.manual_seed(0)
    return space["Block"](_Config()).eval()


def _swap_submodule(m, kept):
    kept.append(m.act)
    m.act = torch.nn.Tanh()


def _replace_parameter(m, kept):
    kept.append(m.lin.weight)
    m.lin.weight = torch.nn.Parameter(torch.full((4, 4), 0.25, device=m.lin.weight.device))


_ROUTES = {
    "setattr on the module": lambda m, kept: setattr(m, "scale", 2.0),
    "setattr on the config": lambda m, kept: setattr(m.config, "scale", 3.0),
    "a module's dict in place": lambda m, kept: m.table.__setitem__("shift", 1.0),
    "a module's list in place": lambda m, kept: m.steps.append(5.0),
    "the config's list in place": lambda m, kept: m.config.offsets.__setitem__(0, 0.5),
    "the config's dict in place": lambda m, kept: m.config.mapping.__setitem__("double", True),
    "a submodule swapped": _swap_submodule,
    "a parameter replaced": _replace_parameter,
    "train()": lambda m, kept: m.train(),
    "requires_grad flipped": lambda m, kept: m.lin.weight.requires_grad_(False),
}


@pytest.mark.parametrize("route", list(_ROUTES))
def test_a_change_by_each_route_is_seen_before_the_replay(route):
    dev = ltorch.device()
    model = _model().to(dev)

    @ltorch.capture
    def step(x):
        with torch.no_grad():
            return model(x)

    x = torch.linspace(-1, 1, 12).reshape(3, 4).to(dev)
    ltorch.mark_step()
    for _ in range(4):
        step(x)
        ltorch.mark_step()
    assert step.replays == 2, step.why  # (the third and fourth calls)
    kept = []
    _ROUTES[route](model, kept)
    traces = step.traces
    got = step(x).cpu()
    ltorch.mark_step()
    assert step.traces == traces + 1  # traced again, not replayed
    with torch.no_grad():
        want = model(x).cpu()
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    # and the new state's recording replays in its turn
    for _ in range(3):
        out = step(x).cpu()
        ltorch.mark_step()
    torch.testing.assert_close(out, want, rtol=0, atol=0)
    assert step.replays >= 3, step.why


def test_unchanged_model_and_config_replay_and_a_deleted_attribute_traces():
    dev = ltorch.device()
    model = _model().to(dev)

    @ltorch.capture
    def step(x):
        with torch.no_grad():
            return model(x)

    x = torch.ones(3, 4).to(dev)
    for _ in range(6):
        step(x)
        ltorch.mark_step()
    assert step.replays == 4, step.why
    del model.config.mapping  # (the library code would now raise: the call is traced and does)
    with pytest.raises(AttributeError):
        step(x)
