"""Adam's, AdamW's, Adamax's, NAdam's and RAdam's eager (non-capturable) steps as multi-tensor forms over lazy parameters.

Run per parameter, eager's step recomputes its hyperparameter math for every
parameter (``1 - lr * weight_decay``, ``1 - beta1``, ``-lr``, each rounded
to the parameter's dtype where it meets it): about 40 graph nodes per
parameter, all of which a replayed optimizer step makes again every step
(:mod:`.optim_replay`). Here the math that does not depend on a step counter
is computed once per parameter group, and each rounding to a dtype once per
dtype (:class:`_GroupTerms`, shared by the four forms); the bias corrections
stay per counter, as 0-d values. ``lr`` and ``beta1`` (which OneCycleLR and
CyclicLR cycle) may be device values. The formulas are eager's non-capturable ones, in float64 where Python computes them with
floats (:mod:`.optim`), rounded once to the parameter's dtype where eager
rounds the Python number: Adam's and AdamW's values are those of the
per-parameter form.

RAdam's eager branch asks ``rho_t > 5`` in Python; here both of its updates
are eager's formulas and a select on the device picks one, so it needs no
read back. Where eager gives a Python number to an operator of a tensor, the
operator is eager's (``number / t`` is ``t.reciprocal() * number``), and a
0-d state tensor multiplied by a Python number (NAdam's ``mu_product *= mu``)
multiplies by the number rounded to the state's dtype, as eager's does.

Adamax's values are eager's bit for bit, and so is every second moment
(``addcmul_`` is eager's fused multiply-add, :mod:`.ops.nn`). Parameters
are within an ulp or so of eager's per step: eager's CPU kernels round
differently in two places the formulas here do not reach (``sqrt`` is not
correctly rounded, XLA's is; XLA contracts some multiply-adds that eager
rounds twice, AdamW's ``param * (1 - lr * wd)`` into the update after it).
"""

from __future__ import annotations

import torch

_ROUNDED_ONCE = (torch.float32, torch.float64)
"""Parameter dtypes whose ops take a Python number rounded to the dtype itself;
a reduced-precision parameter's op computes in float32 (torch's opmath), so its
scalars go to the op as float64 values and the op rounds them as it does now."""


class _GroupTerms:
    """A group's terms that no step counter enters (eager recomputes them per
    parameter): ``-lr``, ``1 - lr * weight_decay`` and ``1 - beta1``, float64
    device values where ``lr`` or ``beta1`` is one (or Python numbers), each
    converted to a parameter dtype at most once (:meth:`at`)."""

    __slots__ = ("lr", "one_minus_beta1", "_lr_neg", "_weight_decay", "_decay", "_cast")

    def __init__(self, lr, beta1, weight_decay, decoupled_weight_decay=False):
        self.lr = lr
        self.one_minus_beta1 = 1 - beta1
        self._lr_neg = None
        self._weight_decay = weight_decay
        self._decay = 1 - lr * weight_decay if weight_decay != 0 and decoupled_weight_decay else None
        self._cast: dict = {}

    @property
    def lr_neg(self):
        # (made when asked: RAdam's update scales by lr itself, and a node no update reads
        # would still be made again by every replay)
        if self._lr_neg is None:
            self._lr_neg = -self.lr  # (-lr / c is -(lr / c) exactly)
        return self._lr_neg

    def as_lr(self, number):
        """``number`` (a float64 device value or a Python number) as eager's
        arithmetic with ``lr`` takes it: rounded to the dtype of a learning
        rate the user gave as a tensor (``AdamW(lr=torch.tensor(1e-2))``:
        eager's ``lr / bias_correction1`` is a float32 division by the float32
        of the number), as it is otherwise (a float64 device rate: Python's
        float arithmetic)."""
        lr = self.lr
        if isinstance(lr, torch.Tensor) and lr.dtype != torch.float64 and isinstance(number, torch.Tensor):
            return number.to(lr.dtype)
        return number

    def at(self, value, dtype):
        if not isinstance(value, torch.Tensor) or dtype not in _ROUNDED_ONCE or value.dtype == dtype:
            return value
        key = (id(value), dtype)
        found = self._cast.get(key)
        if found is None:
            found = self._cast[key] = (value, value.to(dtype))
        return found[1]

    def decayed(self, param, grad):
        """Eager's weight decay: ``param`` scaled in place (decoupled), or the
        gradient with the decay term added (L2); the gradient to use."""
        if self._weight_decay == 0:
            return grad
        if self._decay is not None:
            param.mul_(self.at(self._decay, param.dtype))
            return grad
        return grad.add(param, alpha=self._weight_decay)


