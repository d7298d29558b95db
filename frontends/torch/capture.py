"""``lazycore.torch.capture``: a training step traced twice, then replayed.

    @lazycore.torch.capture
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    for x, y in batches:
        loss = step(x, y)
        lazycore.torch.mark_step()

Per-op tracing runs autograd, the modules, the optimizer and the dispatch of
every op in Python at every step. A captured step runs them while it is
traced; once two traced calls did the same thing (same ops on the same
tensors, same Python numbers; the first call, which finds the parameters and
makes optimizer state, agrees with the second when every node the second
made outside its optimizers' steps is one it made too, with the same numbers
at the same line), later calls with arguments of the same kind replay the
recording (:mod:`lazycore.capture`): the step's nodes are
made again on the current values, parameters and optimizer state are updated
in place, new gradients are set, and the result tensors come back, with no
op dispatched. What it compiles is what the traced step compiled.

Guards, checked at every call before anything changes (a failed one traces
the call again): the arguments (lazy tensors by sizes, strides, dtype and
device; anything else by value, like ``jax.jit``'s static arguments), grad
mode and the default dtype, the ``training`` flag of every module the step
ran and the parameters, buffers and submodules each holds (the very objects:
:class:`_Modules`), every hyperparameter of every optimizer it stepped, with the values
its step used (a scheduler the step steps after it sets the next step's: the
guard holds the used ones, so the next call traces again instead of replaying
the last step's numbers), but those the program reads as inputs (a float
learning rate, and ``betas[0]`` of Adam, AdamW, Adamax, NAdam and RAdam,
which OneCycleLR and CyclicLR cycle, are swapped
for device values while the optimizer steps, :mod:`.optim`: a scheduler's
new value is a new input, and the step replays), those optimizers' state
tensors, whether each parameter has a gradient, and the
Python state the step's own code read (globals, closed-over cells, ``self``
attributes: :mod:`lazycore.trace.pyreads`; attributes it reads through
locals, helpers' arguments and chains, ``c = cfg; inner(c)`` reading
``c.scale``, as the call read them: :mod:`lazycore.trace.attrreads`), and
the plain attributes of the objects a library module it ran holds (a
model's config, which transformers reads at every call). Python values read
elsewhere (a library's global, an attribute of a call's result or one a
property computes) are baked in, as in ``jax.jit``: pass what changes as an
argument.

Optimizers replay: on the lazy device they are capturable
(:mod:`lazycore.frontends.torch.optim`), so Adam's step counter and bias
corrections are device values, not new Python numbers every call. A value
the step reads that several live tensors hold (a learning rate and the
scheduler's copy of it) is read from the oldest; a replay refuses when they
no longer agree.

Refused (traced at every call, the reason in :attr:`Captured.why`): a step
that looks at a value (``.item()``, ``print``, a fallback op, ``mark_step``;
``ReduceLROnPlateau.step(loss)``, which reads the loss as eager does: stepped
after the captured step with the loss it returns, its rate is an input),
uploads host data, or keeps a tensor it made anywhere but in its result and
the gradients (a list outside, a ``self.`` attribute). A training step
replays from its third call. Recording a call costs several traced calls:
after three recordings in a row refused for one reason, the function says
so once (a :class:`~lazycore.trace.capture.CaptureWarning` at the calling
line) and traces its calls plainly, recording one again after 1, 2, 4, ...
up to 64 of them (:class:`~lazycore.trace.capture.Backoff`), so a fix is
still found; :attr:`Captured.recordings` counts the recorded calls.

A replayed call returns tensors without autograd history
(``requires_grad=False``): the step is expected to run its own backward.
"""

from __future__ import annotations

import functools
import operator
import sys
import threading
import types
import weakref
from itertools import chain

import torch
import torch.optim.optimizer as _optimizer
from torch.utils import _pytree as pytree

from lazycore.ir.context import LOCK, TRACE
from lazycore.ir.memo import Family, Memo
from lazycore.trace import attrreads as _attrreads
from lazycore.trace import capture as _capture
from lazycore.trace import pyreads as _pyreads
from lazycore.ir.config import settings
from lazycore.trace import views as _views
from lazycore.ir.tensor import LazyTensor
from lazycore.trace.replayer import GUARDED, Replayer
from lazycore.trace.views import Storage

from . import optim as _optim
from .ops.random import GENERATORS
from . import tensor as _tensor
from .tensor import Tensor, _new

_FAILED = [None]
"""The guard that failed last (for LAZYCORE_DEBUG's line)."""


def _guarded(why: str):
    _FAILED[0] = why
    return GUARDED


