"""A captured step's guards on the attributes of a ``self`` it entered,
checked together per object (lazycore.trace.pyreads.Guards): the identity of
each value with the one the traced call read passes at once; anything else
is decided check by check, as before (a value changed, an empty container
filled in place, an equal value in another object)."""

import torch

import lazycore.torch as ltorch


class _Scaler(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = 2.0
        self.shift = 0.5
        self.extra = []  # an empty container: guarded by value

    def forward(self, x):
        # (getattr: no attribute load of its own to guard, only the self's attributes)
        return x * self.scale + self.shift + sum(getattr(self, "extra"))


def _run(change, n=4):
    """The module's step called ``n`` times, then after ``change(module)``:
    (the last result, whether the call after the change replayed)."""
    dev = ltorch.device()
    m = _Scaler()
    step = ltorch.capture(lambda x: m(x))
    x = torch.ones(2, device=dev)
    for _ in range(n):
        step(x)
        ltorch.mark_step()
    assert step.replays >= 1, step.why
    change(m)
    replays = step.replays
    out = step(x).cpu().tolist()
    ltorch.mark_step()
    return out, step.replays == replays + 1


def test_unchanged_attributes_replay():
    assert _run(lambda m: None) == ([2.5, 2.5], True)


def test_an_equal_value_in_another_object_replays():
    # (a new float object of the same value: not the object read, equal to its snapshot)
    assert _run(lambda m: setattr(m, "scale", float("2.0"))) == ([2.5, 2.5], True)


def test_a_changed_value_traces_again():
    assert _run(lambda m: setattr(m, "shift", 1.5)) == ([3.5, 3.5], False)


def test_an_empty_container_filled_in_place_traces_again():
    assert _run(lambda m: m.extra.append(10.0)) == ([12.5, 12.5], False)