def _rounded(value, dtype):
    return value.to(dtype) if dtype in _ROUNDED_ONCE else value


def supports(params, state_steps, *, has_complex=False, beta1=0.0, beta2=None, weight_decay=0.0, eps=0.0,
             momentum_decay=0.0, mu_products=(), **_ignored) -> bool:
    """Whether the forms here take these arguments: real parameters with their
    counters (and NAdam's momentum products) beside them, ``beta1`` a Python
    number or a device value, and the other hyperparameters torch takes as
    Python numbers given as such."""
    if has_complex or not all(type(v) in (float, int) for v in (beta2, weight_decay, eps, momentum_decay)):
        return False
    device = params[0].device
    if isinstance(beta1, torch.Tensor):
        if beta1.device != device or beta1.dim() != 0:
            return False
    elif type(beta1) not in (float, int):
        return False
    return all(p.device == device for p in params) and all(
        isinstance(s, torch.Tensor) and s.device == device and s.dim() == 0 for s in (*state_steps, *mu_products))


def adam(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *, amsgrad, beta1, beta2, lr,
         weight_decay, eps, maximize, decoupled_weight_decay, **_ignored) -> None:
    """torch.optim.adam's non-capturable step (``_single_tensor_adam``'s
    else-branch, which ``_multi_tensor_adam``'s matches), with ``lr`` and
    ``beta1`` float64 device values or Python floats."""
    if not params:
        return
    terms = _GroupTerms(lr, beta1, weight_decay, decoupled_weight_decay)
    with torch.no_grad():
        torch._foreach_add_(state_steps, 1)
        for i, param in enumerate(params):
            exp_avg, exp_avg_sq = exp_avgs[i], exp_avg_sqs[i]
            dtype = param.dtype
            grad = terms.decayed(param, grads[i] if not maximize else -grads[i])
            exp_avg.lerp_(grad, terms.at(terms.one_minus_beta1, dtype))
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            # (0-d, not one vector of the group's counters: a vector's length would be
            # the number of parameters with a gradient, a new shape when it changes)
            step = state_steps[i].to(torch.float64)  # (eager: step_t.item())
            step_size = _rounded(terms.lr_neg / terms.as_lr(1 - beta1 ** step), dtype)
            correction = _rounded((1 - beta2 ** step) ** 0.5, dtype)
            if amsgrad:
                torch.maximum(max_exp_avg_sqs[i], exp_avg_sq, out=max_exp_avg_sqs[i])
                denom = (max_exp_avg_sqs[i].sqrt() / correction).add_(eps)
            else:
                denom = (exp_avg_sq.sqrt() / correction).add_(eps)
            # addcdiv_(a, b, value=s) computes (s * a) / b
            param.addcdiv_(exp_avg * step_size, denom)


def adamax(params, grads, exp_avgs, exp_infs, state_steps, *, eps, beta1, beta2, lr, weight_decay, maximize,
           **_ignored) -> None:
    """torch.optim.adamax's non-capturable step (``_single_tensor_adamax``'s
    else-branch), with ``lr`` a float64 device value."""
    if not params:
        return
    terms = _GroupTerms(lr, beta1, weight_decay)
    with torch.no_grad():
        torch._foreach_add_(state_steps, 1)
        for i, param in enumerate(params):
            exp_avg, exp_inf = exp_avgs[i], exp_infs[i]
            dtype = param.dtype
            grad = terms.decayed(param, grads[i] if not maximize else -grads[i])
            exp_avg.lerp_(grad, terms.at(terms.one_minus_beta1, dtype))
            torch.maximum(exp_inf.mul_(beta2), grad.abs().add_(eps), out=exp_inf)
            step = state_steps[i].to(torch.float64)  # (eager: step_t.item())
            clr_neg = _rounded(terms.lr_neg / terms.as_lr(1 - beta1 ** step), dtype)
            param.addcdiv_(exp_avg * clr_neg, exp_inf)  # (addcdiv_(a, b, value=s) computes (s * a) / b)


