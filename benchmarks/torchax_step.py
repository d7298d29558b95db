"""Benchmarks 13-15's torchax row: the same training step as the other rows,
the model run by torchax (torch ops on jax arrays) and the whole step under
one ``jax.jit``, as a torchax user writes it (issue 40 item 1: "torchax under
jax.jit").

The forward is the model's own (``torchax.interop.JittableModule``'s
``functional_call`` of the workload's loss), the gradient ``jax.value_and_grad``,
and the optimizer, clipping and learning rates those of the workload's torch
optimizer, written out in jax: torch's ``AdamW`` and ``SGD`` formulas per
parameter group (``clip_grad_norm_``'s total norm and ``max_norm / (norm +
1e-6)`` clamped to 1 first). The schedule steps the torch optimizer on the
host, and each step's learning rates are an argument of the jitted step, so a
schedule never retraces it. Parameters, buffers (batch norm's running
statistics come back from the forward) and the optimizer's state are donated.
The step waits for the step before before it dispatches (as lazycore's
``mark_step()`` does).

torchax 0.0.13 (the newest release) names ``aten`` overloads of named tensors
that torch 2.13 no longer has (``aten.prod.dim_Dimname``, ...) in tables it
builds at import and in ``default_env()``; :func:`environment` lets those
lookups give a stand-in while it imports, so the tables' other entries load.
"""

from __future__ import annotations

import contextlib


