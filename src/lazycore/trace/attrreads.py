"""Attribute reads a traced call's own code makes, kept as guards a replay checks first.

:mod:`.pyreads` guards the globals and closed-over cells user code loads
and the attributes of a ``self``; an attribute reached any other way, through
a local variable, an argument of a helper, a global object's chain
(``cfg.scale``, ``c = cfg; inner(c)`` reading ``c.scale``, ``holder.cfg.scale``),
is a Python value the recording bakes in as well. :class:`AttrReads`
watches a traced call with ``sys.settrace``, opcode events turned on only in
frames of user code (:func:`.pyreads.is_user_code`) whose bytecode has an
attribute load on a variable or on such a load (``LOAD_ATTR``/``LOAD_METHOD``
after ``LOAD_FAST``, ``LOAD_DEREF``, ``LOAD_GLOBAL``, ``LOAD_NAME`` or an
attribute load): just before the load runs, the object it reads from is the
variable's current value (or the link before it in the chain), and the value
it reads is looked up the way ``object.__getattribute__`` finds it, without
running any code (an instance's ``__dict__``, a ``__slots__`` member, a plain
class attribute, a module's dict). Each read becomes a guard on that object:
a plain value (:func:`.pyreads.plain`) by value, any other object by
identity (a replaced config, a rebound function), methods of the class not at
all. The value is the one the call read, not the one it left. A guard whose
object is gone passes: the object was the call's own (made by the step, its
attributes are the step's computation) or it was reached through a link that
is itself guarded.

Not seen: an attribute of a call's result (``make_cfg().scale``), of a
value the code picks by a branch inside one expression (``(a if f else
b).x``), one computed by a property or ``__getattr__`` (a property's own code,
when it is user code, is watched like any other), and attributes read by
library code. A tracer set before the call (a debugger, coverage) keeps
running: its events are passed on.
"""

from __future__ import annotations

import dis
import os
import sys
import types
import weakref

from lazycore.ir.memo import Memo

from .pyreads import NOT_PLAIN, is_user_code, plain

_BASES = {"LOAD_FAST": "local", "LOAD_DEREF": "local", "LOAD_CLASSDEREF": "local", "LOAD_GLOBAL": "global",
          "LOAD_NAME": "name"}
_SITES = Memo("trace.attribute_sites", 4096)
"""Code object -> {offset: (name, base, line)} of its attribute loads on variables and chains."""

_UNKNOWN = object()
_METHOD = object()


_OURS = Memo("trace.own_files", 4096)
"""File name -> whether its reads are watched (:func:`_watched`)."""


def _watched(filename: str) -> bool:
    """User code (:func:`.pyreads.is_user_code`), but not lazycore's own
    folders outside ``src`` (its dialect and passes run during a traced call
    when a shape is new)."""
    ours = _OURS.get(filename)
    if ours is None:
        roots = tuple(os.path.join(os.path.dirname(m.__file__), "")
                      for m in map(sys.modules.get, ("lazycore", "lazycore.dialect", "lazycore.passes",
                                                     "lazycore.frontends"))
                      if m is not None and getattr(m, "__file__", None))
        ours = _OURS.put(filename, is_user_code(filename) and not os.path.realpath(filename).startswith(
            tuple(os.path.realpath(r) + os.sep for r in roots)))
    return ours


def _sites(code) -> dict:
    sites = _SITES.get(code)
    if sites is None:
        sites = {}
        prev = None
        extended = None  # the offset of an EXTENDED_ARG run before an instruction (its trace event)
        for ins in dis.get_instructions(code):
            if ins.opname == "EXTENDED_ARG":
                if extended is None:
                    extended = ins.offset
                continue
            if ins.opname in ("LOAD_ATTR", "LOAD_METHOD") and prev is not None and not ins.is_jump_target:
                base = None
                if prev.opname in _BASES:
                    base = (_BASES[prev.opname], prev.argval)
                elif prev.opname in ("LOAD_ATTR", "LOAD_METHOD") and prev.offset in sites:
                    base = ("chain", prev.offset)
                if base is not None:
                    line = ins.positions.lineno if ins.positions is not None else None
                    site = (ins.argval, base, line)
                    sites[ins.offset] = site
                    if extended is not None:
                        sites[extended] = site
            prev = ins
            extended = None
        sites = _SITES.put(code, sites)
    return sites