def nadam(params, grads, exp_avgs, exp_avg_sqs, mu_products, state_steps, *, beta1, beta2, lr, weight_decay,
          momentum_decay, eps, decoupled_weight_decay, maximize, **_ignored) -> None:
    """torch.optim.nadam's non-capturable step (``_single_tensor_nadam``'s
    else-branch), with ``lr`` a float64 device value and the momentum
    products 0-d device tensors (read as float64 values where eager reads
    them with ``.item()``)."""
    if not params:
        return
    terms = _GroupTerms(lr, beta1, weight_decay, decoupled_weight_decay)
    with torch.no_grad():
        torch._foreach_add_(state_steps, 1)
        lr_neg = terms.lr_neg
        for i, param in enumerate(params):
            exp_avg, exp_avg_sq, mu_product = exp_avgs[i], exp_avg_sqs[i], mu_products[i]
            dtype = param.dtype
            step = state_steps[i].to(torch.float64)
            bias_correction2 = 1 - beta2 ** step
            grad = terms.decayed(param, grads[i] if not maximize else -grads[i])
            mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
            mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
            mu_product.mul_(_rounded(mu, mu_product.dtype))  # (eager: a float32 tensor times a Python float)
            exp_avg.lerp_(grad, terms.at(terms.one_minus_beta1, dtype))
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            denom = exp_avg_sq.div(_rounded(bias_correction2, dtype)).sqrt().add_(eps)
            product = mu_product.to(torch.float64)  # (eager: mu_product.item())
            mu_product_next = product * mu_next
            param.addcdiv_(grad * _rounded(lr_neg * terms.as_lr(1.0 - mu) / terms.as_lr(1.0 - product), dtype), denom)
            param.addcdiv_(exp_avg * _rounded((lr_neg * terms.as_lr(mu_next)) / terms.as_lr(1.0 - mu_product_next),
                                                 dtype), denom)


def radam(params, grads, exp_avgs, exp_avg_sqs, state_steps, *, beta1, beta2, lr, weight_decay, eps,
          decoupled_weight_decay, maximize, **_ignored) -> None:
    """torch.optim.radam's non-capturable step (``_single_tensor_radam``'s
    else-branch): both of its updates, the rectified one where ``rho_t > 5``
    picked on the device, with ``lr`` a float64 device value."""
    if not params:
        return
    terms = _GroupTerms(lr, beta1, weight_decay, decoupled_weight_decay)
    with torch.no_grad():
        torch._foreach_add_(state_steps, 1)
        rho_inf = 2 / (1 - beta2) - 1
        rect_denominator = (rho_inf - 4) * (rho_inf - 2)
        for i, param in enumerate(params):
            exp_avg, exp_avg_sq = exp_avgs[i], exp_avg_sqs[i]
            dtype = param.dtype
            step = state_steps[i].to(torch.float64)
            grad = terms.decayed(param, grads[i] if not maximize else -grads[i])
            exp_avg.lerp_(grad, terms.at(terms.one_minus_beta1, dtype))
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            beta2_power = beta2 ** step
            bias_correction1 = 1 - beta1 ** step
            bias_correction2 = 1 - beta2_power
            scaled = (exp_avg / _rounded(bias_correction1, dtype)) * terms.at(terms.lr, dtype)
            rho_t = rho_inf - 2 * step * beta2_power / bias_correction2
            rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / (rect_denominator * rho_t)) ** 0.5
            # (eager's number / tensor is tensor.reciprocal() * number)
            adaptive = exp_avg_sq.sqrt().add_(eps).reciprocal() * _rounded(bias_correction2 ** 0.5, dtype)
            # (the rectified update's NaN where rho_t <= 5, a negative root, is not picked)
            param.add_(torch.where(rho_t > 5.0, scaled * adaptive * _rounded(rect, dtype), scaled), alpha=-1.0)
