"""``loss.backward()`` on the lazy device: recorded twice, then replayed.

Traced per op, a training step's backward pass is autograd's engine calling
every derivative formula through the lazy tensor's dispatch: about half of a
tiny transformers step's ops, each paying the dispatch's Python. What it
makes depends only on the autograd graph (its nodes' kinds and edges), the
values the forward saved, the Python numbers the formulas read and the
leaves' gradients, so once two backward passes over forwards of one
structure made the same nodes, later ones make those nodes again from the
current forward's values (:meth:`lazycore.trace.fragment.Fragment.replay`,
the recording of :class:`lazycore.trace.capture.Recording`) without running
the engine: the nodes, hence the programs, are the per-op trace's.

When: ``Tensor.backward`` of a lazy 0-d tensor with no ``gradient``,
``retain_graph``, ``create_graph`` or ``inputs``, outside a captured step and
``torch.compile``. The key, computed at every call: the autograd graph (each
node's kind, its edges, the leaves in the order met, their gradients' layouts
or None), the lazy graph made since the barrier (each node's digest, its
operands by position, the Python numbers it holds), grad mode, the default
dtype, the thread count. A recording's inputs are found in the current step
by position: a value the forward made by its place in the step log, an older
one (a parameter's data) by the place of its first use, a gradient being
accumulated by its leaf. Traced per op (the engine runs) instead: a graph
with a node other than a generated derivative or AccumulateGrad (a Python
``autograd.Function``: checkpoint, module backward hooks; CopySlices), a
leaf with tensor or post-accumulate hooks, a non-leaf lazy tensor given a hook
or ``retain_grad()`` (:func:`install` marks its node), saved-tensor hooks
pushed since the last backward or active now, a step log that is off, a
recording that reads a value it cannot place, and a graph freed already (the
engine raises eager's error).

After a replay the graph is freed as the engine frees it: every saved tensor
of its nodes is released (``SavedTensor.register_hooks`` with a pack hook
that keeps nothing), so the forward's values are not a barrier's outputs,
and a second ``backward()`` raises eager's RuntimeError. Gradients are set
as AccumulateGrad sets them: a leaf without one gets a new tensor (the
recorded layout), one with a gradient has it updated in place.

Hooks put on graph nodes (``grad_fn.register_hook``/``register_prehook``, an
AccumulateGrad node's, ``Module.register_backward_hook``'s) are not seen by a
walk; every one registered from Python passes ``Function._register_hook``,
which :func:`install` wraps to keep a weak reference to the node's hook dict:
while one lives with a hook in it, the engine runs. C++ hooks are not seen at
all: DDP's reducer puts them on the leaves' AccumulateGrad nodes, so while
``torch.distributed`` is initialized the engine runs. ``torch.autograd.backward``
and ``torch.autograd.grad`` (the functions) are not intercepted: they run the
engine, which raises eager's error on a graph a replay freed.

Which is faster depends on the graph: a replay saves the dispatch of every
derivative op but encodes the step log (the key's pass over the nodes made
since the barrier) and makes the recording's nodes; the engine pays a
dispatch for each op of each autograd node. When a graph's plan is confirmed
the two are weighed by counts, not clocks (:func:`_engine_is_cheaper`): a
choice by thread time made the programs a loaded machine compiled depend on
the load wherever the engine and a replay do not make one graph alike, and a
count gives the same choice in every run. The choice is kept per graph,
keyed cheaply by the root's kind and the number of nodes since the barrier
(ResNet-18: the engine, whose backward then runs without a walk; tiny
transformers: replay). ``LAZYCORE_REPLAY_BACKWARD=1`` turns replay on.
"""

from __future__ import annotations

import os
import weakref

import torch
import torch.autograd.graph as _graph

from lazycore.ir.context import LOCK, TRACE
from lazycore.ir.graph import LOG, Scalar, Value
from lazycore.ir.memo import Memo
from lazycore.ir.tensor import LazyTensor
from lazycore.trace import capture as _capture
from lazycore.trace import views as _views
from lazycore.trace.replayer import GUARDED, Replayer
from lazycore.trace.views import Storage

from . import tensor as _tensor
from .capture import _global_state
from .tensor import MADE, Tensor, _new

