"""Adam's and AdamW's eager (non-capturable) step as one multi-tensor form over lazy parameters.

Run per parameter, eager's step recomputes its hyperparameter math for every
parameter (``1 - lr * weight_decay``, ``1 - beta1``, ``-lr``, each rounded
to the parameter's dtype where it meets it): about 40 graph nodes per
parameter, all of which a replayed optimizer step makes again every step
(:mod:`.optim_replay`). Here the math that does not depend on a step counter
is computed once per parameter group, and each rounding to a dtype once per
dtype; the bias corrections stay per counter, as 0-d values. The formulas
are eager's non-capturable ones, in float64 where Python computes them with
floats (:mod:`.optim`), rounded once to the parameter's dtype where eager
rounds the Python number: the values are those of the per-parameter form.
"""

from __future__ import annotations

import torch

_ROUNDED_ONCE = (torch.float32, torch.float64)
"""Parameter dtypes whose ops take a Python number rounded to the dtype itself;
a reduced-precision parameter's op computes in float32 (torch's opmath), so its
scalars go to the op as float64 values and the op rounds them as it does now."""


class _Scalars:
    """A group's float64 device scalars (or Python numbers), each converted to
    a parameter dtype at most once."""

    def __init__(self):
        self._cast: dict = {}

    def at(self, value, dtype):
        if not isinstance(value, torch.Tensor) or dtype not in _ROUNDED_ONCE or value.dtype == dtype:
            return value
        key = (id(value), dtype)
        found = self._cast.get(key)
        if found is None:
            found = self._cast[key] = (value, value.to(dtype))
        return found[1]


def _rounded(value, dtype):
    return value.to(dtype) if dtype in _ROUNDED_ONCE else value


def supports(params, state_steps, *, has_complex=False, beta2=None, weight_decay=0.0, eps=0.0, **_ignored) -> bool:
    """Whether :func:`adam` takes these arguments: real parameters with their
    counters beside them, and the hyperparameters torch takes as Python
    numbers given as such."""
    if has_complex or not all(type(v) in (float, int) for v in (beta2, weight_decay, eps)):
        return False
    device = params[0].device
    return all(p.device == device for p in params) and all(
        isinstance(s, torch.Tensor) and s.device == device and s.dim() == 0 for s in state_steps)


def adam(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *, amsgrad, beta1, beta2, lr,
         weight_decay, eps, maximize, decoupled_weight_decay, **_ignored) -> None:
    """torch.optim.adam's non-capturable step (``_single_tensor_adam``'s
    else-branch, which ``_multi_tensor_adam``'s matches), with ``lr`` and
    ``beta1`` float64 device values or Python floats."""
    if not params:
        return
    scalars = _Scalars()
    with torch.no_grad():
        torch._foreach_add_(state_steps, 1)
        step_size_neg = -lr  # (-lr / c is -(lr / c) exactly)
        decay = 1 - lr * weight_decay if weight_decay != 0 and decoupled_weight_decay else None
        one_minus_beta1 = 1 - beta1
        for i, param in enumerate(params):
            grad = grads[i] if not maximize else -grads[i]
            exp_avg, exp_avg_sq = exp_avgs[i], exp_avg_sqs[i]
            dtype = param.dtype
            if weight_decay != 0:
                if decoupled_weight_decay:
                    param.mul_(scalars.at(decay, dtype))
                else:
                    grad = grad.add(param, alpha=weight_decay)
            exp_avg.lerp_(grad, scalars.at(one_minus_beta1, dtype))
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            # (0-d, not one vector of the group's counters: a vector's length would be
            # the number of parameters with a gradient, a new shape when it changes)
            step = state_steps[i].to(torch.float64)  # (eager: step_t.item())
            step_size = _rounded(step_size_neg / (1 - beta1 ** step), dtype)
            correction = _rounded((1 - beta2 ** step) ** 0.5, dtype)
            if amsgrad:
                torch.maximum(max_exp_avg_sqs[i], exp_avg_sq, out=max_exp_avg_sqs[i])
                denom = (max_exp_avg_sqs[i].sqrt() / correction).add_(eps)
            else:
                denom = (exp_avg_sq.sqrt() / correction).add_(eps)
            # addcdiv_(a, b, value=s) computes (s * a) / b
            param.addcdiv_(exp_avg * step_size, denom)
