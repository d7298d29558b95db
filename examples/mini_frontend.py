"""An example third frontend: NumPy-like arrays on lazycore's core API only.

What a frontend needs (docs/dev/frontends.md, "The runtime: plugging in a frontend"): make
device data (``lc.from_numpy``), apply ops (``lc.apply``, with Python numbers
through ``lc.scalar``, the scalar policy), update in place
(``handle.assign``), read values (``lc.to_numpy``). Two more things make it
a first-class citizen:

- ``lc.replayed``: each op's lowering is recorded once per call signature
  (types, devices, Python values) and replayed after, the per-op fast path
  the built-in frontends have (benchmark 1 compares its cost per op with
  lazycore.torch's);
- the frontend protocol (``__lazycore_value__``, ``__lazycore_wrap__``):
  ``lc.debug.ir_text``, ``lc.debug.to_dot``, ``lc.testing.capture`` and
  ``lc.export`` take its arrays.

``python examples/mini_frontend.py`` runs a small program and prints its IR.
"""

from __future__ import annotations

import numpy as np

import lazycore as lc


# Its ops' lowerings, recorded once per call signature and replayed after
# (``lc.replayed``): the per-op fast path the built-in frontends have.
@lc.replayed
def _binary(name, a, b, reverse):
    return lc.apply(name, *((b, a) if reverse else (a, b)))


@lc.replayed
def _with_scalar(name, a, value, reverse):
    s = lc.scalar(value, dtype=a.dtype, device=a.device)
    b = lc.apply("broadcast_in_dim", s, dims=(), shape=a.shape) if a.shape else s
    return lc.apply(name, *((b, a) if reverse else (a, b)))


@lc.replayed
def _unary(name, a):
    return lc.apply(name, a)


class MiniArray:
    """An example frontend: NumPy-like operators on the core API only.

    Python scalars go through ``lc.scalar`` (the scalar policy) and are
    broadcast to the array's shape; ``+=``/``-=`` are in-place updates.
    """

    def __init__(self, t):
        self.t = t

    @classmethod
    def from_numpy(cls, a, device=None):
        return cls(lc.from_numpy(a, device))

    def _lift(self, other):
        if isinstance(other, MiniArray):
            return other.t
        s = lc.scalar(other, dtype=self.t.dtype, device=self.t.device)
        return lc.apply("broadcast_in_dim", s, dims=(), shape=self.t.shape) if self.t.shape else s

    def _op(self, name, other, reverse=False):
        if isinstance(other, MiniArray):
            return MiniArray(_binary(name, self.t, other.t, reverse))
        return MiniArray(_with_scalar(name, self.t, other, reverse))

    __add__ = lambda self, o: self._op("add", o)
    __radd__ = lambda self, o: self._op("add", o, True)
    __sub__ = lambda self, o: self._op("sub", o)
    __rsub__ = lambda self, o: self._op("sub", o, True)
    __mul__ = lambda self, o: self._op("mul", o)
    __rmul__ = lambda self, o: self._op("mul", o, True)
    __truediv__ = lambda self, o: self._op("div", o)
    __neg__ = lambda self: MiniArray(_unary("neg", self.t))

    def tanh(self):
        return MiniArray(_unary("tanh", self.t))

    def __iadd__(self, o):
        self.t.assign(lc.apply("add", self.t, self._lift(o)))
        return self

    def __isub__(self, o):
        self.t.assign(lc.apply("sub", self.t, self._lift(o)))
        return self

    def numpy(self):
        return lc.to_numpy(self.t)

    def __repr__(self):
        return f"MiniArray({self.numpy()!r})"

    # the frontend protocol (lazycore.trace.protocol): the core's tools take MiniArrays
    def __lazycore_value__(self):
        return self.t

    @classmethod
    def __lazycore_wrap__(cls, handle):
        return cls(handle)


if __name__ == "__main__":
    x = MiniArray.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
    y = (x * 0.5 + 1).tanh() - x
    print(lc.debug.ir_text(y))
    print(y)