_SAVED_TENSOR = torch._C._autograd.SavedTensor
_DIST = torch.distributed if torch.distributed.is_available() else None


class _Switch:
    """``LAZYCORE_REPLAY_BACKWARD`` (default off; ``1`` turns it on: see docs/guides/torch.md).
    ``choose``: weigh the engine against the replay on each graph (:func:`_engine_is_cheaper`)
    and keep the cheaper; off, every confirmed plan replays."""

    __slots__ = ("on", "choose")

    def __init__(self):
        self.on = os.environ.get("LAZYCORE_REPLAY_BACKWARD", "0") not in ("0", "", "false", "False")
        self.choose = True


SWITCH = _Switch()

ERR_TWICE = ("Trying to backward through the graph a second time (or directly access saved tensors after they "
             "have already been freed). Saved intermediate values of the graph are freed when you call .backward() "
             "or autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time "
             "or if you need to access saved tensors after calling backward.")
"""Eager's message (torch/csrc/autograd/saved_variable.cpp) for a saved tensor freed already."""

_HOOKED = "lazycore.hooked"
"""The metadata entry :func:`install` puts on a node whose output tensor got a hook or ``retain_grad``."""
_FREED = "lazycore.freed"
"""The metadata entry on a replayed graph's root."""

_PLANS = Replayer("torch.backward_plans", 64, 1)
"""Key (:func:`_key`) -> a confirmed :class:`_Plan`."""
_LAST = Memo("torch.backward_last", 64)
"""Key -> the last recorded backward with that key (what the next one is compared with)."""
_SAVED = Memo("torch.backward_saved_names", 4096)
"""Node class -> its ``_raw_saved_*`` attribute names (a class's are fixed)."""
_CHOICES = Memo("torch.backward_choices", 64)
"""(root node's kind, nodes since the barrier) -> why the engine runs that graph's backward with
no walk (:data:`CHEAPER`, or how its replay failed), or "": it replays."""
CHEAPER = "the engine is cheaper than a replay on this graph"
_BACKOFF = Memo("torch.backward_backoff", 64)
"""An autograd graph's shape (:func:`_autograd_graph`) -> its recordings that found no agreeing
one, in a row (a :class:`~lazycore.trace.capture.Backoff`): per graph, so a loop's refusals
(new leaves every step) do not keep another loop, met later, from recording."""

NODES_PER_AUTOGRAD_NODE = 12
"""A confirmed plan replays while the nodes since the barrier plus the nodes it
makes are fewer than this many per autograd node the engine would run. Thread
time, same process, load 14-18: a replay costs about 2-3 us per such node (the
key's pass over the step log, making the recording's nodes), the engine 30-45 us
per autograd node (its formulas' dispatches). ResNet-18 at 2x3x32x32: 2,592 + 1,218
nodes for 134 autograd nodes (28 a node), engine 6.1 ms, replay 7.6 ms; tiny
GPT-2, BERT, Llama (benchmark 14's): 782, 943, 827 nodes for 151, 177, 228
(5.2, 5.3, 3.6 a node), engine 5.1, 6.3, 8.4 ms, replay 2.4, 2.8, 4.3 ms."""


class _State:
    __slots__ = ("marks", "pushes", "pushes_seen", "node_hooks")

    def __init__(self):
        # the hook dicts of nodes given a hook from Python (grad_fn.register_hook/register_prehook,
        # an AccumulateGrad node's, Module.register_backward_hook's): weak, a dict dies with its node
        self.node_hooks: list = []
        self.marks = 0  # hooks / retain_grad on non-leaf lazy tensors, ever (0: no node carries a mark)
        self.pushes = 0  # saved-tensor hooks pushed, ever
        self.pushes_seen = 0  # ... as of the last backward


STATE = _State()


class _Failed(Exception):
    """A replay that raised before it set a gradient (the engine runs instead)."""


class Stats:
    """Counts, for tests and benchmarks: backward calls replayed, recorded (the engine ran), passed on."""

    replays = 0
    recordings = 0
    engine = 0
    why: str | None = None


def _engine_is_cheaper(window: int, made: int, autograd_nodes: int) -> bool:
    """Whether the engine is expected to run a backward faster than a replay that
    encodes ``window`` step-log nodes and makes ``made`` (:data:`NODES_PER_AUTOGRAD_NODE`)."""
    return window + made >= NODES_PER_AUTOGRAD_NODE * autograd_nodes


