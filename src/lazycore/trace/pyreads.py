"""The Python state a traced call read, kept as guards a replay checks first.

A captured step bakes in every Python number it reads: a closed-over scale,
a module-level flag, a module's ``self.p``. Two traced calls that read the
same values record the same thing, and replays then assume the values stay.
:class:`Reads` watches a traced call (``sys.setprofile``, call events only,
the previous profiler kept running) and notes, for each function of user
code it entered (:func:`is_user_code`):

* the module globals its code loads (``LOAD_GLOBAL``);
* the cells it closes over, found through the function the call came from
  (the step itself, and functions held in its cells or globals);
* the attributes of its ``self`` (and of a frontend's module objects,
  whoever's code reads them).

:meth:`Reads.guards` turns them into :class:`Guards`: plain values (numbers,
strings, None, and small tuples, lists, dicts and sets of them) compared by
value, other globals and cell contents by identity (a rebound function, a
replaced model). Tensors, modules' parameters and optimizer state are the
frontend's to guard. What goes unseen here: state read by library code on
the user's behalf (a library global), and an attribute of an object other
than ``self`` that the step reaches through a local variable or a chain
(:mod:`.attrreads` watches those, given this profiler's events).
"""

from __future__ import annotations

import dis
import operator
import os
import sys
import sysconfig
import weakref
from itertools import chain
from types import FunctionType

from lazycore.ir.memo import Memo
from lazycore.ir.sourceloc import is_library

_PLAIN = (int, float, bool, str, bytes, complex, type(None))
_SMALL = 16
_NAMES = Memo("trace.global_names", 4096)
"""Code object -> the global names its bytecode loads."""


def _installed_folders() -> tuple[str, ...]:
    """Where installed packages and the standard library live: this interpreter's
    own folders, and every site folder on the path, which a venv made with
    ``--system-site-packages``, ``pip install --user``, a distribution's
    ``dist-packages`` or a ``.pth`` line adds (a library there is no user code:
    transformers' KV cache reads guarded as the user's kept its tensors alive,
    and capture never replayed a GPT-2 step)."""
    folders = {p for k, p in sysconfig.get_paths().items() if k in ("stdlib", "platstdlib", "purelib", "platlib")}
    folders.update(p for p in sys.path if os.path.basename(os.path.normpath(p)) in ("site-packages", "dist-packages"))
    return tuple({os.path.join(os.path.realpath(p), "") for p in folders if p})


_INSTALLED = _installed_folders()
_USER = Memo("trace.user_files", 4096)
"""File name -> whether it is user code (:func:`is_user_code`)."""


_OWN = ("lazycore", "lazycore.dialect", "lazycore.passes", "lazycore.frontends")
"""lazycore's packages: outside ``src/`` in a source checkout (``dialect/``,
``passes/``), so not library frames to the source locations, but no user code:
a traced call runs the op table's shape rules the first time it meets a
shape, and a ``self`` of theirs guarded would be a spec that differs from
one call to the next."""


def _own_folders() -> tuple[str, ...]:
    return tuple(os.path.join(os.path.realpath(os.path.dirname(m.__file__)), "")
                 for m in map(sys.modules.get, _OWN) if getattr(m, "__file__", None))


def is_user_code(filename: str) -> bool:
    """Code a user wrote: not a library frame (:func:`~lazycore.ir.sourceloc.is_library`),
    not an installed package or the standard library, not lazycore's own
    (:data:`_OWN`), not generated (``<string>``)."""
    user = _USER.get(filename)
    if user is None:
        real = os.path.realpath(filename)
        user = _USER.put(filename, not (is_library(filename) or filename.startswith("<")
                                        or real.startswith(_INSTALLED) or real.startswith(_own_folders())))
    return user