_KINDS_KEPT = 8
"""Kinds of arguments (sizes, dtypes, Python values) a captured function keeps recordings for."""
_PLANS_KEPT = 4
"""Confirmed recordings kept per kind of arguments (a model in training and in eval mode: two)."""
_PLANS = Family("torch.capture_plans", _KINDS_KEPT)
"""Every captured function's confirmed recordings (a :class:`~lazycore.trace.replayer.Replayer` each)."""
_LAST = Family("torch.capture_last_traces", _KINDS_KEPT)
"""Every captured function's last traced call per kind of arguments (what the next one is compared with)."""
_BACKOFF = Family("torch.capture_backoff", _KINDS_KEPT)
"""Every captured function's :class:`~lazycore.trace.capture.Backoff` per kind of arguments."""


def capture(fn=None):
    """Capture the step function ``fn`` (a decorator): see the module docs."""
    if fn is None:
        return capture
    return Captured(fn)


class Captured:
    """A captured step function. Call it as the function itself."""

    def __init__(self, fn, *, optimizer=None):
        self.fn = fn
        self._inside = weakref.ref(optimizer) if optimizer is not None else None
        """The optimizer whose step ``fn`` is, its hooks run already (:mod:`.optim_replay`)."""
        functools.update_wrapper(self, fn)
        self._plans = Replayer("torch.capture_plans", _KINDS_KEPT, _PLANS_KEPT, _PLANS)
        """Argument key -> confirmed :class:`_Plan` objects, oldest first (the last to serve is the newest)."""
        self._last = Memo("torch.capture_last_traces", _KINDS_KEPT, _LAST)
        """Argument key -> the plan of the last traced call."""
        self._backoff = Memo("torch.capture_backoff", _KINDS_KEPT, _BACKOFF)
        """Argument key -> when to record again (kinds whose recordings were refused)."""
        self._warned: set[str] = set()  # the reasons a stop was said for
        self._known = weakref.WeakValueDictionary()  # id -> a tensor whose gradient a call set
        self._optimizers = weakref.WeakSet()  # the optimizers traced calls stepped
        self.traces = 0
        """Calls that ran the function."""
        self.recordings = 0
        """Of those, calls that were recorded (the others were traced plainly: :class:`~lazycore.trace.capture.Backoff`)."""
        self.replays = 0
        """Calls that replayed a recording instead."""
        self.why: str | None = None
        """Why the last traced call cannot be replayed (None: it can, or no call yet)."""

    def __call__(self, *args, **kwargs):
        flat, spec = pytree.tree_flatten((args, kwargs))
        key = _arg_key(flat, spec)
        if key is not None:
            # the newest plan whose guards hold serves, and becomes the newest (Replayer.replay)
            with LOCK:  # a replay's values are raw until its tensors hold them (docs/threads.md)
                out = self._plans.replay(key, flat)
            if out is not GUARDED:
                self.replays += 1
                return out
            backoff = self._backoff.get(key)
            if backoff is not None and not backoff.records():
                self.traces += 1
                # the next recording starts afresh: it is compared with the call after it, not an old one
                self._last.pop(key, None)
                with GENERATORS.device_draws():
                    return self.fn(*args, **kwargs)
        # multinomial draws from the device's stream in a captured step, traced or replayed:
        # eager's stream is drawn on the host, an upload no replay makes again
        with GENERATORS.device_draws():
            return self._trace(args, kwargs, flat, key)

    def _trace(self, args, kwargs, flat, key):
        self.traces += 1
        if settings.debug and self._plans.get(key):
            _say(self, f"traced again: {_FAILED[0]}")
        if key is None:
            self.why = "an argument is neither a lazy tensor nor a hashable Python value"
            return self.fn(*args, **kwargs)
        # a recording watches the whole graph: no other thread's op may land in it (docs/threads.md)
        with LOCK:
            return self._record(args, kwargs, flat, key)

    def _record(self, args, kwargs, flat, key):
        self.recordings += 1
        previous = self._last.get(key)
        # a first call (it finds the parameters, makes optimizer state) stands in for
        # the confirming trace when the next call's nodes are all nodes it made too
        compare = previous is None or (not previous.complete and previous.contents is not None)
        try:
            plan, out = _Plan.trace(self.fn, args, kwargs, flat, self._known, self._optimizers, compare,
                                    self._inside() if self._inside is not None else None)
        except _capture.Refused as e:
            self.why = e.args[0]
            if settings.debug:
                _say(self, f"cannot replay: {self.why}")
            self._put_last(key, _Unrecorded(e.args[2] if previous is None and len(e.args) > 2 else None))
            self._refused(key, self.why)
            return e.args[1] if len(e.args) > 1 else None
        self.why = None
        if previous is not None and previous.key != plan.key and previous.complete and plan.complete:
            self.why = _differed(previous, plan)
            if settings.debug:
                _say(self, self.why)
        agrees = previous is not None and (previous.key == plan.key or (
            plan.complete and not previous.complete and previous.contents is not None
            and plan.contents is not None and plan.contents <= previous.contents))
        if agrees:
            self._plans.add(key, plan)
            self._last.pop(key)
            self._backoff.pop(key, None)
            if settings.debug:
                _say(self, f"recorded ({len(plan.rec.fragment.entries)} nodes): calls with these arguments replay")
        else:
            if previous is not None and plan.contents is not None and not plan.complete:
                plan.contents = None  # compared once; a step that keeps finding parameters pays no more
            self._put_last(key, plan)
            if previous is not None:  # (a first call has nothing to agree with yet)
                self._refused(key, self.why or "the last two traced calls did not agree")
        return out

    def _refused(self, key, why: str) -> None:
        _capture.refused(self._backoff, key, why, self._warned, _KINDS_KEPT, self.fn,
                         getattr(self, "__qualname__", "step"), lambda what: _say(self, what))

    def _put_last(self, key, plan) -> None:
        self._last.pop(key, None)
        self._last.put(key, plan)