def lookup(obj, name: str):
    """``getattr(obj, name)`` where it runs no code: the value, :data:`_METHOD`
    for a function (or other non-data descriptor) of the class, or
    :data:`_UNKNOWN` (a property, ``__getattr__``, a class with a
    ``__getattribute__`` of its own, a missing attribute)."""
    if type(obj) is types.ModuleType:
        return obj.__dict__.get(name, _UNKNOWN)
    tp = type(obj)
    found = _UNKNOWN
    if tp.__getattribute__ is not object.__getattribute__ and not isinstance(obj, type):
        return _UNKNOWN  # (a lookup of its own: a transformers config's attribute_map)
    if isinstance(obj, type):  # a class attribute read on the class
        try:
            mro = type.__dict__["__mro__"].__get__(obj)
        except (AttributeError, TypeError):
            return _UNKNOWN
        for k in mro:
            if name in k.__dict__:
                found = k.__dict__[name]
                break
        if found is _UNKNOWN:
            return _UNKNOWN
        return _METHOD if hasattr(type(found), "__get__") else found
    for k in tp.__mro__:
        d = k.__dict__
        if name in d:
            found = d[name]
            break
    if found is not _UNKNOWN:
        kind = type(found)
        if hasattr(kind, "__get__") and (hasattr(kind, "__set__") or hasattr(kind, "__delete__")):
            if kind is types.MemberDescriptorType:  # a __slots__ member
                try:
                    return found.__get__(obj, tp)
                except AttributeError:
                    return _UNKNOWN
            return _UNKNOWN  # a property or another data descriptor: it runs code
    try:
        own = object.__getattribute__(obj, "__dict__")
    except (AttributeError, TypeError):
        own = None
    if type(own) is dict and name in own:
        return own[name]
    if found is _UNKNOWN:
        return _UNKNOWN  # (``__getattr__``, or an AttributeError)
    return _METHOD if hasattr(type(found), "__get__") else found


