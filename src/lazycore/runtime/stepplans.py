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

The plans are kept by the one replayer (:class:`lazycore.ir.replayer.
Replayer`, :data:`PLANS`): a fingerprint is the key, its :class:`Plan` the
recording, and :meth:`Plan.attempt` fills the step from it where its guards
hold (its program still cached, under this step's donation pattern, device,
pipeline and user lowerings); otherwise the step walks.

A step whose marked inputs the shape buckets padded
(:mod:`lazycore.runtime.buckets`) ran a program of another graph: its plan
also keeps, per set of marks, how that program is called, so the steps
like it skip the walk and the padding as well (a generate() call repeated,
a training loop fed batches of marked sizes).

A padded step also recalls the plan of a step that differs from it in its
padded sizes alone: generation's next token, whose ids and mask are one
longer, so that every digest over them differs, runs the program the token
before it ran, with its valid sizes moved. Those recordings
(:class:`Shifted`) are kept under the step's wiring, its outputs and edges
without the digests (:func:`wiring`: a pair no fingerprint equals), and
:class:`lazycore.runtime.buckets.Template` says which nodes may differ, and
how.

Nothing here holds a node: a plan is keyed by the log's encoding (digests
and integers) and holds positions and types, so it can never bind a stale
leaf. The encodings kept are bounded in total (:data:`ITEMS_KEPT`): a
128-bit digest of them would be smaller, but hashing it cost more than the
lookup saves. A step whose log was stopped
(:data:`lazycore.graph.STEP_LOG_LIMIT`) has no fingerprint and walks.
"""

from __future__ import annotations

from lazycore.ir.config import settings
from lazycore.ir.graph import LOG
from lazycore.ir.replayer import GUARDED, Replayer
from lazycore.runtime import buckets, programs
from lazycore.runtime.cache import CACHE
from lazycore.runtime.donation import keyed, plan_donation, successors

PLANS_KEPT = 256
"""Steps kept (all are dropped once full). A generate() call has a barrier
per token, each its own step (the growing ids' size is in its graph): 64
kept were dropped within every call of 64 tokens, before its next call
could recall one."""
ITEMS_KEPT = 1_000_000
_items = [0]  # digests and edge integers held by the keys of PLANS


class _Plans(Replayer):
    """The step plans: bounded by the steps kept and by the items their
    fingerprints hold, emptied whole at either bound."""

    __slots__ = ()

    def keep(self, fp: tuple, recording):
        """Keep ``recording`` for the fingerprint ``fp``; None when ``fp``
        alone is over :data:`ITEMS_KEPT` (nothing kept)."""
        size = len(fp[1]) + len(fp[2])
        if size > ITEMS_KEPT:
            return None
        fresh = fp not in self
        if fresh and _items[0] + size > ITEMS_KEPT:
            self.clear()
        self.add(fp, recording)
        if fresh:
            _items[0] += size
        return recording

    def clear(self) -> None:
        super().clear()
        _items[0] = 0


PLANS = _Plans("runtime.step_plans", PLANS_KEPT)
"""A fingerprint ``(outputs, digests, edges)`` -> its :class:`Plan`; a
wiring ``(outputs, edges)`` -> the :class:`Shifted` plan last kept for it."""


class Plan:
    """A barrier's walk, as positions in the step log."""

    __slots__ = ("encoding", "params", "data", "packs", "slots", "out_types", "counts", "keys", "padded")

    def __init__(self, encoding, params, data, packs, slots, out_types, counts):
        self.encoding = encoding
        """The walk's structural encoding (the compile key's graph part);
        None for a plan recalled at other sizes (:class:`Shifted`): it is
        only ever recalled padded."""
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

    def attempt(self, step):
        """Fill ``step`` (whose log this plan's fingerprint encodes) from this
        plan: True; :data:`GUARDED` when its program is no longer cached
        (or, for a padded step, cannot be called: an input's program
        failed), and the step walks."""
        nodes = LOG.nodes
        held = step.held
        data = [nodes[i] for i in self.data]
        if self.padded:
            padded = self.padded.get(buckets.padding_marks(data))
            if padded is not None:
                return True if _recall_padded(step, self, padded, nodes) else GUARDED
        if self.encoding is None:  # a plan recalled at other sizes: only ever padded
            return GUARDED
        if settings.donation:
            can = tuple([leaf.owned and id(leaf) not in held for leaf in data])
        else:
            can = None
        # everything else make_key covers besides the graph
        context = (can, step.pipeline, step.device.name, programs.environment())
        known = self.keys.get(context)
        if known is None:
            donate = (plan_donation(data, self.out_types, held, successors(step.pending, self.slots))
                      if settings.donation else {})
            known = self.keys[context] = (programs.make_key(self.encoding, step.device, donate, step.pipeline),
                                          donate)
        key, donate = known
        if key not in CACHE:
            return GUARDED
        step.data, step.key, step.donate = data, key, donate
        step.packs = [(dtype, [nodes[i] for i in group]) for dtype, group in self.packs]
        step.slots, step.out_types, step.counts = self.slots, self.out_types, self.counts
        step.encoding = self.encoding
        return True


class Shifted:
    """A padded step's plan, for the steps wired as it whose nodes differ
    from its own in their padded sizes alone (the token after, one longer)."""

    __slots__ = ("plan", "digests", "template", "positions", "bucket_plan", "keys", "walked")

    def __init__(self, plan: Plan, digests: tuple, template, positions: list, bucket_plan, keys: dict,
                 walked: frozenset):
        self.plan = plan
        self.digests = digests
        """The padded step's node digests (its fingerprint's)."""
        self.walked = walked
        """The log positions of the nodes its program computes from: a node
        outside them (a result nobody kept, the final cell state of an LSTM
        whose output alone is used) may differ in its sizes (its digest):
        the same wiring leaves it outside, as the program does."""
        self.template = template
        """The bucket plan's :class:`~lazycore.runtime.buckets.Template`."""
        self.positions = positions
        """The log position of each of the template's touched nodes."""
        self.bucket_plan = bucket_plan
        """How the program at bucket sizes was called at the plan's own sizes."""
        self.keys = keys
        """Its compile keys and donation plans, shared by every size it is recalled at."""

    def attempt(self, step):
        """Fill ``step`` from :attr:`plan`'s program with its valid sizes
        moved: True; :data:`GUARDED` where anything but the padded sizes
        differs, or the program cannot be recalled."""
        fp = step.fp
        if not settings.donation:  # (a kept variant is keyed by the unpadded encoding)
            return GUARDED
        touched, walked = set(self.positions), self.walked
        new = fp[1]
        for i, d in enumerate(self.digests):
            if d != new[i] and i not in touched and i in walked:
                return GUARDED  # (a node no size reaches differs)
        nodes = LOG.nodes
        template = self.template
        found = [nodes[i] for i in self.positions]
        sigma: dict[int, int] = {}
        regions: dict[int, int] = {}
        for node, (_, record) in zip(found, template.touched):
            if not template.match(node, record, sigma, regions):
                return GUARDED
        if not template.sizes(found, sigma, regions):
            return GUARDED
        base = self.plan
        marks = buckets.padding_marks([nodes[i] for i in base.data])
        if marks is None:
            return GUARDED
        shifted = self.bucket_plan.shifted(sigma)
        if not _recall_padded(step, base, (shifted, self.keys), nodes):
            return GUARDED
        step.encoding = None
        plan = Plan(None, base.params, base.data, base.packs, base.slots, None, base.counts)
        plan.padded[marks] = (shifted, self.keys)
        if PLANS.keep(fp, plan) is not None:
            keep_shifted(fp, Shifted(plan, new, template, self.positions, self.bucket_plan, self.keys, walked))
        return True


def _recall_padded(step, plan: Plan, padded: tuple, nodes: list) -> bool:
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


def fingerprint(pending) -> tuple | None:
    """The step's log encoded with the pending handles' values as outputs
    (:meth:`~lazycore.graph.StepLog.encode`); None when logging stopped
    this step."""
    if not LOG.on:
        return None
    return LOG.encode([t._value for t in pending])


def wiring(fp: tuple) -> tuple:
    """The key of the :class:`Shifted` plans that may serve the step
    ``fp`` encodes: its outputs and edges (its digests may differ)."""
    return fp[0], fp[2]


def recall(step) -> bool:
    """Fill ``step`` (its fingerprint ``step.fp`` made) from a kept plan:
    its own (a step with one recalls it or walks), else the shifted plan of
    a padded step wired as it; False when none holds (the step walks)."""
    fp = step.fp
    plan = PLANS.find(fp)
    if plan is not None:
        return plan.attempt(step) is not GUARDED
    return PLANS.replay(wiring(fp), step) is not GUARDED


def get(fp: tuple) -> Plan | None:
    return PLANS.find(fp)


def remember(fp: tuple, walk, slots: list[int], out_types: list, counts: tuple) -> Plan | None:
    """Keep ``walk`` (made from this step's pending handles) as the plan for
    ``fp``; the rest is what the barrier had from the walk (see :class:`Plan`)."""
    if len(fp[1]) + len(fp[2]) > ITEMS_KEPT:
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
    return PLANS.keep(fp, plan)


def keep_shifted(fp: tuple, shifted: Shifted) -> None:
    """``shifted`` (the plan kept for ``fp``, with its template) is recalled
    by the steps wired as ``fp``; kept only where that empties no plan."""
    key = wiring(fp)
    if key in PLANS or len(PLANS) < PLANS_KEPT:
        PLANS.add(key, shifted)


def clear() -> None:
    PLANS.clear()