class _Unrecorded:
    """A traced call that could not be recorded; what a next call compares with."""

    complete = False

    def __init__(self, contents):
        self.key = object()
        self.contents = contents


def _say(captured, what: str) -> None:
    from lazycore.observe.debug import on_capture

    on_capture(getattr(captured, "__qualname__", "step"), what)


def _differed(previous: "_Plan", plan: "_Plan") -> str:
    """Why two traced calls with the same arguments made different plans.

    Hyperparameters are matched by name, optimizers by identity, the Python
    state by label, never by position: a group's guarded entries are fewer
    while its program reads one as an input (a momentum that is not 0), so
    the entries after it are not the same ones in the two calls."""
    then_optims = {id(r()): h for r, h in previous.optims}
    for r, h1 in plan.optims:
        h0 = then_optims.get(id(r()))
        if h0 is None:
            continue
        for g0, g1 in zip(h0[0], h1[0]):
            g0, g1 = dict(g0), dict(g1)
            changed = [k for k, v in g1.items() if k in g0 and g0[k] != v]
            if changed:
                return (f"an optimizer's {', '.join(changed)} changed between calls (a scheduler): make it a "
                        f"tensor (lr=torch.tensor(...)) and step the scheduler outside the captured step, so "
                        f"the program reads it instead of tracing again")
            # (either way round one reason: a momentum that alternates is one refusal, counted in a row)
            branched = [(k, g[k]) for g, other in ((g0, g1), (g1, g0)) for k in g if k not in other]
            if branched:
                return "; ".join(f"an optimizer's {k} changed between calls, between {v!r} and a value its program "
                                 f"reads" for k, v in branched) + (
                    ": the optimizer's Python takes another branch (SGD's momentum buffer only where it is not 0), "
                    "and each branch replays once two calls in a row take it")
        if h0[1:] != h1[1:]:
            return "an optimizer's state (its tensors, or a Python value in it) changed between calls"
    # two modules' attributes of one name share a label: compared in the order read
    now = {}
    for label, value in plan.python.key:
        now.setdefault(label, []).append(value)
    then = {}
    for label, value in previous.python.key:
        then.setdefault(label, []).append(value)
    for label, values in then.items():
        if label in now and values != now[label]:
            return f"the step reads {label}, which changed between calls: pass it as an argument"
    once = [label for label in list(then) + list(now) if (label in then) != (label in now)]
    if once:
        return (f"the step read {once[0]} in only one of its last two traced calls (its code took another "
                f"path): what decides the path changed between calls")
    return "the last two traced calls differed" + _part_differed(previous, plan)


_RECORDING_PARTS = ("the way its arguments alias (one tensor passed twice in one call, not in the other)",
                    "the live tensors it read (a gradient or an optimizer's state replaced, not updated in place)",
                    "the types of the values it read", None, None, None,
                    "the tensors it updated in place", "the devices of the values it kept")
"""What each part of a :meth:`~lazycore.trace.capture.Recording._key` says, where it differs
(None: its constants or its nodes, which a Python number the step reads changes)."""
_PLAN_PARTS = (None, "grad mode, the default dtype or the thread count", "the modules it ran or their training flags",
               "its optimizers' hyperparameters or state", "the gradients it left (None, the same tensor, or a "
               "new one of another layout or view)", "the structure of its result", "its results' layouts or views",
               "the strides of the tensors it made", "the schedulers it stepped or their arguments",
               "the Python state it read")