class _Missing:
    """A stand-in for an operator overload this torch no longer has: a table key nothing dispatches to."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"<no overload {self.name}>"


@contextlib.contextmanager
def _lenient_overloads():
    import torch._ops as ops

    strict = ops.OpOverloadPacket.__getattr__

    def lenient(self, key):
        try:
            return strict(self, key)
        except AttributeError:
            if key.startswith("__"):
                raise
            return _Missing(f"{self._qualified_op_name}.{key}")

    ops.OpOverloadPacket.__getattr__ = lenient
    try:
        yield
    finally:
        ops.OpOverloadPacket.__getattr__ = strict


def environment():
    """torchax's default environment (torchax and its ``interop`` imported
    with :func:`_lenient_overloads`: an import outside it fails on torch 2.13)."""
    with _lenient_overloads():
        import torchax
        import torchax.interop  # noqa: F401 (imported here, where it can be)

        return torchax.default_env()


def supported(opt) -> str:
    """Why ``opt`` has no jax form here ('' when it has)."""
    import torch

    if type(opt) not in (torch.optim.AdamW, torch.optim.SGD):
        return f"{type(opt).__name__} not written for jax"
    for g in opt.param_groups:
        if g.get("amsgrad") or g.get("maximize") or g.get("differentiable"):
            return "amsgrad/maximize not written for jax"
    return ""


class TorchaxVariant:
    """``one()``: a step (waiting for the one before), then the schedule; ``final()``: loss and state on the host."""

    def __init__(self, work, model, batches, total):
        import jax
        import jax.numpy as jnp
        import torch

        env = environment()  # imports torchax
        from torchax import interop
        opt, self.schedule, clip = work.optimizer(model, total)
        why = supported(opt)
        if why:
            raise NotImplementedError(why)
        self.opt = opt
        group_of = {}
        for i, g in enumerate(opt.param_groups):
            for p in g["params"]:
                group_of[id(p)] = i
        names = {name: group_of[id(p)] for name, p in model.named_parameters(remove_duplicate=False)
                 if id(p) in group_of}
        with env:
            model.to("jax")
            if hasattr(model, "tie_weights"):
                # .to("jax") makes a new parameter per attribute, untying GPT-2's lm_head from its
                # embedding (each would train on its own part of the gradient); transformers' Trainer
                # ties them again after moving a model, as a torchax user must
                model.tie_weights()
        jm = interop.JittableModule(model)
        self.jm, self.env = jm, env
        params = interop.jax_view(dict(jm.params))
        buffers = interop.jax_view(dict(jm.buffers))
        order = sorted(params)
        group = {k: names[k] for k in order}
        hyper = [dict(g) for g in opt.param_groups]
        adamw = isinstance(opt, torch.optim.AdamW)

        def loss_of(params, buffers, batch):
            p, b, bt = interop.torch_view((params, buffers, batch))
            with env:
                def forward(*args, **kwargs):
                    return jm.functional_call("forward", p, b, *args, **kwargs)

                loss = work.loss(forward, bt)
            # batch norm's running statistics were updated in place on b's tensors
            return interop.jax_view(loss), interop.jax_view(b)

        grad = jax.value_and_grad(loss_of, has_aux=True)

        def step(params, buffers, state, batch, lrs):
            (loss, buffers), grads = grad(params, buffers, batch)
            if clip is not None:
                norm = jnp.sqrt(sum(jnp.sum(jnp.square(grads[k])) for k in order))
                coef = jnp.minimum(clip / (norm + 1e-6), 1.0)
                grads = {k: g * coef for k, g in grads.items()}
            count = state["count"] + 1
            new_params, new_state = {}, {"count": count}
            for k in order:
                h, lr, p, g = hyper[group[k]], lrs[group[k]], params[k], grads[k]
                wd = h["weight_decay"]
                if adamw:
                    b1, b2 = h["betas"]
                    p = p * (1 - lr * wd)
                    m = state["m"][k] * b1 + g * (1 - b1)
                    v = state["v"][k] * b2 + g * g * (1 - b2)
                    t = count.astype(jnp.float32)
                    denom = jnp.sqrt(v) / jnp.sqrt(1 - b2 ** t) + h["eps"]
                    p = p - (lr / (1 - b1 ** t)) * m / denom
                    new_state.setdefault("m", {})[k], new_state.setdefault("v", {})[k] = m, v
                else:
                    if wd:
                        g = g + wd * p
                    mom = h["momentum"]
                    if mom:
                        buf = jnp.where(count == 1, g, state["buf"][k] * mom + g * (1 - h["dampening"]))
                        new_state.setdefault("buf", {})[k] = buf
                        g = g + mom * buf if h["nesterov"] else buf
                    p = p - lr * g
                new_params[k] = p
            return loss, new_params, buffers, new_state

        def zeros():
            return {k: jnp.zeros_like(params[k]) for k in order}

        state = {"count": jnp.zeros((), jnp.int32)}
        if adamw:
            state.update(m=zeros(), v=zeros())
        elif any(h["momentum"] for h in hyper):
            state["buf"] = zeros()
        self.params, self.buffers, self.state = params, buffers, state
        self.jitted = jax.jit(step, donate_argnums=(0, 1, 2))
        self.batches = [{k: jnp.asarray(v.numpy()) for k, v in b.items()} for b in batches]
        self.i, self.last = 0, None

    def wait(self):
        import jax

        if self.last is not None:
            jax.block_until_ready(self.last)

    def one(self):
        import jax.numpy as jnp

        self.wait()  # as mark_step(): the step before has finished when this one starts
        batch = self.batches[self.i % len(self.batches)]
        self.i += 1
        lrs = jnp.asarray([g["lr"] for g in self.opt.param_groups], jnp.float32)
        self.last, self.params, self.buffers, self.state = self.jitted(self.params, self.buffers, self.state,
                                                                       batch, lrs)
        self.schedule()

    def final(self):
        import numpy as np
        import torch

        self.wait()
        values = dict(self.params)
        values.update(self.buffers)
        for first, others in self.jm._extra_dumped_weights.items():
            for k in others:
                values[k] = values[first]
        names = [k for k in self.jm._model.state_dict(keep_vars=True)]
        state = {k: torch.from_numpy(np.array(values[k])).double() for k in names
                 if k in values and np.issubdtype(np.asarray(values[k]).dtype, np.floating)}
        return float(np.asarray(self.last)), state