def _pack(_):
    return None


def _unpack(_):
    raise RuntimeError(ERR_TWICE)


def backward(t, gradient=None, retain_graph=None, create_graph=False, inputs=None) -> bool:
    """Do ``t.backward()``'s work by replay or by a recorded engine run; False:
    not taken (the caller runs the engine plainly)."""
    if (not SWITCH.on or gradient is not None or retain_graph or create_graph or inputs is not None
            or MADE.refs is not None or torch.compiler.is_compiling() or t._key[0] != ()):
        return False
    root = t.grad_fn
    if root is None or not LOG.on:
        return False
    if torch.is_anomaly_enabled():
        return _plain("anomaly mode")
    pushes, STATE.pushes_seen = STATE.pushes_seen, STATE.pushes
    if pushes != STATE.pushes or torch._C._autograd._top_saved_tensors_default_hooks(False) is not None:
        return _plain("saved-tensor hooks were pushed since the last backward")
    if STATE.node_hooks and _node_hooked():
        return _plain("a hook on an autograd node (grad_fn.register_hook/register_prehook, "
                      "an AccumulateGrad node's, Module.register_backward_hook)")
    if _DIST is not None and _DIST.is_initialized():  # (DDP's reducer: C++ hooks on AccumulateGrad nodes)
        return _plain("torch.distributed is initialized")
    if root.metadata.get(_FREED):
        return False  # the engine raises eager's error
    # (a cheap key: a graph the engine runs faster is not walked; two graphs sharing it share a choice)
    proxy = (type(root), len(LOG.nodes))
    engine = _CHOICES.get(proxy)
    if engine and (SWITCH.choose or engine is not CHEAPER):
        return _plain(engine)
    with LOCK:
        found = _autograd_graph(root)
        if type(found) is str:
            return _plain(found)
        shape, leaves, saved, autograd_nodes = found
        grads = []
        shared = {}  # id(storage) -> the first leaf whose gradient it holds
        for li, p in enumerate(leaves):
            g = p.grad
            if g is None:
                grads.append(None)
            elif type(g) is Tensor and g._storage is not None:
                grads.append((g._key, _views.steps_key(g._steps) if g._steps else None,
                              shared.setdefault(id(g._storage), li)))
            else:
                return _plain("a leaf's gradient is not a lazy tensor")
        window, olds = _window()
        key = (shape, tuple(map(id, leaves)), tuple([p._key for p in leaves]), tuple(grads), window,
               _global_state(), torch.is_autocast_enabled("cpu"))
        try:
            out = _PLANS.replay(key, leaves, olds)
        except _Failed as e:  # nothing changed: the engine runs this graph from now on, without a walk
            _PLANS.pop(key, None)
            _CHOICES.put(proxy, str(e))
            return _plain(str(e))
        if out is not GUARDED:
            _free(root, saved)
            Stats.replays += 1
            return True
        backoff = _BACKOFF.get(shape)
        if backoff is None:
            backoff = _BACKOFF.put(shape, _capture.Backoff())
        if not backoff.records():
            return _plain("no two recordings of this graph agreed lately")
        previous = _LAST.get(key)
        if previous is not None and not previous.holds(leaves):
            previous = None  # (its leaves died and a new one took an id: no earlier backward of these)
        plan = _Plan.record(t, leaves, olds)
        Stats.recordings += 1
        if type(plan) is str:
            Stats.why = plan
            _LAST.pop(key, None)
            backoff.refused(plan)
            return True
        if previous is not None and previous.key == plan.key:
            _LAST.pop(key, None)
            _BACKOFF.pop(shape, None)
            engine = SWITCH.choose and _engine_is_cheaper(proxy[1], len(plan.rec.fragment.entries), autograd_nodes)
            _CHOICES.put(proxy, CHEAPER if engine else "")
            if not engine:
                _PLANS.add(key, plan)
        else:
            _LAST.put(key, plan)
            # (a loop whose leaves are new tensors each step, an input given requires_grad, never
            # meets its key again: it records a few times, then once in 1, 2, 4, ... 64 calls)
            backoff.refused("two recordings of one key differed" if previous is not None
                                  else "no earlier backward had this structure")
        return True


