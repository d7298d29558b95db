"""Barrier plans recalled by the step log instead of walking the graph.

A training loop hands every barrier the same graph with new leaves. The
walk that finds its parameters, outputs and compile key (:class:`lazycore.
ir.walk.Walk`) is then the same each step, and it was the largest part of
the barrier's own Python (about 0.35 ms of 0.8 ms for the MLP step of
benchmark 2). The step log (:data:`lazycore.graph.LOG`) numbers every node
made or used since the last barrier, with its digest and its operands as log
positions. Two steps whose logs and outputs (as log positions) are equal made
isomorphic graphs, and their walks put the same log positions in the same
places. So a barrier looks the encoding of its log up here, and a hit gives
the walk's results as log positions: which leaves are the parameters, in order,
how pending handles map to outputs, and the compile key per donation
pattern, device, pipeline and set of user lowerings.

A step whose marked inputs the shape buckets padded
(:mod:`lazycore.runtime.buckets`) ran a program of another graph: its plan
also keeps, per set of marks, how that program is called, so the steps
like it skip the walk and the padding as well (a generate() call repeated,
a training loop fed batches of marked sizes).

A padded step also recalls the plan of a step that differs from it in its
padded sizes alone (:func:`alike`): generation's next token, whose ids and
mask are one longer, so that every digest over them differs, runs the
program the token before it ran, with its valid sizes moved
(:class:`lazycore.runtime.buckets.Template` says which nodes may differ,
and how).

Nothing here holds a node: a plan is keyed by the log's encoding (digests
and integers) and holds positions and types, so it can never bind a stale
leaf. The encodings kept are bounded in total (:data:`ITEMS_KEPT`): a
128-bit digest of them would be smaller, but hashing it cost more than the
lookup saves. A step whose log was stopped
(:data:`lazycore.graph.STEP_LOG_LIMIT`) has no fingerprint and walks.
"""

from __future__ import annotations

from lazycore.ir.graph import LOG

PLANS_KEPT = 256
"""Steps kept (all are dropped once full). A generate() call has a barrier
per token, each its own step (the growing ids' size is in its graph): 64
kept were dropped within every call of 64 tokens, before its next call
could recall one."""
ITEMS_KEPT = 1_000_000


class Plan:
    """A barrier's walk, as positions in the step log."""

    __slots__ = ("encoding", "params", "data", "packs", "slots", "out_types", "counts", "keys", "padded", "shift")

    def __init__(self, encoding, params, data, packs, slots, out_types, counts):
        self.encoding = encoding
        """The walk's structural encoding (the compile key's graph part)."""
        self.params = params
        """Log positions of all the walk's parameters, in walk order."""
        self.data = data
        """Log positions of the device-data parameters, in argument order."""
        self.packs = packs
        """``(dtype, log positions)`` of the scalar parameters, one pack per dtype."""
        self.slots = slots
        """For each pending handle, in registry order, its output index."""
        self.out_types = out_types
        self.counts = counts
        """(nodes, outputs, parameters), for :func:`lazycore.ir.events.record_graph`."""
        self.keys: dict = {}
        """(donatable parameters, pipeline, device, user lowerings) ->
        (compile key, donation plan)."""
        self.padded: dict = {}
        """The parameters' marks (:func:`lazycore.runtime.buckets.padding_marks`) ->
        (how the step's program at bucket sizes is called, by :attr:`params`;
        its compile keys and donation plans as :attr:`keys` holds them): a
        step whose marked inputs the shape buckets padded recalls the walk,
        the padding and its key too."""
        self.shift = None
        """``(digests, template, log positions, bucket plan, keys)`` of a
        padded step, for a step that differs from it in its sizes alone
        (:func:`alike`): this step's node digests, the bucket plan's
        :class:`~lazycore.runtime.buckets.Template`, the log position of
        each of its touched nodes, the bucket plan at its first sizes and
        its compile keys. A plan made so has no :attr:`encoding`: it is
        only ever recalled padded."""


_PLANS: dict[tuple, Plan] = {}
"""A fingerprint ``(outputs, digests, edges)`` -> its plan; and ``(outputs,
edges)`` -> the last plan kept with a :attr:`Plan.shift` of that wiring, for
the steps that differ from it in digests alone (:func:`alike`: a pair is
never a fingerprint)."""
_items = [0]  # digests and edge integers held by the keys of _PLANS


def fingerprint(pending) -> tuple | None:
    """The step's log encoded with the pending handles' values as outputs
    (:meth:`~lazycore.graph.StepLog.encode`); None when logging stopped
    this step."""
    if not LOG.on:
        return None
    return LOG.encode([t._value for t in pending])


def get(fp: tuple) -> Plan | None:
    return _PLANS.get(fp)


def remember(fp: tuple, walk, slots: list[int], out_types: list, counts: tuple) -> Plan | None:
    """Keep ``walk`` (made from this step's pending handles) as the plan for
    ``fp``; the rest is what the barrier had from the walk (see :class:`Plan`)."""
    size = len(fp[1]) + len(fp[2])
    if size > ITEMS_KEPT:
        return None
    start = LOG.start
    for leaf in walk.params:
        if leaf.seq < start:  # not in this step's log: it cannot be recalled by it
            return None
    plan = Plan(
        walk.encoding,
        [leaf.seq - start for leaf in walk.params],
        [leaf.seq - start for leaf in walk.data],
        [(dtype, [leaf.seq - start for leaf in group]) for dtype, group in walk.packs.items()],
        slots,
        out_types,
        counts,
    )
    if len(_PLANS) >= PLANS_KEPT or _items[0] + size > ITEMS_KEPT:
        clear()
    _PLANS[fp] = plan
    _items[0] += size
    return plan


def alike(fp: tuple) -> Plan | None:
    """The last plan kept with a shift whose step is wired as ``fp``'s (the
    same outputs and edges; digests may differ)."""
    return _PLANS.get((fp[0], fp[2]))


def keep_alike(fp: tuple, plan: Plan, shift: tuple) -> None:
    """``plan`` (kept for ``fp``) is recalled, shifted, by steps wired as it."""
    key = (fp[0], fp[2])
    if key in _PLANS or len(_PLANS) < PLANS_KEPT:
        plan.shift = shift
        _PLANS[key] = plan


def remember_shifted(fp: tuple, base: Plan, marks: tuple, padded: tuple, shift: tuple) -> Plan | None:
    """Keep the plan of a step recalled from ``base`` at other sizes: its
    walk's positions are ``base``'s; ``padded`` is how its program is called
    under ``marks``; no unpadded encoding (None: never recalled unpadded)."""
    size = len(fp[1]) + len(fp[2])
    if size > ITEMS_KEPT:
        return None
    plan = Plan(None, base.params, base.data, base.packs, base.slots, None, base.counts)
    plan.padded[marks] = padded
    if len(_PLANS) >= PLANS_KEPT or _items[0] + size > ITEMS_KEPT:
        clear()
    _PLANS[fp] = plan
    _items[0] += size
    keep_alike(fp, plan, shift)
    return plan


def clear() -> None:
    _PLANS.clear()
    _items[0] = 0
