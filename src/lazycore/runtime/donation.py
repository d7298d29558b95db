"""Donation: which input buffers of a barrier's program become its outputs' storage.

Because every live tensor with pending work is an output and every output
is evaluated in full (the LazyTensor paper's two conditions), an input
buffer that lazycore made and that no live handle holds any more (it was
overwritten in place, or its handle died) is dead after this program, so it
may become the storage of an output of the same type. Buffers handed in by
the user are never donated.

The donation plan is part of the compile key (:func:`keyed`): a walked step
(:mod:`lazycore.runtime.planning`), a recalled one
(:mod:`lazycore.runtime.stepplans`) and a transform's rewritten program
(:mod:`lazycore.runtime.transforms`) each make theirs here.
"""

from __future__ import annotations

from lazycore.ir.config import settings
from lazycore.ir.graph import Data
from lazycore.runtime import programs


def plan_donation(data: list[Data], out_types: list, held: set[int], successors: dict | None = None
                  ) -> dict[int, int]:
    """Parameter index -> output index for dead, lazycore-made input buffers
    (``data``: the device-data parameters in argument order).

    ``successors`` (id of a leaf -> output index, :func:`successors`): a
    buffer goes to the new value of the handle that held it first. XLA
    computes an update in place only when the buffer goes to its own
    successor; paired with another output of the same type, the buffer is
    still read after that output is written, and XLA copies it (a training
    step of 116 buffers made 75 copies of parameters that way)."""
    plan: dict[int, int] = {}
    taken: set[int] = set()
    free = []
    for i, leaf in enumerate(data):
        if not leaf.owned or id(leaf) in held:
            continue
        j = successors.get(id(leaf)) if successors else None
        if j is not None and j not in taken and out_types[j] == leaf.types[0]:
            plan[i] = j
            taken.add(j)
        else:
            free.append(i)
    for i in free:
        t = data[i].types[0]
        for j, out_type in enumerate(out_types):
            if j not in taken and out_type == t:
                plan[i] = j
                taken.add(j)
                break
    return dict(sorted(plan.items()))


def successors(pending: list, slots: list) -> dict[int, int]:
    """id of the device data each pending handle held after the last barrier
    or its upload -> the output index of the handle's new value."""
    out: dict[int, int] = {}
    for t, k in zip(pending, slots):
        held = getattr(t, "_held", None)
        if held is not None:
            out.setdefault(held, k)
    return out


def keyed(step, data: list, out_types: list, encoding: bytes) -> tuple[dict, bytes]:
    """The donation plan and compile key of the step's program rewritten to
    take ``data`` and return ``out_types`` (a transform's program)."""
    donate = plan_donation(data, out_types, step.held) if settings.donation else {}
    return donate, programs.make_key(encoding, step.device, donate, step.pipeline)