"""What each part of :meth:`_Plan._key` (then the Python reads) says, where it differs."""


def _part_differed(previous: "_Plan", plan: "_Plan") -> str:
    """Where two complete plans' keys first differ, in words: a graph whose
    nodes or constants differ is the catch-all (a Python number the step
    reads, or one its ops depend on); the rest name what changed."""
    number = " (the step reads a Python number that changes every call, or its ops depend on one)"
    for k, (a, b) in enumerate(zip(previous.key, plan.key)):
        if a == b:
            continue
        if k == 0:
            for part, x, y in zip(_RECORDING_PARTS, a, b):
                if x != y:
                    return f" in {part}" if part is not None else number
            return number
        return f" in {_PLAN_PARTS[k]}" if k < len(_PLAN_PARTS) else number
    return number


def _arg_key(flat, spec):
    """What replay needs to know about the arguments, hashable; None if it cannot be."""
    key = [spec]
    for x in flat:
        t = type(x)
        if t is Tensor:
            steps = x._steps
            if steps:
                steps = _views.steps_key(steps)
                if steps is None:
                    return None
            key.append((x._key, x.requires_grad, steps))
        elif isinstance(x, torch.Tensor):
            return None  # a host tensor: its values would be baked
        else:
            key.append((t, x))
    key = tuple(key)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _metric_hint(steps) -> str:
    """Where the step gave a scheduler a tensor (ReduceLROnPlateau's and
    transformers' GreedyLR's ``step(loss)``), what to do instead: the scheduler
    reads it as a Python number (``float(metrics)``), as eager does, a barrier
    inside the step that no replay could redo; stepped after the captured step
    with the loss it returns, the read is outside and the rate it sets is an
    input of the next replay."""
    for ref, args, kwargs, _ in steps.calls:
        if any(isinstance(a, torch.Tensor) for a in chain(args, kwargs.values())):
            return (f"; {type(ref()).__name__}.step was given a tensor, which it reads as a Python number (as eager "
                    f"does): step it after the captured step with the loss it returns (loss = step(batch); "
                    f"scheduler.step(loss)), and the rate it sets is an input of the replay")
    return ""


def _scheduler_calls(steps) -> list:
    """The scheduler steps a replay makes again after the recorded graph."""
    if steps.unexplained:
        raise _capture.Refused("the step changes an optimizer's learning rate other than by stepping a scheduler: "
                               "Python work a replay would not redo")
    calls = []
    for ref, args, kwargs, after in steps.calls:
        if not after:
            raise _capture.Refused("the step steps a learning-rate scheduler before its optimizer: a replay steps "
                                   "them again after the recorded graph")
        try:
            hash((args, tuple(kwargs.items())))
        except TypeError:
            raise _capture.Refused("the step passes a scheduler a value that is not a hashable Python value") from None
        calls.append((ref, args, tuple(kwargs.items())))
    return calls


def _survivors(modules: dict, selves: dict) -> dict:
    """The modules the step called that outlive it; ``selves`` (the watched
    methods' objects) keeps only those too. A module the step made and dropped
    (transformers' BertForMaskedLM makes a ``CrossEntropyLoss`` every call) is
    the step's own code, not state to guard: once the call's frames are gone,
    only these two dicts hold it."""
    weak, strong = {}, {}
    for i, m in list(modules.items()) + list(selves.items()):
        try:
            weak[i] = weakref.ref(m)
        except TypeError:
            strong[i] = m  # (no weak reference: kept, and guarded as before)
    m = None  # (the loop's last object must not outlive the two dicts' hold)
    in_modules, in_selves = list(modules), list(selves)
    modules.clear()
    selves.clear()
    alive = {i: m for i, m in ((i, r()) for i, r in weak.items()) if m is not None}
    alive.update(strong)
    selves.update((i, alive[i]) for i in in_selves if i in alive)
    return {i: alive[i] for i in in_modules if i in alive}