def _node_hooked() -> bool:
    """Whether a node of a live autograd graph holds a hook registered from Python."""
    live = STATE.node_hooks = [r for r in STATE.node_hooks if r() is not None]
    return any(r() for r in live)


def _plain(why: str) -> bool:
    Stats.engine += 1
    Stats.why = why
    return False


def _autograd_graph(root):
    """``(shape, leaves, saved, nodes)`` of the graph under ``root``: its nodes' kinds
    and edges in breadth-first order, the AccumulateGrad leaves in the order
    met, the saved tensors to free and the number of nodes; or why it cannot be replayed."""
    index = {root: 0}
    order = [root]
    kinds, edges, leaves, saved = [], [], [], []
    marks = STATE.marks
    function_base = torch._C._FunctionBase
    i = 0
    while i < len(order):
        node = order[i]
        i += 1
        cls = type(node)
        names = _SAVED.get(cls)
        if names is None:
            if issubclass(cls, function_base):
                return f"a Python autograd.Function ({cls.__name__}) is in the graph"
            name = cls.__name__
            if name != "AccumulateGrad" and not (name[-1:].isdigit() and "Backward" in name):
                return f"an autograd node of kind {name} is in the graph"
            every = dir(cls)
            names = _SAVED.put(cls, (tuple(a for a in every if a.startswith("_raw_saved_")),
                                     tuple(a for a in every if a.startswith("_saved_") and "_raw" + a not in every)))
        if marks and node.metadata.get(_HOOKED):
            return "a hook or retain_grad() on a tensor of the graph"
        kinds.append(cls)
        tensors, numbers = names
        if tensors:
            # a _raw_saved_ getter (torch's tools/autograd/gen_autograd_functions.py) gives a
            # SavedTensor (a tensor, an optional one: undefined, a Scalar output) or a tuple of them
            # (a tensor list, index's List<optional<Tensor>>: IndexBackward0 and IndexPutBackward0
            # save their indices so, MaxViT's relative position bias); a tuple's getter raises once
            # the engine freed it
            for a in tensors:
                try:
                    s = getattr(node, a)
                except RuntimeError:
                    return "a saved tensor list was freed already (the engine raises eager's error)"
                if type(s) is _SAVED_TENSOR:
                    saved.append(s)
                elif type(s) is tuple and all(type(x) is _SAVED_TENSOR for x in s):
                    saved.extend(s)
                else:
                    return f"{cls.__name__}.{a} is a {type(s).__name__}, not a saved tensor or a tuple of them"
        if numbers:  # what the formula reads besides tensors (a scalar, a size, padding_idx) is the key's
            for a in numbers:
                v = getattr(node, a)
                t = type(v)
                if t is list:
                    v = tuple(v)
                elif isinstance(v, torch.Tensor):  # (a Python number saved as a wrapped CPU tensor)
                    v = (v.dtype, v.tolist())
                kinds.append(v)
        if not tensors and cls.__name__ == "AccumulateGrad":
            p = node.variable
            if type(p) is not Tensor:
                return "a leaf is not a lazy tensor"
            if p._backward_hooks or getattr(p, "_post_accumulate_grad_hooks", None):
                return "a leaf has a hook"
            edges.append(-3 - len(leaves))
            leaves.append(p)
        for nxt, nr in node.next_functions:
            if nxt is None:
                edges.append(-1)
                continue
            k = index.get(nxt)
            if k is None:
                k = index[nxt] = len(order)
                order.append(nxt)
            edges.append(k)
            edges.append(nr)
        edges.append(-2)
    return (tuple(kinds), tuple(edges)), leaves, saved, len(order)


def _window() -> tuple[tuple, list]:
    """The lazy graph made since the barrier, as plain data (each node's
    digest, its operands by log position or, for older values, by the order
    their nodes were first used, and a Python number's value), and the older
    nodes in that order."""
    start = LOG.start
    old: dict = {}
    olds: list = []
    parts = []
    put = parts.append
    for n in LOG.nodes:
        put(n.digest)
        if type(n) is Scalar:
            put(n.value.tobytes())
        for o in n.operands:
            group = (o,) if type(o) is Value else o
            if type(o) is not Value:
                put(-2 - len(o))
            for v in group:
                m = v[0]
                s = m.seq
                if s < start:
                    k = old.get(id(m))
                    if k is None:
                        k = old[id(m)] = len(olds)
                        olds.append(m)
                        if type(m) is Scalar:
                            put(m.value.tobytes())
                    put(-1_000_000_000 - k)
                else:
                    put(s - start)
                put(v[1])
    return tuple(parts), olds


