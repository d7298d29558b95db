"""Automatic step barriers: one program per training step without ``mark_step``.

A loop that never calls ``mark_step`` would otherwise grow one graph until a
value is read, and compile that. Three cuts end a step instead:

* A frontend that knows where a step ends says so (:meth:`StepCutter.step_begins`,
  :meth:`StepCutter.step_ended`; torch: around ``optimizer.step()`` of an
  optimizer over lazy parameters). The barrier runs there, as a ``mark_step``
  right after the call would, once the step before ended without the
  program's own ``mark_step``. After the first step, and after a step the
  program marked itself, it runs later: before the first op that reads a
  value the step updated in place (the next step's forward reading the
  parameters), so work after the call (a logged loss) and the program's own
  ``mark_step`` after it keep its programs exactly as they were.
* Any frontend: where the pending graph starts repeating the previous step's.
  The signal is an in-place update of a handle that held device data when the
  segment (the graph since the last barrier) began, a parameter, updated a
  second time: the nodes between its two updates are one period. The period
  counts as a step when the nodes before it repeat op for op (op, attributes,
  result types) and every operand corresponds: the same value (a loop
  invariant), the node one period earlier, the value the period's in-place
  updates made of it (a parameter's new value), or device data uploaded
  within each period (a new batch). A stack of layers with their own weights
  reads other weights at the same place, so it never passes. The step ends
  after the update followed by the longest stretch of updateless ops (the
  forward and backward pass); from then on the barrier runs at the first op
  after that handle's last update of a step (its temporaries are dead by
  then). Learning costs one linear pass over two periods, once; the per-op
  check is one attribute and one ``len``. The learned end is its loop's: that
  handle's update made at another line (the next loop updating the same
  arrays), or a step less than half the learned one (between two learned
  cuts) or over twice it, ends it, and the next loop is learned anew. A random generator's state (a
  ``rng_bit_generator``'s) advances at every draw whatever the loop, so its
  updates tell no step (a list of estimates drawn in a comprehension would
  otherwise learn a step of one draw, then cut the next loop at every draw).
* A graph that reaches ``settings.auto_barrier_nodes`` nodes without a cut is
  cut, and the user's line reported once (a warning and ``LAZYCORE_DEBUG``).

A program that marks its own steps keeps them: once its ``mark_step``
closed frontend step ends of which no ender (an optimizer) stepped twice (a
GAN's two optimizers), the next ones cut nothing until one of them steps a
second time before the next ``mark_step``; after its ``mark_step``
ends a graph in which a handle was updated twice (several steps fused into
one program), the next graph is not searched for steps; and once its
``mark_step`` calls enclose the same number of learned steps twice (at most
:data:`_FUSED_MAX`), the learned cut stands down for good. A ``mark_step`` now
and then (after the setup, before an evaluation, at an epoch's end) changes
nothing. Nothing is cut while a capture records a step, while ``torch.compile``
traces, inside a lowering's recording, or after ``ltorch.optimizer_step``
(which marks the step): see :meth:`StepCutter.holding`.
``LAZYCORE_AUTO_BARRIER=0`` (``lazycore.config.configure(auto_barrier=False)``) turns all three off.
"""

from __future__ import annotations

import contextlib
import warnings
import weakref

from lazycore.ir import events
from lazycore.ir.config import settings
from lazycore.ir.context import LOCK, TRACE
from lazycore.ir.graph import LOG, Data, Value, attrs_equal
from lazycore.ir.sourceloc import resolve
from lazycore.runtime import barrier
from lazycore.runtime import device as _device

_CHAIN = 8
"""In-place updates of one value a period may chain (``buf.mul_(m).add_(g)``: two)."""
_REPORTED_KEPT = 64
_FUSED_MAX = 16
"""Learned steps between a program's own ``mark_step`` calls that still read as fusing steps."""
_TRIES = 3
"""Periods of one handle that were no step before the next handle's are tried."""
_MIN_PERIOD = 8
"""Fewer nodes between two updates make a loop body (``x.add_(b)`` a hundred
times), not a training step: cutting there would run a program every few ops."""
_UPDATES_KEPT = 100_000
"""In-place updates one segment keeps for learning (a loop of bare assigns makes no nodes)."""


