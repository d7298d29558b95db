"""What the decomposition-replay tests measure: the ops reaching the lazy
device's dispatch, and the graph nodes a call made."""

import numpy as np
import torch

from lazycore.frontends.torch import tensor as _tensor


def rand(*shape, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


class Dispatches:
    """Counts the ops that reach the lazy device's dispatch (pieces of a decomposition included)."""

    def __init__(self, monkeypatch):
        self.count = 0
        inner = _tensor._dispatch

        def counting(func, args, kwargs):
            self.count += 1
            return inner(func, args, kwargs)

        monkeypatch.setattr(_tensor, "_dispatch", counting)


def digests(out):
    outs = out if isinstance(out, (list, tuple)) else (out,)
    return [None if o is None else _tensor.read(o).value.node.digest for o in outs]