def _free(root, saved) -> None:
    """Free the graph's saved tensors (``SavedTensor`` objects, :func:`_autograd_graph`
    flattened the tuples) as the engine does after a backward without ``retain_graph``."""
    root.metadata[_FREED] = True  # (first: the graph is spent whatever happens below)
    for x in saved:
        try:
            x.register_hooks(_pack, _unpack)
        except RuntimeError:  # an undefined one ("a saved tensor with value None": an optional
            pass  # tensor, index's None) or one freed already: nothing to free


class _Plan:
    """A recorded backward: the nodes it made (a :class:`~lazycore.trace.capture.Recording`),
    where each input is found in a later step, and how the gradients are set."""

    __slots__ = ("rec", "locs", "types", "leaves", "updates", "kept", "key")

    @classmethod
    def record(cls, t, leaves, olds):
        """Run the engine on ``t`` while :mod:`lazycore.trace.capture` watches;
        the plan, or why it cannot be replayed (the engine ran either way)."""
        before = [p.grad for p in leaves]
        watch = _capture.begin([], calls=False)
        with TRACE.cuts_held():
            torch.Tensor.backward(t)
        try:
            return cls(watch, leaves, olds, before)
        except _capture.Refused as e:
            return str(e)
        except Exception as e:  # noqa: BLE001 (the engine did the backward's work: only its recording is lost)
            return f"the recording raised {type(e).__name__}: {e}"

    def __init__(self, watch, leaves, olds, before):
        start = LOG.start
        grad_at = {}  # id(handle of a gradient before) -> leaf index
        kept, kept_handles = [], []
        for li, (p, g0) in enumerate(zip(leaves, before)):
            g = p.grad
            if g0 is not None:
                if g is not g0:
                    raise _capture.Refused("a gradient was replaced, not accumulated in place")
                grad_at[id(g0._storage.handle)] = li
            elif g is not None:
                if type(g) is not Tensor:
                    raise _capture.Refused("a gradient is not a lazy tensor")
                kept.append((li, g._steps, g._key, g._storage.strides))
                kept_handles.append(g._storage.handle)
        if len({id(h) for h in kept_handles}) != len(kept_handles):
            raise _capture.Refused("two gradients share a storage")
        # made in the order the engine made them: a barrier's outputs are the live handles in
        # the order made, and another order would be another program
        made = {id(h): k for k, h in enumerate(_capture._fresh(watch))}
        order = sorted(range(len(kept)), key=lambda k: made.get(id(kept_handles[k]), -1))
        kept = [kept[k] for k in order]
        kept_handles = [kept_handles[k] for k in order]
        rec = _capture.finish(watch, kept_handles)
        updates = []
        for u in rec.updates:
            h = u() if type(u) is not int else None
            li = grad_at.get(id(h)) if h is not None else None
            if li is None:
                raise _capture.Refused("the backward updated a tensor other than a gradient")
            updates.append(li)
        old_at = {id(n): k for k, n in enumerate(olds)}
        locs = []
        for kind, where in rec.slots:
            if kind != "live":
                raise _capture.Refused("an argument slot")
            h = where[0]()
            v = watch.before[id(h)][1]
            li = next((grad_at[id(r())] for r in where if r() is not None and id(r()) in grad_at), None)
            node = v[0]
            if li is not None:
                locs.append((2, li, 0))
            elif node.seq >= start and node.seq - start < len(LOG.nodes) and LOG.nodes[node.seq - start] is node:
                locs.append((0, node.seq - start, v[1]))
            elif id(node) in old_at:
                locs.append((1, old_at[id(node)], v[1]))
            else:
                raise _capture.Refused("the backward reads a value the forward did not use")
        self.rec = rec
        self.locs = tuple(locs)
        self.types = tuple(rec.slot_types)
        self.leaves = [weakref.ref(p) for p in leaves]
        self.updates = tuple(updates)
        self.kept = [(li, steps, key, strides, h.device) for (li, steps, key, strides), h in zip(kept, kept_handles)]
        k = rec.key
        self.key = (self.locs, k[2], k[3], k[4], k[5], self.updates,
                    tuple((li, _views.steps_key(steps) if steps else None, key, strides)
                          for li, steps, key, strides, _ in self.kept))

    def holds(self, leaves) -> bool:
        """Whether ``leaves`` are the objects this plan was recorded with (a
        key's ids may be a dead leaf's, reused by a new tensor)."""
        for r, p in zip(self.leaves, leaves):
            if r() is not p:
                return False
        return True

    def attempt(self, leaves, olds):
        """Make the recorded nodes on this step's values and set the gradients;
        ``GUARDED`` (nothing changed) when a guard fails."""
        if not self.holds(leaves):
            return GUARDED
        nodes = LOG.nodes
        env = []
        for (kind, a, b), typ in zip(self.locs, self.types):
            if kind == 0:
                if a >= len(nodes):
                    return GUARDED
                v = Value(nodes[a], b)
            elif kind == 1:
                if a >= len(olds):
                    return GUARDED
                v = Value(olds[a], b)
            else:
                v = leaves[a].grad._storage.handle._value
            if v[0].types[v[1]] != typ:
                return GUARDED
            env.append(v)
        try:
            values = self.rec.fragment.replay((), env)
        except Exception as e:  # (no gradient set yet: the engine can run instead)
            raise _Failed(f"a replay raised {type(e).__name__}: {e}") from e
        n = len(self.updates)
        targets = [leaves[li].grad._storage.handle for li in self.updates]
        heard = TRACE.updates  # (the automatic step barrier hears in-place updates)
        if heard is not None and targets:
            cutter = TRACE.cutter
            if cutter is not None and heard == cutter.updated:
                cutter.updated_many(targets, values[:n])
            else:
                for h, v in zip(targets, values[:n]):
                    heard(h, v)
        for h, v in zip(targets, values[:n]):
            h.take(v)  # (Arena.pending)
        for (li, steps, key, strides, dev), v in zip(self.kept, values[n:]):
            leaves[li].grad = _new(Storage(LazyTensor(v, dev), strides), steps, *key)
        return True