class AttrReads:
    """Watch a traced call: ``with AttrReads(skip) as reads: fn(...)``, then
    :meth:`checks` (for :class:`.pyreads.Guards`). ``skip(obj)``: objects
    whose attributes are the frontend's to guard (tensors)."""

    def __init__(self, skip=lambda obj: False, profiled: bool = False):
        """``profiled``: a profiler entered next calls :attr:`on_call` and
        :attr:`on_return` (:class:`.pyreads.Reads` with ``also=``)."""
        self.skip = skip
        self.profiled = profiled
        self.on_call = self.on_return = None
        self.tracing = [False]
        """Whether tracing is on (a watched frame runs): while it is not, only
        a user frame's call and a return to a frame with a trace function
        can turn it on."""
        self.reads: dict = {}  # (id(obj), name) -> (obj, name, value, label)
        self._previous = None
        self._last = None  # (frame, offset, value) of the last load seen: a chain's next link reads from it

    def __enter__(self):
        previous = self._previous = sys.gettrace()
        self._previous_profile = sys.getprofile()
        observe = self._observe
        me = self

        def tracer(frame, theirs):
            """The frame's trace function (opcode events), or None when it has no site."""
            code = frame.f_code
            if not _watched(code.co_filename):
                return None
            sites = _sites(code)
            if not sites:
                return None
            frame.f_trace_opcodes = True
            if theirs is None:
                frame.f_trace_lines = False

            def local(frame, event, arg):
                nonlocal theirs
                if event == "opcode":
                    site = sites.get(frame.f_lasti)
                    if site is not None:
                        observe(frame, frame.f_lasti, site)
                elif theirs is not None:
                    theirs = theirs(frame, event, arg)
                return local

            local.lazycore_attrreads = me  # (a generator's frame keeps an earlier watcher's)
            return local

        if previous is not None or not callable(self._previous_profile) and self._previous_profile is not None:
            # a tracer runs already (a debugger, coverage): chained, every frame traced
            def on_call(frame, event, arg):
                theirs = previous(frame, event, arg) if previous is not None else None
                if event != "call":
                    return theirs
                return tracer(frame, theirs) or theirs

            sys.settrace(on_call)
            self.on_call = self.on_return = None
            return self

        # Tracing (line or opcode events) makes every frame of every function
        # slower, torch's Python included: it is on only while a watched frame
        # runs. Call and return events (a profiler's: :class:`.pyreads.Reads`
        # given this as ``also``, or one of our own) turn it on and off.
        settrace = sys.settrace
        on = self.tracing

        def global_trace(frame, event, arg):
            return None  # (frames get their tracer at their call event)

        def on_call(frame):
            local = frame.f_trace
            if getattr(local, "lazycore_attrreads", None) is not me:
                local = tracer(frame, None)
                if local is not None:
                    frame.f_trace = local
            want = local is not None
            if want != on[0]:
                on[0] = want
                settrace(global_trace if want else None)

        def on_return(frame):
            back = frame.f_back
            want = back is not None and getattr(back.f_trace, "lazycore_attrreads", None) is me
            if want != on[0]:
                on[0] = want
                settrace(global_trace if want else None)

        self.on_call, self.on_return = on_call, on_return
        if not self.profiled:
            profile = self._previous_profile

            def on_event(frame, event, arg):
                if event == "call":
                    on_call(frame)
                elif event == "return":
                    on_return(frame)
                if profile is not None:
                    profile(frame, event, arg)

            sys.setprofile(on_event)
        return self

    def __exit__(self, *exc):
        if not self.profiled:
            sys.setprofile(self._previous_profile)
        sys.settrace(self._previous)
        self.tracing[0] = False
        self.on_call = self.on_return = None
        self._last = None

    def _observe(self, frame, offset, site) -> None:
        name, (kind, where), line = site
        try:
            if kind == "chain":
                last = self._last
                if last is None or last[0] is not frame or last[1] != where:
                    self._last = None
                    return
                obj = last[2]
            elif kind == "local":
                obj = frame.f_locals.get(where, _UNKNOWN)
            else:
                g = frame.f_globals if kind == "global" else frame.f_locals
                obj = g.get(where, _UNKNOWN)
                if obj is _UNKNOWN:
                    obj = frame.f_globals.get(where, _UNKNOWN)
                if obj is _UNKNOWN:
                    b = frame.f_builtins
                    obj = b.get(where, _UNKNOWN) if isinstance(b, dict) else _UNKNOWN
            if obj is _UNKNOWN or self.skip(obj):
                self._last = None
                return
            value = lookup(obj, name)
            self._last = (frame, offset, value) if value is not _UNKNOWN and value is not _METHOD else None
            if value is _UNKNOWN or value is _METHOD:
                return
            key = (id(obj), name)
            if key not in self.reads:
                label = f"attribute '{name}' of a {type(obj).__name__} read at {frame.f_code.co_filename}:{line}"
                self.reads[key] = (obj, name, value, label)
        except Exception:  # (a tracer that raises would stop tracing the user's code)
            self._last = None

    def checks(self) -> list:
        """:class:`.pyreads.Guards` entries: (label, read, expected, False)."""
        out = []
        for obj, name, value, label in self.reads.values():
            snap = plain(value)
            read = _Read(obj, name, value, snap is NOT_PLAIN)
            out.append((label, read, (bool, True) if snap is NOT_PLAIN else snap, False))
        self.reads = {}
        return out


class _Read:
    """The attribute now: the value (by value), or whether it is the object
    read (by identity); what was read when the object is gone."""

    __slots__ = ("obj", "name", "value", "same")

    def __init__(self, obj, name, value, same):
        self.name, self.same = name, same
        self.obj = _ref(obj)
        self.value = _ref(value) if same else value

    def __call__(self):
        obj = self.obj()
        if obj is None:
            return True if self.same else self.value
        now = lookup(obj, self.name)
        if not self.same:
            return now
        value = self.value()
        return value is not None and now is value


def _ref(x):
    try:
        return weakref.ref(x)
    except TypeError:
        return lambda: x  # (no weak reference: held)