def _held(selves) -> list:
    """Guards on the plain attributes of the objects (not modules, tensors,
    functions, classes) held by the library modules whose methods the step
    ran: a model's config, which library code reads at every call
    (transformers' ``self.config.output_hidden_states``) where no watcher
    sees it. All of them, read or not: a change retraces."""
    checks, seen = [], set()
    for m in selves.values():
        if not isinstance(m, torch.nn.Module) or _user_class(type(m)):
            continue  # (a user module's own reads are watched one by one: :mod:`lazycore.trace.attrreads`)
        for attr, held in vars(m).items():
            if id(held) in seen or isinstance(held, _NOT_HELD) or _pyreads.plain(held) is not _pyreads.NOT_PLAIN:
                continue
            seen.add(id(held))
            try:
                ref, own = weakref.ref(held), vars(held)
            except TypeError:
                continue  # no weak reference or no __dict__
            for name, value in own.items():
                snap = _pyreads.plain(value)
                if snap is not _pyreads.NOT_PLAIN:
                    checks.append((f"attribute '{name}' of the {type(held).__name__} a {type(m).__name__} holds "
                                   f"as '{attr}'", _pyreads._Attr(ref, name, value), snap, False))
    return checks


def _user_class(cls) -> bool:
    module = sys.modules.get(cls.__module__)
    filename = getattr(module, "__file__", None)
    return filename is not None and _pyreads.is_user_code(filename)


_NOT_HELD = (torch.nn.Module, torch.Tensor, type, types.ModuleType, types.FunctionType, types.MethodType,
             types.BuiltinFunctionType, functools.partial, dict, list, tuple, set)


def _a_tensor(obj) -> bool:
    """(a tensor's attributes are guarded as tensors: sizes, gradients)"""
    return isinstance(obj, torch.Tensor)


def _global_state() -> tuple:
    # (a step traced with the index checks holds them: settings.index_checks; eager's
    # parallel loops split by the thread count, which some lowerings model: ops/eager_loops.threads)
    return (torch.is_grad_enabled(), torch.get_default_dtype(), settings.index_checks, torch.get_num_threads())


def _hyper(opt, groups=None) -> tuple:
    """An optimizer's hyperparameters (``groups``, as :func:`_groups` gave them
    when its step began, or now), the identity of its state tensors and the
    values of its other state."""
    if groups is None:
        groups = _groups(opt)
    # a Python value in the state (a step counter kept as an int) by value, a tensor by identity
    state = tuple(id(v) if isinstance(v, torch.Tensor) else _state_value(v)
                  for s in opt.state.values() for v in s.values())
    return groups, len(opt.state), state


def _groups(opt) -> tuple:
    """An optimizer's hyperparameters but those its program reads as inputs
    (:func:`.optim.read_as_input`; of ``betas``, the first)."""
    inputs = _optim.read_as_input(opt)

    def value(k, v):
        if k == "betas" and "betas" in inputs:
            v = v[1:]
        return id(v) if isinstance(v, torch.Tensor) else v

    return tuple(tuple((k, value(k, v)) for k, v in g.items() if k != "params" and (k == "betas" or k not in inputs))
                 for g in opt.param_groups)


def _state_value(v):
    """An optimizer's non-tensor state value, as the step's Python reads compare it (its repr when not plain)."""
    snap = _pyreads.plain(v)
    return repr(v) if snap is _pyreads.NOT_PLAIN else snap


_call = operator.call
_HOLDS = operator.itemgetter("_parameters", "_buffers", "_modules")
_TRAINING = operator.itemgetter("training")
_VALUES = operator.methodcaller("values")


class _Modules:
    """The modules a traced call ran, checked before each replay: each still
    alive, its ``training`` flag the same object (``train()``/``eval()``),
    and the parameters, buffers and submodules it holds the very objects the
    traced call found. Without that last part a submodule swapped, or a
    parameter replaced, while the old one lived on replayed the old one's
    graph. In C loops over the modules' ``__dict__`` (``map``), the held
    objects compared by ``id``: each is held by a weak reference whose
    callback marks the check failed when it goes, so no other object can
    have taken its ``id`` while the check still passes. A replayed decoding
    token of a 2-layer GPT-2 checks 32 modules and the 63 objects they hold."""

    __slots__ = ("refs", "training", "ids", "watched", "gone", "values")

    def __init__(self, modules: list):
        self.refs = tuple(weakref.ref(m) for m in modules)
        self.training = tuple(m.training for m in modules)
        tables = list(chain.from_iterable(map(_HOLDS, (vars(m) for m in modules))))
        # (a plain dict's values by the unbound method: half a methodcaller's cost; a
        # subclass, an OrderedDict of an older torch, in its own order)
        self.values = dict.values if all(type(t) is dict for t in tables) else _VALUES
        held = tuple(chain.from_iterable(map(self.values, tables)))
        self.ids = tuple(map(id, held))
        gone = self.gone = [False]

        def went(_, gone=gone):
            gone[0] = True

        # (None, and an object without weak references, held: their ids stay theirs)
        self.watched = tuple(_watch(x, went) for x in held)

    def changed(self) -> str | None:
        """What changed since the traced call; None: nothing."""
        if self.gone[0]:
            return "a module the step ran, or a parameter, buffer or submodule one held, is gone"
        try:
            dicts = tuple(map(vars, map(_call, self.refs)))
        except TypeError:  # (vars(None): a module is gone)
            return "a module the step ran is gone"
        try:
            if not all(map(operator.is_, map(_TRAINING, dicts), self.training)):
                return "a module's training flag changed (train()/eval())"
            ids = tuple(map(id, chain.from_iterable(map(self.values, chain.from_iterable(map(_HOLDS, dicts))))))
        except (KeyError, TypeError):  # (a table gone, or no longer a dict)
            return "a module the step ran lost its training flag or its parameter, buffer or module table"
        if ids != self.ids:
            return ("a module the step ran holds another parameter, buffer or submodule (one swapped or replaced, "
                    "added or removed)")
        return None