class _Rule:
    """Where a learned step ends: after the ``count``-th update of ``handle``
    in a segment (a step of ``period`` nodes), made at ``loc`` (the raw
    location of the op that computed the update: the loop it was learned on)."""

    __slots__ = ("handle", "count", "period", "where", "loc")

    def __init__(self, handle, count: int, period: int, where: str, loc):
        self.handle = weakref.ref(handle)
        self.count = count
        self.period = period
        self.where = where
        self.loc = loc


class StepCutter:
    """The automatic step barriers' state (see the module docs): the trace
    context's (``TRACE.cutter``, :func:`install`)."""

    __slots__ = ("due", "held", "start", "due_start", "stepping", "watch", "marked", "updates", "locs", "handles",
                 "last", "starts", "anchor", "fails", "after", "rule", "seen", "base", "cuts", "ends", "last_ends",
                 "off", "repeated", "learning", "fused", "reported", "signalled", "marks_steps", "aligned", "pending")

    def __init__(self):
        self.due = False
        """A step has ended: the next op (the next one reading :attr:`watch`, when
        set) runs the barrier first. The per-op check reads this attribute."""
        self.held = 0
        self.reported: set[str] = set()
        self.reset()

    def reset(self) -> None:
        """Forget what was learned (and standing down)."""
        self.due = False
        self.due_start = -1
        self.stepping: list[int] | None = None  # ids of the values a frontend's step is assigning
        self.watch: set[int] | None = None  # those of the step that ended: reading one cuts
        self.marked = True  # the program's own mark_step since the last step ended (or none yet)
        self.rule: _Rule | None = None
        self.aligned = -1  # the step log number a learned cut's barrier began a segment at
        self.cuts = 0
        self.ends = 0  # learned step ends since the program's last own mark_step
        self.last_ends = 0  # and between the two before
        self.off = False
        self.fused = False  # the program's own mark_step ended a graph of several steps
        self.signalled: list[int] = []  # ids of who ended the frontends' steps since the program's last own mark_step
        self.marks_steps = False  # its last mark_step closed steps of several enders, each once
        self._segment(-1)

    def _segment(self, start: int) -> None:
        self.start = start
        self.updates: list[tuple[int, int]] = []  # (log position, id(handle)) of this segment's updates
        self.locs: list = []  # the raw location of each of those updates' values
        self.handles: dict[int, weakref.ref] = {}  # id(handle) -> the handle, for those updates
        self.last: dict[int, int] = {}  # id(handle) -> the log position of its last update
        self.starts: list[int] = []  # ids of the handles first updated from device data, in that order
        self.anchor = 0  # the one of them whose repeated updates are tried as step periods
        self.fails = 0  # its periods that were no step (a layer's in-place buffer): try the next one
        self.after: dict[tuple[int, int], tuple] = {}  # (id(old node), index) -> (old node, new value)
        self.seen = 0  # updates of the rule's handle in this segment
        self.base = 0  # where the segment's current step began (a learning segment began mid-step)
        self.repeated = False  # a handle was updated twice in this segment
        self.learning, self.fused = not self.fused, False  # (the segment after a fused one is the program's)
        self.pending = None  # a captured replay's updates, heard later if ever needed (updated_many)

    @contextlib.contextmanager
    def holding(self):
        """No automatic cut inside (a capture's traced step, ``torch.compile``'s
        graphs, a call that marks the step itself)."""
        # threads hold it at once (plainly traced callers do not hold LOCK around the
        # whole call): a count lost without a GIL would turn the cuts off for good, or
        # on inside a capture
        with LOCK:
            self.held += 1
        try:
            yield
        finally:
            with LOCK:
                self.held -= 1

    # --- the signals ----------------------------------------------------------------------

    def step_begins(self) -> None:
        """A frontend's step begins (torch: ``optimizer.step()`` is called): watch its updates."""
        if not (self.held or TRACE.recorder is not None or not settings.auto_barrier):
            self.stepping = []

    def step_ended(self, who=None) -> None:
        """That step ended: the barrier runs before the first op that reads what it
        updated. ``who``: what stepped (torch: the optimizer), told apart from others."""
        made, self.stepping = self.stepping, None
        if not made or self.held or TRACE.recorder is not None or not settings.auto_barrier:
            return
        again = id(who) in self.signalled
        if len(self.signalled) < _FUSED_MAX:
            self.signalled.append(id(who))
        if self.marks_steps and not again:
            # the program's own mark_step closes its steps, and no ender has
            # stepped twice since it last did: this is one of several in one
            # training step (a GAN's two optimizers; a parameter clamped after
            # the step reads it), which a cut here would split into programs
            return
        marked, self.marked = self.marked, False
        if not marked:
            self._sync()
            return
        self.watch = set(made)
        self.due = True
        self.due_start = LOG.start

    def explicit_mark(self) -> None:
        """The program called ``mark_step``: twice every ``k`` learned steps, it marks its own steps."""
        self.marked = True
        self.fused = self.repeated and self.start == LOG.start
        signalled, self.signalled = self.signalled, []
        # (a mark_step at an epoch's end closes many steps of one optimizer: those cut as before)
        self.marks_steps = bool(signalled) and len(set(signalled)) == len(signalled)
        ends, previous = self.ends, self.last_ends
        self.last_ends, self.ends = ends, 0
        if self.rule is not None and 1 <= ends <= _FUSED_MAX and ends == previous and not self.off:
            self.off = True
            self.rule = None
            self.due = False
            events.emit("auto_barrier", "the program calls mark_step itself: learned step ends stand down",
                        self._last_where())

    def updated(self, handle, new: Value) -> None:
        """``handle`` is about to hold ``new`` in place (from :meth:`LazyTensor.assign`)."""
        stepping = self.stepping
        if stepping is not None and len(stepping) < _UPDATES_KEPT:  # (a step that raised never ends)
            stepping.append(id(new[0]))
        if self.held or self.off or not settings.auto_barrier or TRACE.recorder is not None:
            return
        log = LOG
        if not log.on:
            return
        if log.start != self.start:
            self._segment(log.start)
        hid = id(handle)
        if self.pending is not None and hid in self.pending[2]:
            self._settle()  # (its update came before)
        self._heard(hid, handle, handle._value, new, len(log.nodes), log)

    def updated_many(self, handles: list, values: list) -> None:
        """Each of ``handles`` is about to hold the value of ``values`` in its
        place, all at one point of the step (a captured step's replay: one
        ``call`` node's results): as :meth:`updated` of each pair in order.
        First updates of their handles in the segment (a captured step's,
        one replay a step) only change what learning a step reads, so they
        are kept as they come and entered only when learning or another
        update of one of them needs them (:meth:`_settle`); a step that ends
        first drops them. Hearing each at once was ~35% of a replayed tiny
        T5 step's Python."""
        stepping = self.stepping
        if stepping is not None and len(stepping) < _UPDATES_KEPT:
            stepping.extend([id(v[0]) for v in values][:_UPDATES_KEPT - len(stepping)])
        if self.held or self.off or not settings.auto_barrier or TRACE.recorder is not None:
            return
        log = LOG
        if not log.on:
            return
        if log.start != self.start:
            self._segment(log.start)
        elif self.pending is not None:
            self._settle()
        pos = len(log.nodes)
        ids = list(map(id, handles))
        if self.rule is None and len(self.updates) + len(ids) <= _UPDATES_KEPT and self.last.keys().isdisjoint(ids):
            # no rule to end a step, and none of them updated before in the segment: each is
            # a first update (_heard), which learns nothing and cuts nothing, so it can wait
            unique = set(ids)
            if len(unique) == len(ids):
                self.pending = (pos, ids, unique, list(map(weakref.ref, handles)), [h._value for h in handles],
                                values, len(self.updates), len(self.starts))
                return
        heard = self._heard
        for hid, handle, new in zip(ids, handles, values):
            heard(hid, handle, handle._value, new, pos, log)

    def _settle(self) -> None:
        """Enter the first updates :meth:`updated_many` kept as :meth:`_heard`
        enters a first update (a handle gone since by its id, as it keeps
        it), where they came among the updates of other handles heard."""
        pos, ids, _, refs, olds, values, at, at_starts = self.pending
        self.pending = None
        after, last, handles = self.after, self.last, self.handles
        updates, locs, starts = [], [], []
        for hid, ref, old, new in zip(ids, refs, olds, values):
            after[(id(old[0]), old[1])] = (old[0], new)
            node = new[0]
            if node.op == "rng_bit_generator":
                continue
            updates.append((pos, hid))
            locs.append(node.loc)
            last[hid] = pos
            handles[hid] = ref
            if type(old[0]) is Data:
                starts.append(hid)
        self.updates[at:at] = updates  # (within a segment these lists only grow)
        self.locs[at:at] = locs
        self.starts[at_starts:at_starts] = starts

    def _heard(self, hid: int, handle, old: Value, new: Value, pos: int, log) -> None:
        """:meth:`updated` past its checks: the update of ``handle`` (``id``
        ``hid``; or a weak reference to it) from ``old`` to ``new`` at log
        position ``pos``."""
        self.after[(id(old[0]), old[1])] = (old[0], new)
        node = new[0]
        if node.op == "rng_bit_generator":
            # a generator's state advancing: every draw does, whatever the loop (a list of
            # estimates, a random walk), so it tells no step; a step's own updates do
            return
        rule = self.rule
        if rule is not None:
            h = rule.handle()
            if h is None or pos - self.base > 2 * rule.period + 1:  # gone, or the loop changed: learn again
                self.rule = rule = None
            elif id(h) == hid:
                self.seen += 1
                if self.seen != rule.count:
                    return
                # (a segment some other barrier began, a read mid-step, holds part of a step)
                whole = self.base or log.start == self.aligned
                if node.loc == rule.loc and (2 * (pos - self.base) >= rule.period or not whole):
                    self.ends += 1
                    self.watch = None
                    self.due = True
                    self.due_start = log.start
                    return
                # made elsewhere (another loop updates the handle), or a step far shorter
                # than the learned one: the rule was that loop's; this one is learned anew
                events.emit("auto_barrier", f"the loop changed: the step learned near {rule.where} "
                            f"no longer applies; learning again", rule.where)
                self.rule = rule = None
        pending = self.pending
        if pending is not None and len(self.updates) + len(pending[1]) >= _UPDATES_KEPT:
            self._settle()  # (the kept ones come first, up to the bound)
        if len(self.updates) >= _UPDATES_KEPT:
            return
        self.updates.append((pos, hid))
        self.locs.append(node.loc)
        previous = self.last.get(hid)
        self.last[hid] = pos
        if previous is None:
            self.handles[hid] = handle if type(handle) is weakref.ref else weakref.ref(handle)
            if type(old[0]) is Data:
                self.starts.append(hid)
            return
        self.repeated = True
        if self.pending is not None:
            self._settle()  # learning reads every update of the segment
        starts = self.starts
        if (rule is None and self.learning and starts and starts[self.anchor] == hid
                and not self._learn(previous, pos)):
            self.fails += 1
            if self.fails >= _TRIES and self.anchor + 1 < len(starts):
                self.anchor += 1
                self.fails = 0

    def cut(self, operands=()) -> None:
        """The per-op check fired (a step ended, or the graph reached the
        bound): run the barrier before the op reads ``operands`` (its handles,
        and lists of them), when they are what the ended step waits for."""
        if self.held or TRACE.recorder is not None:
            return
        log = LOG
        if self.due and log.start != self.due_start:
            self.due = False  # a barrier ran since
            self.watch = None
        over = len(log.nodes) >= settings.auto_barrier_nodes
        if not (self.due or over):
            return
        if self.due and not over and self.watch is not None:
            if not _reads(operands, self.watch):
                return  # the step's own work after the update (a logged loss)
            self.watch = None
        if not settings.auto_barrier:
            self.due = False
            return
        ruled = self.due and self.rule is not None
        if ruled:
            self.cuts += 1
        elif over:
            self._report_bound(len(log.nodes))
        self.due = False
        self._sync()
        if ruled:
            self.aligned = log.start

    # --- learning -------------------------------------------------------------------------

    def _learn(self, p1: int, p2: int) -> bool:
        """The anchor was updated at log positions ``p1`` and ``p2``: is ``[p1, p2)`` a step?"""
        period = p2 - p1
        lo = max(0, p1 - period)
        if period < _MIN_PERIOD or 2 * (p1 - lo) < period:
            return False  # too little before it to compare
        nodes = LOG.nodes
        for i in range(lo, p1):
            x, y = nodes[i], nodes[i + period]
            if x.op != y.op or x.types != y.types or not attrs_equal(x.attrs, y.attrs):
                return False
            for a, b in zip(x.operands, y.operands):
                if type(a) is Value:
                    if type(b) is not Value or not self._corresponds(a, b, lo, period):
                        return False
                elif type(b) is Value or len(a) != len(b) or not all(
                        self._corresponds(u, v, lo, period) for u, v in zip(a, b)):
                    return False
        # the same handles updated at the same places in both periods
        ups = self.updates
        first = [(p - lo, h) for p, h in ups if lo < p <= p1]
        second = [(p - lo - period, h) for p, h in ups if lo + period < p <= p2]
        if first != second:
            return False
        mine = [(p, h, i) for i, (p, h) in enumerate(ups) if p1 < p <= p2]
        # the step ends after the update followed by the longest updateless stretch
        gaps = [(mine[(i + 1) % len(mine)][0] + (period if i + 1 == len(mine) else 0) - p, i)
                for i, (p, _, _) in enumerate(mine)]
        end = max(gaps, key=lambda g: (g[0], -g[1]))[1]
        boundary, hid, index = mine[end]
        handle = self.handles[hid]()
        if handle is None:
            return False
        count = sum(1 for _, h, _ in mine if h == hid)
        where = _where(nodes[boundary - 1].loc if boundary > 0 else None)
        self.rule = _Rule(handle, count, period, where, self.locs[index])
        # this segment began mid-step: the updates of that handle still to come before its next end
        still = sum(1 for p, h, _ in mine if h == hid and p1 < p <= boundary) if boundary != p2 else 0
        self.seen = count - still
        self.base = boundary
        if still == 0:
            self.watch = None
            self.due = True
            self.due_start = LOG.start
        events.emit("auto_barrier", f"a step of {period} nodes repeats: each step ends after the update "
                    f"near {where}; a barrier runs there from now on", where)
        return True

    def _corresponds(self, a: Value, b: Value, lo: int, period: int) -> bool:
        if a[1] != b[1]:
            return False
        x, y = a[0], b[0]
        if x is y:
            return True
        start = LOG.start
        nodes = LOG.nodes
        q = x.seq - start
        if 0 <= q < len(nodes) and nodes[q] is x:
            r = q + period
            if r < len(nodes) and nodes[r] is y:
                return True
        v = a
        after = self.after
        for _ in range(_CHAIN):
            got = after.get((id(v[0]), v[1]))
            if got is None or got[0] is not v[0]:
                break
            v = got[1]
            if v[0] is y and v[1] == b[1]:
                return True
        # device data uploaded within each period (a new batch per step)
        return (type(x) is Data and type(y) is Data and x.types == y.types
                and x.made > start + lo and y.made > start + lo + period)

    # --- cutting and reporting ------------------------------------------------------------

    def _sync(self) -> None:
        for d in _device.known_devices():
            barrier.sync(_device.get(d), False)

    def _last_where(self) -> str:
        nodes = LOG.nodes
        return _where(nodes[-1].loc if nodes else None)

    def _report_bound(self, n: int) -> None:
        where = self._last_where()
        if where in self.reported:
            return
        if len(self.reported) < _REPORTED_KEPT:
            self.reported.add(where)
        message = (f"lazycore: the pending graph reached {n} nodes without a barrier and was cut at {where}; "
                   f"end each step with lazycore.mark_step() (or raise LAZYCORE_AUTO_BARRIER_NODES)")
        events.emit("auto_barrier", f"the graph reached {n} nodes without a barrier: cut", where)
        loc = resolve(LOG.nodes[-1].loc) if LOG.nodes else None
        if loc is not None:
            warnings.warn_explicit(message, UserWarning, loc[0], loc[1])
        else:
            warnings.warn(message, UserWarning, stacklevel=2)


def _reads(operands, watch: set) -> bool:
    """Whether a handle among ``operands`` (or in a list there) holds a watched value."""
    for o in operands:
        if isinstance(o, (list, tuple)):
            if _reads(o, watch):
                return True
        elif id(getattr(o, "_value", (None,))[0]) in watch:
            return True
    return False


def _where(loc) -> str:
    loc = resolve(loc)
    return "an unknown line" if loc is None else f"{loc[0]}:{loc[1]}"


def install(trace) -> StepCutter:
    """Give the trace context ``trace`` its automatic step barriers: recorded
    ops read ``trace.cutter``, and :class:`~lazycore.ir.tensor.LazyTensor`
    in-place updates reach it through ``trace.updates``."""
    cutter = trace.cutter = StepCutter()
    trace.updates = cutter.updated
    return cutter


install(TRACE)  # the process's one trace context (lazycore.ir.context)