def _global_names(code) -> tuple[str, ...]:
    names = _NAMES.get(code)
    if names is None:
        found = {i.argval for i in dis.get_instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
        names = _NAMES.put(code, tuple(sorted(n for n in found if isinstance(n, str))))
    return names


def plain(value):
    """``value`` as a comparable snapshot when it is a plain value (or a small
    container of them); :data:`NOT_PLAIN` when it is not."""
    t = type(value)
    if t in _PLAIN:
        return (t, repr(value) if t is float or t is complex else value)  # nan equal to nan, -0.0 not to 0.0
    if t in (tuple, list, frozenset, set) and len(value) <= _SMALL:
        items = [plain(v) for v in value]
        if NOT_PLAIN not in items:
            return (t, tuple(items) if t in (tuple, list) else frozenset(items))
    elif t is dict and len(value) <= _SMALL:
        items = [(plain(k), plain(v)) for k, v in value.items()]
        if all(NOT_PLAIN not in kv for kv in items):
            return (t, tuple(items))
    return NOT_PLAIN


NOT_PLAIN = object()


class Blind(Exception):
    """The call could not be watched (the message says why)."""


class Reads:
    """Watch a traced call: ``with Reads(fn) as reads: fn(...)``."""

    def __init__(self, fn, library_selves: tuple = (), also=None):
        """``library_selves``: classes whose instances' attributes are guarded
        even where library code reads them (a frontend's modules: torch's
        ``Dropout.forward`` reads ``self.p``). ``also``: a watcher that wants
        call and return events too (:class:`.attrreads.AttrReads`, entered
        first), given them by this profiler rather than a second one."""
        self.fn = fn
        self.also = also
        self.library_selves = library_selves
        self.codes: dict = {}  # code -> its globals dict, for the user functions entered
        self.selves: dict[int, object] = {}  # id -> a ``self`` of a user method entered
        self._previous = None
        self.blind = False
        """A profiler in C (``cProfile``) was running: it cannot be chained from
        Python, so nothing was watched and :meth:`guards` raises."""

    def __enter__(self):
        self._previous = sys.getprofile()
        previous = self._previous
        if previous is not None and not callable(previous):
            self.blind = True
            return self
        codes, selves, library_selves = self.codes, self.selves, self.library_selves
        also_call = getattr(self.also, "on_call", None)
        also_return = getattr(self.also, "on_return", None)
        also_on = self.also.tracing if also_call is not None else None

        def on_event(frame, event, arg):
            if event == "call":
                code = frame.f_code
                user = is_user_code(code.co_filename)
                # (it wants the frames of user code, and any frame while it traces one)
                if also_call is not None and (user or also_on[0]):
                    also_call(frame)
                if user:
                    codes.setdefault(code, frame.f_globals)
                if code.co_argcount and code.co_varnames[0] == "self" and (user or library_selves):
                    me = frame.f_locals.get("self")
                    if me is not None and (user or isinstance(me, library_selves)):
                        selves.setdefault(id(me), me)
            elif event == "return" and also_return is not None:
                # (it wants the returns of frames it traces, and those to a frame it traces)
                if also_on[0]:
                    also_return(frame)
                else:
                    back = frame.f_back
                    if back is not None and back.f_trace is not None:
                        also_return(frame)
            if previous is not None:
                previous(frame, event, arg)

        sys.setprofile(on_event)
        return self

    def __exit__(self, *exc):
        if not self.blind:
            sys.setprofile(self._previous)

    def guards(self) -> "Guards":
        """The guards; :class:`Blind` when a C profiler kept the call from being watched."""
        if self.blind:
            raise Blind("a profiler (cProfile) was running: the Python state the step reads could not be watched")
        checks = []
        for code, g in self.codes.items():
            for name in _global_names(code):
                if name in g:
                    checks.append(_check(f"global '{name}' of {_where(code)}", _Global(g, name), g[name]))
        for f in _functions(self.fn, self.codes):
            code = f.__code__
            for name, cell in zip(code.co_freevars, f.__closure__ or ()):
                try:
                    value = cell.cell_contents
                except ValueError:
                    continue
                checks.append(_check(f"closed-over '{name}' of {_where(code)}", _Cell(cell), value))
        for me in self.selves.values():
            try:
                ref = weakref.ref(me)
                attrs = vars(me)
            except TypeError:
                continue  # no weak reference or no __dict__: nothing of its own to guard
            for name, value in attrs.items():
                snap = plain(value)
                if snap is not NOT_PLAIN:
                    checks.append((f"attribute '{name}' of a {type(me).__name__}", _Attr(ref, name, value), snap,
                                   False))
        return Guards(checks)


def _functions(fn, codes) -> list:
    """The step and the user functions held in its cells or in the globals
    of the code entered, whose code ran: the ones whose cells can be read again."""
    out, seen = [], set()
    stack = [fn]
    for g in {id(g): g for g in codes.values()}.values():
        stack.extend(v for v in g.values() if type(v) is FunctionType)
    while stack:
        f = stack.pop()
        f = getattr(f, "__func__", f)
        if type(f) is not FunctionType or id(f) in seen:
            continue
        seen.add(id(f))
        if f.__code__ in codes or f is fn:
            out.append(f)
            for cell in f.__closure__ or ():
                try:
                    stack.append(cell.cell_contents)
                except ValueError:
                    pass
    return out


def _where(code) -> str:
    return f"{code.co_qualname} ({code.co_filename}:{code.co_firstlineno})"


def _check(label: str, read, value):
    snap = plain(value)
    if snap is NOT_PLAIN:
        return (label, read, value, True)  # by identity (holding it: an id can be reused)
    return (label, read, snap, False)


_GONE = object()
_UNSNAPPED = object()
"""A check's value when the traced call's object was not kept to compare by
identity (not immutable): never what a read returns, not even :data:`_GONE`
(an attribute deleted since then is a change)."""


class _Global:
    __slots__ = ("g", "name")

    def __init__(self, g, name):
        self.g, self.name = g, name

    def __call__(self):
        return self.g.get(self.name, _GONE)


class _Cell:
    __slots__ = ("cell",)

    def __init__(self, cell):
        self.cell = cell

    def __call__(self):
        try:
            return self.cell.cell_contents
        except ValueError:
            return _GONE


class _Attr:
    """An attribute of a ``self``; what it was when the object is gone (an
    object the step made, a dataclass of the batch: its attributes are the
    step's own work; one the step reaches from outside is reached through a
    global, a cell or an attribute, which is guarded itself)."""

    __slots__ = ("ref", "name", "then")

    def __init__(self, ref, name, then):
        self.ref, self.name, self.then = ref, name, then

    def __call__(self):
        me = self.ref()
        return self.then if me is None else vars(me).get(self.name, _GONE)


def _immutable(value) -> bool:
    t = type(value)
    return t in _PLAIN or (t is tuple or t is frozenset) and all(map(_immutable, value))


class Guards:
    """Checks of the Python state a traced call read (see :class:`Reads`)."""

    __slots__ = ("checks", "key", "_now", "_selves", "_rest", "_refs", "_fetches", "_thens", "_empties", "_at",
                 "_rest_at")

    def __init__(self, checks):
        self.checks = checks
        self.key = tuple((label, id(expected) if same else expected) for label, _, expected, same in checks)
        """Equal for two calls that read the same state."""
        # a number or string read now whose snapshot is the expected one: the same
        # object at a replay is unchanged, without taking its snapshot again
        self._now = []
        for _, read, expected, same in checks:
            now = read() if not same else _UNSNAPPED
            self._now.append(now if _immutable(now) and plain(now) == expected else _UNSNAPPED)
        self._selves, self._rest, self._at, self._rest_at = _by_self(checks, self._now)
        # the same groups as one pass of C loops (:meth:`_unchanged`): every fetch gives a tuple
        self._refs = tuple(ref for ref, _, _, _ in self._selves)
        self._fetches = tuple(fetch for _, fetch, _, _ in self._selves)
        self._thens = tuple(chain.from_iterable(then for _, _, then, _ in self._selves))
        self._empties = tuple(chain.from_iterable(empties for _, _, _, empties in self._selves))

    def failed(self) -> str | None:
        """What changed since the traced call (None: nothing)."""
        if self._unchanged():
            return None
        # object by object: only the checks of an object whose values are not all the
        # very ones read are compared by value (a plan whose guard fails at every call,
        # transformers' model after a generate() of another length, costs about one
        # that passes, not a snapshot of each of its hundreds of attributes)
        checks, nows = self.checks, self._now
        for (ref, fetch, then, empties), at in zip(self._selves, self._at):
            me = ref()
            if me is None:
                continue
            try:
                if all(map(operator.is_, fetch(vars(me)), then)) and not any(empties):
                    continue
            except (KeyError, TypeError):
                pass
            for k in at:
                why = _changed(checks[k], nows[k])
                if why is not None:
                    return why
        for k in self._rest_at:
            why = _changed(checks[k], nows[k])
            if why is not None:
                return why
        return None

    def _unchanged(self) -> bool:
        """Every check passes, the attributes of each ``self`` taken together:
        one look-up of the object and its ``__dict__``, the values fetched in
        one call and compared by identity with the objects read (an immutable
        value, or an empty container still empty). False where any differs
        (:meth:`failed` then compares that object's checks by value: a value
        equal to its snapshot in another object passes there).

        All the objects at once first, in C loops (``map`` over the weak
        references, ``vars``, the fetches, ``is``): a replayed decoding token
        of transformers' GPT-2 checks 416 attributes of 34 objects, its model's
        modules and configs, and a Python loop per object cost most of that.
        An object gone (``vars(None)``) or an attribute gone leaves the loop to
        the one object at a time below, which tells them apart."""
        try:
            same = all(map(operator.is_, chain.from_iterable(map(_call, self._fetches, map(vars, map(
                _call, self._refs)))), self._thens))
        except (KeyError, TypeError):
            same = False
        if same:
            if any(self._empties):
                return False
            return self._rest_unchanged()
        for ref, fetch, then, empties in self._selves:
            me = ref()
            if me is None:
                continue  # (gone: what it held was the step's own, :class:`_Attr`)
            try:
                now = fetch(vars(me))
            except (KeyError, TypeError):
                return False
            if not all(map(operator.is_, now, then)) or any(empties):
                return False
        return self._rest_unchanged()

    def _rest_unchanged(self) -> bool:
        for (label, read, expected, same), then, items in self._rest:
            now = read()
            if same:
                if now is not expected:
                    return False
            elif now is not then and (items is None or not _same_items(now, items)) and plain(now) != expected:
                return False
        return True


_CONTAINERS = (dict, list, set)


def _changed(check, then) -> str | None:
    """What one check says changed (``then``: the immutable object it read, or :data:`_UNSNAPPED`); None: nothing."""
    label, read, expected, same = check
    now = read()
    if same:
        return f"{label} is another object" if now is not expected else None
    return f"{label} changed" if now is not then and plain(now) != expected else None


_call = operator.call


def _items(value):
    """A plain container of immutable values as the very objects it holds:
    ``(the container, its items or keys, its values or None)``, or None (a
    container holding containers, or not a container)."""
    t = type(value)
    if t is dict:
        keys, values = tuple(value), tuple(value.values())
        return (value, keys, values) if all(map(_immutable, keys)) and all(map(_immutable, values)) else None
    if t in (list, tuple, set, frozenset):
        items = tuple(value)
        return (value, items, None) if all(map(_immutable, items)) else None
    return None


def _same_items(now, items) -> bool:
    """``now`` is the container :func:`_items` took and holds the very objects
    it held, in the same order: its snapshot would be the same (a dict or list
    changed in place holds another object somewhere, or another count)."""
    obj, keys, values = items
    return (now is obj and len(now) == len(keys) and all(map(operator.is_, now, keys))
            and (values is None or all(map(operator.is_, now.values(), values))))


def _by_self(checks, nows) -> tuple[list, list, list, tuple]:
    """The attribute checks whose value is an immutable object or an empty
    container, by the ``self`` they read (:meth:`Guards._unchanged`), and the
    other checks with their immutable objects and, for a plain container of
    immutable values, the objects it holds (:func:`_items`); and the
    positions in ``checks`` of each group's checks and of the others."""
    selves: dict = {}
    rest, rest_at = [], []
    for k, (check, then) in enumerate(zip(checks, nows)):
        _, read, expected, same = check
        if type(read) is _Attr and not same:
            empty = False
            if then is _UNSNAPPED:
                now = read()
                empty = type(now) in _CONTAINERS and not now and plain(now) == expected
                then = now if empty else _UNSNAPPED
            if then is not _UNSNAPPED:
                names, thens, empties, at = selves.setdefault(id(read.ref), (read.ref, [], [], [], []))[1:]
                names.append(read.name)
                thens.append(then)
                at.append(k)
                if empty:
                    empties.append(then)
                continue
        items = None
        if not same and then is _UNSNAPPED:
            now = read()
            if plain(now) == expected:
                items = _items(now)
        rest.append((check, then, items))
        rest_at.append(k)
    grouped, grouped_at = [], []
    for ref, names, thens, empties, at in selves.values():
        if len(names) == 1:  # (a tuple, as itemgetter gives for two or more)
            names, thens = names * 2, thens * 2
        grouped.append((ref, operator.itemgetter(*names), tuple(thens), tuple(empties)))
        grouped_at.append(tuple(at))
    return grouped, rest, grouped_at, tuple(rest_at)