class _StepWatchers(threading.local):
    """The optimizer step hooks of the recordings running in this thread.

    torch iterates its process-wide optimizer hook dicts while it calls each
    hook, so a hook added or removed while another thread steps an optimizer
    raises "OrderedDict mutated during iteration" in that thread: the two
    hooks are registered once, and each thread's recordings are found here."""

    def __init__(self):
        self.active: list = []  # [(pre, post)], innermost last

    def add(self, pre, post):
        entry = (pre, post)
        self.active.append(entry)
        return entry

    def remove(self, entry):
        self.active.remove(entry)


_STEPS = _StepWatchers()


def _step_pre(o, a, k):
    for pre, _ in tuple(_STEPS.active):
        pre(o, a, k)


def _step_post(o, a, k):
    for _, post in tuple(_STEPS.active):
        post(o, a, k)


def install() -> None:
    """Register the two step hooks, once: at import, before a user's threads step
    optimizers (registering is itself a mutation), and after :func:`.optim.install`'s,
    so a recording's step begins after the learning rate is swapped in and ends after
    the step barrier is marked, as when it registered them itself."""
    if not _STEP_HOOKS:
        _STEP_HOOKS.append(_optimizer.register_optimizer_step_pre_hook(_step_pre))
        _STEP_HOOKS.append(_optimizer.register_optimizer_step_post_hook(_step_post))


_STEP_HOOKS: list = []


def _watch(x, went):
    try:
        return weakref.ref(x, went)
    except TypeError:
        return x