def _marking(method):
    def marked(self, *args, **kwargs):
        if type(self) is Tensor and self.grad_fn is not None:
            self.grad_fn.metadata[_HOOKED] = True
            STATE.marks += 1
        return method(self, *args, **kwargs)

    marked.lazycore_wraps = method
    return marked


def _counting(enter):
    def counted(self):
        STATE.pushes += 1
        return enter(self)

    counted.lazycore_wraps = enter
    return counted


def _watching(register):
    # every hook Python puts on an autograd node (torch/csrc/autograd/python_hook.cpp's
    # registerFunctionHook/registerFunctionPreHook) goes through Function._register_hook; a
    # node's first hook of a kind (pre, post) makes the dict the node then keeps
    def registered(backward_hooks, hook):
        out = register(backward_hooks, hook)
        if backward_hooks is None:
            STATE.node_hooks.append(weakref.ref(out[0]))
        return out

    registered.lazycore_wraps = register
    return staticmethod(registered)


def install() -> None:
    """The lazy tensor's ``backward`` tries a replay; its hooks and
    ``retain_grad`` mark their node; saved-tensor hooks are counted (idempotent)."""
    if _tensor.BACKWARD is not None:
        return
    _tensor.BACKWARD = backward
    for name in ("register_hook", "retain_grad"):
        setattr(Tensor, name, _marking(getattr(torch.Tensor, name)))
    # hooks on nodes (Module.register_backward_hook's too) are not seen by a walk: while a
    # node holding one lives, every backward runs the engine
    register = torch.autograd.Function._register_hook
    if not hasattr(register, "lazycore_wraps"):
        torch.autograd.Function._register_hook = _watching(register)
    hooks = _graph.saved_tensors_hooks
    if not hasattr(hooks.__enter__, "lazycore_wraps"):
        hooks.__enter__ = _counting(hooks.__enter__)
