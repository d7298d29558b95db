"""A barrier's plan: which values are its outputs and parameters, how its
buffers are donated, and its compile key.

A step like an earlier one recalls that step's plan from the step log
(:func:`recall`, :mod:`lazycore.runtime.stepplans`); otherwise its graph is
walked once (:func:`walk`).

Donation: because every live tensor with pending work is an output and every
output is evaluated in full (the LazyTensor paper's two conditions), an input
buffer that lazycore made and that no live handle holds any more (it was
overwritten in place, or its handle died) is dead after this program, so it
may become the storage of an output of the same type. Buffers handed in by
the user are never donated.
"""

from __future__ import annotations

from lazycore.ir.config import settings
from lazycore.ir.graph import LOG, Data, Value
from lazycore.runtime import buckets, programs, stepplans
from lazycore.runtime.cache import CACHE


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


def recall(step) -> bool:
    """Fill ``step`` from the plan of an earlier step like it; False when
    there is none or its program is no longer cached (the step is walked).
    ``LAZYCORE_DEBUG`` reports need the walk itself: nothing is recalled."""
    step.pipeline = pipeline = settings.pipeline  # None: the default one
    step.fp = fp = stepplans.fingerprint(step.pending) if not settings.debug else None
    plan = stepplans.get(fp) if fp is not None else None
    if plan is None:
        return fp is not None and _recall_shifted(step, fp)
    nodes = LOG.nodes
    device, held = step.device, step.held
    data = [nodes[i] for i in plan.data]
    if plan.padded:
        padded = plan.padded.get(buckets.padding_marks(data))
        if padded is not None:
            return _recall_padded(step, plan, padded, nodes)
    if plan.encoding is None:  # a plan recalled at other sizes: only ever padded
        return False
    if settings.donation:
        can = tuple([leaf.owned and id(leaf) not in held for leaf in data])
    else:
        can = None
    # everything else make_key covers besides the graph
    context = (can, pipeline, device.name, programs.environment())
    known = plan.keys.get(context)
    if known is None:
        donate = (plan_donation(data, plan.out_types, held, successors(step.pending, plan.slots))
                  if settings.donation else {})
        known = plan.keys[context] = (programs.make_key(plan.encoding, device, donate, pipeline), donate)
    key, donate = known
    if key not in CACHE:
        return False
    step.data, step.key, step.donate = data, key, donate
    step.packs = [(dtype, [nodes[i] for i in group]) for dtype, group in plan.packs]
    step.slots, step.out_types, step.counts = plan.slots, plan.out_types, plan.counts
    step.encoding = plan.encoding
    return True


def _recall_padded(step, plan, padded, nodes) -> bool:
    """Fill ``step`` with the program at bucket sizes that an earlier step
    like it ran (the same graph, marks and buckets): its arguments from this
    step's parameters, without the walk or the padding; False when it cannot
    be (its program is no longer cached, an input's program failed)."""
    program, keys = padded
    held = step.held

    def known(data, out_types, encoding):
        # (the padded program's donation plan and key, kept per donatable
        # arguments and context as the plan's own: computed once, not per step)
        can = tuple([leaf.owned and id(leaf) not in held for leaf in data]) if settings.donation else None
        context = (can, step.pipeline, step.device.name, programs.environment())
        found = keys.get(context)
        if found is None:
            found = keys[context] = keyed(step, data, out_types, encoding)
        return found

    bucketed = buckets.recalled(program, [nodes[i] for i in plan.params], step.device, known, held)
    if bucketed is None or bucketed.key not in CACHE:
        return False
    step.padded = bucketed
    step.data, step.packs, step.out_types = bucketed.data, bucketed.packs, bucketed.out_types
    step.donate, step.key = bucketed.donate, bucketed.key
    step.slots, step.counts, step.encoding = plan.slots, plan.counts, plan.encoding
    return True


def _recall_shifted(step, fp) -> bool:
    """Fill ``step`` from the plan of a padded step wired as it whose nodes
    differ from its own in their padded sizes alone (the token before, one
    shorter: :class:`lazycore.runtime.buckets.Template`): that step's
    program, its valid sizes moved, without a walk or the padding; False
    where there is none, or anything else differs."""
    base = stepplans.alike(fp)
    if base is None or not settings.donation:  # (a kept variant is keyed by the unpadded encoding)
        return False
    digests, template, positions, bucket_plan, keys = base.shift
    touched = set(positions)
    new = fp[1]
    for i, d in enumerate(digests):
        if d != new[i] and i not in touched:
            return False  # (a node no size reaches differs)
    nodes = LOG.nodes
    found = [nodes[i] for i in positions]
    sigma: dict[int, int] = {}
    regions: dict[int, int] = {}
    for node, (_, record) in zip(found, template.touched):
        if not template.match(node, record, sigma, regions):
            return False
    if not template.sizes(found, sigma, regions):
        return False
    marks = buckets.padding_marks([nodes[i] for i in base.data])
    if marks is None:
        return False
    shifted = bucket_plan.shifted(sigma)
    if not _recall_padded(step, base, (shifted, keys), nodes):
        return False
    step.encoding = None
    stepplans.remember_shifted(fp, base, marks, (shifted, keys), (new, template, positions, bucket_plan, keys))
    return True


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
        stepplans.keep_alike(step.fp, plan, (step.fp[1], template, positions, bucket_plan, keys))


def walk(step) -> None:
    """Walk the step's graph (once: post-order, shared nodes visited once):
    its outputs (each distinct pending value once), parameters, donation
    plan and key; remembered for the steps like it."""
    index: dict[tuple[int, int], int] = {}
    outputs: list[Value] = []
    slots = step.slots = []
    for t in step.pending:
        v = t._value
        k = (id(v.node), v.index)
        if k not in index:
            index[k] = len(outputs)
            outputs.append(v)
        slots.append(index[k])
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


def keyed(step, data: list, out_types: list, encoding: bytes) -> tuple[dict, bytes]:
    """The donation plan and compile key of the step's program rewritten to
    take ``data`` and return ``out_types`` (a transform's program)."""
    donate = plan_donation(data, out_types, step.held) if settings.donation else {}
    return donate, programs.make_key(encoding, step.device, donate, step.pipeline)
