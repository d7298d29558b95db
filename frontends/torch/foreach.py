"""``_foreach_*`` ops as their single-tensor op applied to each element.

PyTorch's multi-tensor ops (``torch._foreach_mul``, ``_foreach_norm``, what
``clip_grad_norm_`` and a ``foreach=True`` optimizer call, and what
torch.compile's graphs keep) have no entry in ``torch._decomp``. On the lazy
device one program holds every element anyway, so each becomes the plain op
per element (``_foreach_mul.List(xs, ys)`` is ``[torch.mul(x, y) ...]``,
``_foreach_mul_`` is ``x.mul_(y)`` for each ``x``), whose pieces dispatch as
usual. List arguments (``Tensor[]``, ``Scalar[]``) go element by element;
any other argument goes to every call, by keyword where the single op takes
it so.
"""

from __future__ import annotations

import torch

PREFIX = "_foreach_"

# the single-tensor op where it is not ``torch.<name>`` (functional) or ``Tensor.<name>`` (in place)
_SINGLE = {
    "norm": lambda t, ord=2, dtype=None: torch.linalg.vector_norm(t, ord, dtype=dtype),
}


def is_foreach(func) -> bool:
    return func.overloadpacket.__name__.startswith(PREFIX)


def per_element(func):
    """A decomposition of the ``_foreach_*`` overload ``func`` (NotImplemented,
    so the op falls back, where an argument has no per-element meaning here:
    a tensor of per-element scalars, ``_foreach_addcmul.Tensor``)."""
    name = func.overloadpacket.__name__[len(PREFIX):]
    inplace = name.endswith("_")
    single = _SINGLE.get(name) or (getattr(torch.Tensor, name, None) if inplace else getattr(torch, name, None))
    packet = getattr(torch.ops.aten, name, None)
    by_keyword = {a.name for ov in (packet.overloads() if packet is not None else ())
                  for a in getattr(packet, ov)._schema.arguments if a.kwarg_only}
    plan = []  # per argument of func: its name, the keyword the single op takes it by (None: by position), listed?
    for a in func._schema.arguments:
        kw = "value" if a.name in ("scalar", "scalars") and "value" in by_keyword else a.name  # addcmul's
        plan.append((a.name, kw if a.kwarg_only or kw in by_keyword else None,
                     isinstance(a.type, torch._C.ListType), a.has_default_value()))
    unsupported = single is None or any(n == "scalars" and not listed for n, _, listed, _ in plan)

    def decomposition(*args, **kwargs):
        if unsupported:
            return NotImplemented
        positional, keywords, lists = [], {}, []
        skipped = False
        for i, (arg, keyword, listed, optional) in enumerate(plan):
            if i < len(args):
                v = args[i]
            elif arg in kwargs:
                v = kwargs[arg]
            elif optional:
                skipped = skipped or keyword is None
                continue
            else:
                return NotImplemented
            if keyword is None and skipped:
                return NotImplemented  # (a later positional argument after a defaulted one)
            where = keyword if keyword is not None else len(positional)
            if listed:
                lists.append(where)
            if keyword is not None:
                keywords[keyword] = v
            else:
                positional.append(v)

        def element(k):
            p, kw = list(positional), dict(keywords)
            for where in lists:
                if type(where) is int:
                    p[where] = positional[where][k]
                else:
                    kw[where] = keywords[where][k]
            return single(*p, **kw)

        first = lists[0]
        out = [element(k) for k in range(len(positional[first] if type(first) is int else keywords[first]))]
        return None if inplace else out

    return decomposition
