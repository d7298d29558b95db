"""The statements of :mod:`tests.fuzz_programs` in torch and in NumPy, eager and lazy."""

from __future__ import annotations

import numpy as np


class TorchSide:
    """Statements as torch code on ``device`` (the CPU: eager; the lazy device: lazycore)."""

    def __init__(self, device):
        import torch

        self.torch = torch
        self.device = device
        self.lazy = device.type == "lazy"

    def numpy(self, v):
        return v.detach().cpu().numpy() if isinstance(v, self.torch.Tensor) else np.asarray(v)

    def sync(self, env):
        import lazycore

        lazycore.mark_step()
        for v in env.values():
            v.cpu()

    def execute(self, env, kind, args):
        t = self.torch
        if kind == "make":
            name, values = args
            env[name] = t.from_numpy(values.copy()).to(self.device)
        elif kind == "binary":
            new, op, a, b = args
            x, y = env[a], env[b]
            fn = {"add": t.add, "sub": t.sub, "mul": t.mul, "div": t.div, "maximum": t.maximum,
                  "minimum": t.minimum, "floor_divide": t.floor_divide, "remainder": t.remainder,
                  "less": t.lt, "equal": t.eq, "where": lambda x, y: t.where(x > 0, x, y)}[op]
            env[new] = fn(x, y)
        elif kind == "unary":
            new, op, a = args
            x = env[a]
            fn = {"neg": t.neg, "abs": t.abs, "exp": t.exp, "sin": t.sin, "tanh": t.tanh, "sqrt": t.sqrt,
                  "log": t.log, "sign": t.sign, "floor": t.floor, "square": t.square}[op]
            env[new] = fn(x)
        elif kind == "reduce":
            new, op, a, axis = args
            x = env[a]
            if op == "sum":
                env[new] = x.sum() if axis is None else x.sum(axis)
            elif op == "max":
                env[new] = x.amax() if axis is None else x.amax(axis)
            elif op == "mean":
                env[new] = x.mean() if axis is None else x.mean(axis)
            elif op == "cumsum":
                env[new] = x.flatten().cumsum(0) if axis is None else x.cumsum(axis)
            else:
                env[new] = x.argmax() if axis is None else x.argmax(axis)
        elif kind == "view":
            new, view, a = args
            x = env[a]
            if view == "T":
                env[new] = x.transpose(0, -1) if x.dim() >= 2 else x
            elif view == "reshape":
                env[new] = x.reshape(-1)
            elif view == "slice":
                env[new] = x[..., 1:]
            elif view == "index0":
                env[new] = x[0]
            elif view == "expand":
                env[new] = x.expand(2, *x.shape)
            else:
                env[new] = x.unsqueeze(0)
        elif kind == "inplace":
            op, a, b, scalar = args
            x, y = env[a], env[b]
            if isinstance(x, np.generic) and op not in ("add_", "mul_"):
                # a lazy scalar takes item assignment as the Array API's 0-d arrays do
                # (docs/status.md; scipy writes into reductions' results): NumPy's scalar
                # refuses it, a NumPy 0-d array is the reference
                x = np.array(x)
            if op == "add_":
                x.add_(y)
            elif op == "mul_":
                x.mul_(scalar)
            elif op == "fill_slice":
                x[..., :1].fill_(scalar)
            elif op == "setitem0":
                x[0] = scalar
            else:
                x[:1] = y[:1]
        elif kind == "matmul":
            new, a, b = args
            env[new] = t.matmul(env[a], env[b])
        elif kind == "concat":
            new, a, b = args
            env[new] = t.cat([env[a], env[b]])
        elif kind == "take":
            new, a, k = args
            x = env[a]
            n = x.numel()
            env[new] = x.flatten()[t.tensor([k % n, 0], device=self.device)]
        elif kind == "barrier" and self.lazy:
            import lazycore

            lazycore.mark_step()


class NumpySide:
    """Statements as NumPy code, on ``numpy`` or on ``lazycore.numpy``."""

    def __init__(self, xp):
        self.xp = xp
        self.lazy = xp is not np

    def numpy(self, v):
        return np.asarray(v)

    def sync(self, env):
        import lazycore

        lazycore.mark_step()
        for v in env.values():
            np.asarray(v)

    def execute(self, env, kind, args):
        xp = self.xp
        if kind == "make":
            name, values = args
            env[name] = xp.asarray(values.copy())
        elif kind == "binary":
            new, op, a, b = args
            x, y = env[a], env[b]
            if op == "where":
                env[new] = xp.where(x > 0, x, y)
            else:
                env[new] = getattr(xp, {"div": "true_divide"}.get(op, op))(x, y)
        elif kind == "unary":
            new, op, a = args
            env[new] = getattr(xp, {"neg": "negative"}.get(op, op))(env[a])
        elif kind == "reduce":
            new, op, a, axis = args
            env[new] = getattr(xp, op)(env[a], axis=axis)
        elif kind == "view":
            new, view, a = args
            x = env[a]
            if view == "T":
                env[new] = x.T
            elif view == "reshape":
                env[new] = x.reshape(-1)
            elif view == "slice":
                env[new] = x[..., 1:]
            elif view == "index0":
                env[new] = x[0]
            elif view == "expand":
                env[new] = xp.broadcast_to(x, (2,) + x.shape)
            else:
                env[new] = x[None]
        elif kind == "inplace":
            op, a, b, scalar = args
            x, y = env[a], env[b]
            if isinstance(x, np.generic) and op not in ("add_", "mul_"):
                # a lazy scalar takes item assignment as the Array API's 0-d arrays do
                # (docs/status.md; scipy writes into reductions' results): NumPy's scalar
                # refuses it, a NumPy 0-d array is the reference
                x = np.array(x)
            if op == "add_":
                x += y
            elif op == "mul_":
                x *= scalar
            elif op == "fill_slice":
                x[..., :1] = scalar
            elif op == "setitem0":
                x[0] = scalar
            else:
                x[:1] = y[:1]
            env[a] = x
        elif kind == "matmul":
            new, a, b = args
            env[new] = xp.matmul(env[a], env[b])
        elif kind == "concat":
            new, a, b = args
            env[new] = xp.concatenate([env[a], env[b]])
        elif kind == "take":
            new, a, k = args
            x = env[a]
            n = x.size
            env[new] = x.reshape(-1)[xp.asarray([k % n, 0])]
        elif kind == "barrier" and self.lazy:
            import lazycore

            lazycore.mark_step()


def pair(frontend: str):
    """(reference, lazycore) sides for ``frontend``: "torch" or "numpy"."""
    if frontend == "torch":
        import torch

        import lazycore.torch as ltorch

        return TorchSide(torch.device("cpu")), TorchSide(ltorch.device())
    import lazycore.numpy as lnp

    return NumpySide(np), NumpySide(lnp)