class _Plan:
    """A traced call: the core recording plus what torch adds (guards, gradients, results)."""

    @classmethod
    def trace(cls, fn, args, kwargs, flat, seen, optimizers, compare=False, inside=None):
        tensors = [x for x in flat if type(x) is Tensor]
        # parameters whose gradients to watch: those the step touched before, and the arguments
        known = dict(seen.items())
        for x in tensors:
            if x.requires_grad:  # (a parameter passed in: it is one by identity)
                known[id(x)] = x
        if inside is not None:
            for g in inside.param_groups:
                for p in g["params"]:
                    known.setdefault(id(p), p)
        before = {i: p.grad for i, p in known.items()}
        modules, optims = {}, {}
        groups = {}  # id(optimizer) -> its hyperparameters when its first step began: those the step used
        # (the module hook is process-wide: another thread's modules are not the step's)
        me = threading.get_ident()

        def called(m, a):
            if threading.get_ident() == me:
                modules.setdefault(id(m), m)

        h1 = torch.nn.modules.module.register_module_forward_pre_hook(called)
        stepping = []  # the step-log numbers each optimizer step made nodes between

        def pre(o, a, k):
            if id(o) not in optims:
                groups[id(o)] = _groups(o)  # (a scheduler the step steps after it changes them)
            optims.setdefault(id(o), o)
            optimizers.add(o)
            stepping.append([_capture.LOG.start + len(_capture.LOG.nodes), None])

        def post(o, a, k):
            if stepping and stepping[-1][1] is None:
                stepping[-1][1] = _capture.LOG.start + len(_capture.LOG.nodes)

        steps = _STEPS.add(pre, post)
        state0 = _global_state()
        for opt in list(optimizers):
            _optim.refresh(opt)  # a new learning rate: an input of the step, not a value it made
        # (the rates of an optimizer this step may meet first: a captured optimizer step
        # meets its own only, and another call's fills of optimizers it did not step are undone)
        filled = _optim.refresh_unfilled(None if inside is None else (inside,))
        with _tensor.MADE.collecting() as made, _optim.SchedulerSteps() as schedulers, \
                _attrreads.AttrReads(_a_tensor, profiled=True) as attrs, \
                _pyreads.Reads(fn, (torch.nn.Module,), also=attrs) as reads, \
                TRACE.cutter.holding():
            try:
                watch = _capture.begin([x._storage.handle for x in tensors], calls=inside is None)
                if inside is not None:
                    pre(inside, (), {})
                out = fn(*args, **kwargs)
                if inside is not None:
                    post(inside, (), {})
            finally:
                h1.remove()
                _STEPS.remove(steps)
        # an optimizer's numbers are its hyperparameters, which the plan guards
        contents = _capture.contents(watch, [r for r in stepping if r[1] is not None]) if compare else None
        modules = _survivors(modules, reads.selves)
        try:
            plan = cls(watch, made, known, before, modules, optims, state0, out, seen, schedulers, flat, groups)
            try:
                plan.python = _pyreads.Guards(reads.guards().checks + attrs.checks() + _held(reads.selves))
            except _pyreads.Blind as e:
                raise _capture.Refused(str(e)) from None
            plan.contents = contents
            # the modules it ran: those called, and those whose methods ran (a ModuleList iterated)
            plan.structure = _Modules(list(modules.values()) + [m for i, m in reads.selves.items()
                                                                if i not in modules and isinstance(m, torch.nn.Module)])
            if plan.complete:
                plan.key += (plan.python.key,)
            return plan, out
        except _capture.Refused as e:
            raise _capture.Refused(str(e), out, contents) from None
        finally:  # (once the plan has seen what live tensors hold at the end: the fill, not a value the step made)
            _optim.unfill(filled, optims)

    def __init__(self, watch, made, known, before, modules, optims, state0, out, seen, schedulers, flat, groups):
        try:
            _capture.check(watch)  # a barrier or an upload first: the clearest reason
        except _capture.Refused as e:
            raise _capture.Refused(e.args[0] + _metric_hint(schedulers)) from None
        if _global_state() != state0:
            raise _capture.Refused("the step changed grad mode, the default dtype or the thread count")
        for m in modules.values():
            for p in m.parameters():
                known.setdefault(id(p), p)
        for o in optims.values():
            for g in o.param_groups:
                for p in g["params"]:
                    known.setdefault(id(p), p)
            if any(isinstance(v, torch.Tensor) and type(v) is not Tensor for s in o.state.values() for v in s.values()):
                raise _capture.Refused(f"{type(o).__name__} keeps state in host tensors (a step counter it reads as a "
                                       f"Python number): a replay would neither update nor read it")
        self.complete = all(i in before for i in known)
        for i, p in known.items():
            if i not in seen and p.requires_grad:
                seen[i] = p
        self.schedulers = _scheduler_calls(schedulers)
        self.state = state0
        self.modules = [(weakref.ref(m), m.training) for m in modules.values()]
        # guarded as the step used them, not as it left them: a replay must not
        # pass with values a scheduler set after the recorded call's optimizer step
        self.optims = [(weakref.ref(o), _hyper(o, groups[i])) for i, o in optims.items()]
        fresh = _capture._fresh(watch)  # oldest first: replays make them in this order too
        fresh_ids = {id(h) for h in fresh}
        used: dict[int, Storage] = {}  # id(new handle) -> its storage
        # an argument's storage is the call's argument at every replay, not the recorded
        # call's (a gradient set from an argument, a view of an argument returned)
        arg_storage = {}
        for k, x in enumerate(flat):
            if type(x) is Tensor:
                arg_storage.setdefault(id(x._storage), k)

        def describe(t):
            """How to make ``t`` again: (id of its new handle, ("arg", k) or its old storage, view steps, layout)."""
            if type(t) is not Tensor:
                raise _capture.Refused(f"the step returns or sets a {type(t).__name__} that is not a lazy tensor")
            st = t._storage
            k = arg_storage.get(id(st))
            if k is not None:
                return (("arg", k), t._steps, t._key)
            if id(st.handle) in fresh_ids:
                if used.setdefault(id(st.handle), st) is not st:
                    raise _capture.Refused("two storages of the step's results share one handle")
                return (("new", id(st.handle)), t._steps, t._key)
            return (weakref.ref(st), t._steps, t._key)

        # gradients: a parameter's after the call is None, the one it had, or a new tensor;
        # one it had that was an argument is guarded as that argument (an optimizer's step
        # is given the gradients: new tensors every step)
        arg_at = {id(x): k for k, x in enumerate(flat) if type(x) is Tensor}
        self.grads = []
        for i, p in known.items():
            # found during this call: its state before is unknown (None; the key will not match)
            g0 = before.get(i)
            none0 = (g0 is None) if i in before else None
            g = p.grad
            if g is None:
                after = None
            elif g is g0:
                after = "same"
            else:
                after = describe(g)
            if after != "same":
                same = None
            elif id(g0) in arg_at:
                same = arg_at[id(g0)]
            else:
                same = weakref.ref(g0)
            self.grads.append((weakref.ref(p), p.requires_grad, none0, same, after))
        flat_out, self.out_spec = pytree.tree_flatten(out)
        self.outs = [describe(x) if isinstance(x, torch.Tensor) else ("value", x) for x in flat_out]
        accounted = {id(x) for x in flat_out} | {id(p.grad) for p in known.values()}
        _capture.refuse_strays(lambda: sum(1 for r in made if r() is not None and id(r()) not in accounted))
        kept = [h for h in fresh if id(h) in used]
        del fresh  # (it would keep the step's other handles alive)
        index = {id(h): k for k, h in enumerate(kept)}

        def renumber(desc):
            if desc is None or desc == "same" or desc[0] == "value" or type(desc[0]) is not tuple \
                    or desc[0][0] == "arg":
                return desc
            return (index[desc[0][1]],) + desc[1:]

        self.grads = [g[:4] + (renumber(g[4]),) for g in self.grads]
        self.outs = [renumber(o) for o in self.outs]
        self.rec = _capture.finish(watch, kept)
        self.strides = [used[id(h)].strides for h in kept]
        self.old = [d[0] for d in self.outs + [g[4] for g in self.grads]
                    if isinstance(d, tuple) and isinstance(d[0], weakref.ref)]
        self.key = self._key() if self.complete else object()  # incomplete: never equal

    def _key(self) -> tuple:
        def d(desc):
            if desc is None or desc == "same" or desc[0] == "value":
                return desc if desc is None or desc == "same" else ("value", repr(desc[1]))
            where, steps, layout = desc
            return (where if type(where) in (int, tuple) else id(where()), _views.steps_key(steps), layout)

        return (self.rec.key, self.state,
                tuple((id(r()), tr) for r, tr in self.modules),
                tuple((id(r()), h) for r, h in self.optims),
                tuple((id(p()), rg, n0, d(after)) for p, rg, n0, _, after in self.grads),
                str(self.out_spec), tuple(d(o) for o in self.outs), tuple(self.strides),
                tuple((id(r()), args, kwargs) for r, args, kwargs in self.schedulers))

    def attempt(self, flat):
        """The call's result, replayed; ``GUARDED`` (nothing changed) when a
        guard fails (a :class:`~lazycore.trace.replayer.Replayable`)."""
        changed = self.python.failed()
        if changed is not None:
            return _guarded(changed)
        if _global_state() != self.state:
            return _guarded("grad mode, the default dtype or the thread count changed")
        changed = self.structure.changed()
        if changed is not None:
            return _guarded(changed)
        for r, hyper in self.optims:
            o = r()
            if o is None or _hyper(o) != hyper:
                return _guarded("an optimizer's hyperparameters or state tensors changed" if o is not None
                                else "an optimizer the step stepped is gone")
        params = []
        for r, rg, none0, same, after in self.grads:
            p = r()
            if p is None or p.requires_grad != rg or (p.grad is None) != none0:
                return _guarded("a parameter is gone, or its requires_grad or whether it has a gradient changed")
            if same is not None and p.grad is not (flat[same] if type(same) is int else same()):
                return _guarded("a parameter's gradient is another tensor")
            params.append(p)
        for r in self.old:
            if r() is None:
                return _guarded("a tensor the step returned a view of is gone")
        for r, _, _ in self.schedulers:
            if r() is None:
                return _guarded("a learning-rate scheduler the step stepped is gone")
        for r, _ in self.optims:
            _optim.refresh(r())
        values = self.rec.replay([x._storage.handle for x in flat if type(x) is Tensor])
        if values is None:
            return _guarded("a tensor the step read or updated is gone, holds a value of another type, "
                            "or arguments alias differently")
        made = [Storage(LazyTensor(v, dev), strides) for v, dev, strides in zip(values, self.rec.kept, self.strides)]

        def make(desc):
            where, steps, layout = desc
            if type(where) is int:
                st = made[where]
            elif type(where) is tuple:  # ("arg", k)
                st = flat[where[1]]._storage
            else:
                st = where()
            return _new(st, steps, *layout)

        for p, (_, _, _, _, after) in zip(params, self.grads):
            if after is None:
                if p.grad is not None:
                    p.grad = None
            elif after != "same":
                p.grad = make(after)
        outs = [make(o) if o[0] != "value" else o[1] for o in self.outs]
        for r, args, kwargs in self.schedulers:
            r().step(*args, **dict(kwargs))
        return pytree.tree_unflatten(outs, self.out_spec)
