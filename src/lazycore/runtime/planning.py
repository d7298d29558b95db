"""A barrier's plan: which values are its outputs and parameters, how its
buffers are donated (:mod:`lazycore.runtime.donation`), and its compile key.

A step like an earlier one recalls that step's plan from the step log
(:func:`recall`: :mod:`lazycore.runtime.stepplans`, whose plans the one
replayer keeps); otherwise its graph is walked once (:func:`walk`) and its
plan is kept for the steps like it.
"""

from __future__ import annotations

from lazycore.ir.config import settings
from lazycore.ir.graph import LOG, Value
from lazycore.runtime import buckets, programs, stepplans
from lazycore.runtime.donation import plan_donation, successors


def recall(step) -> bool:
    """Fill ``step`` from the plan of an earlier step like it; False when
    there is none or its program is no longer cached (the step is walked).
    ``LAZYCORE_DEBUG`` reports need the walk itself: nothing is recalled."""
    step.pipeline = settings.pipeline  # None: the default one
    step.fp = fp = stepplans.fingerprint(step.pending) if not settings.debug else None
    return fp is not None and stepplans.recall(step)


def remember_padded(step) -> None:
    """Keep how a walked step's program at bucket sizes is called
    (``step.padded``) with its step plan, for the steps like it to recall
    (:func:`recall`), and for those that differ from it in their padded
    sizes alone, its :class:`~lazycore.runtime.buckets.Template`."""
    if step.padded is None or step.fp is None:
        return
    plan = stepplans.get(step.fp)
    if plan is None:
        return
    found = buckets.padding_marks([LOG.nodes[i] for i in plan.data])
    if found is None:
        return
    bucket_plan = step.padded.plan
    keys = {}
    plan.padded[found] = (bucket_plan, keys)
    template, walked = bucket_plan.template, step.walked
    if template is None or walked is None:
        return
    start, order = LOG.start, walked.order
    positions = [order[i].seq - start for i, _ in template.touched]
    if positions and min(positions) >= 0:
        walked = frozenset(node.seq - start for node in order)
        stepplans.keep_shifted(step.fp, stepplans.Shifted(plan, step.fp[1], template, positions, bucket_plan,
                                                          keys, walked))


def walk(step) -> None:
    """Walk the step's graph (once: post-order, shared nodes visited once):
    its outputs (one per pending handle), parameters, donation plan and key;
    remembered for the steps like it.

    Handles that hold one value (``b.copy_(a)``, a clone) get an output each,
    as eager gives each its own storage: were they one output, the next step
    would read them as one parameter and the step after, once one of them
    moved on, as two, a program more after warm-up (an average's first
    update in torch.optim.swa_utils). The program computes
    the value once; the extra output is the copy eager makes, written into a
    dead buffer of the handle's where one is donated."""
    outputs: list[Value] = [t._value for t in step.pending]
    slots = step.slots = list(range(len(outputs)))
    w = step.walk = step.walked = step.walker(outputs)
    step.encoding = w.encoding
    step.data, step.packs = w.data, list(w.packs.items())
    step.out_types = [out.type for out in outputs]
    step.counts = (len(w.order), len(outputs), len(w.params))
    step.donate = (plan_donation(step.data, step.out_types, step.held, successors(step.pending, slots))
                   if settings.donation else {})
    step.key = programs.make_key(w.encoding, step.device, step.donate, step.pipeline)
    if step.fp is not None:
        stepplans.remember(step.fp, w, slots, step.out_types, step.counts)
