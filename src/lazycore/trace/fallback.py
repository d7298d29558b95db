"""Running a function lazycore has no lowering for: the host library on materialized inputs.

Both frontends fall back the same way: count the call with the user's line,
bring every lazy argument to the host (a barrier if it is pending), call the
host library (eager torch, NumPy), write back the arguments it changed in
place, and upload its array results, so the program goes on lazily after it.
What differs is only how a frontend's values cross, its :class:`Bridge`.
"""

from __future__ import annotations

from lazycore.ir import events, sourceloc


class Bridge:
    """How a frontend's values cross to the host library and back."""

    lazy: type
    """The frontend's lazy array type: these arguments are materialized."""
    host: type
    """The host library's array type: these results are uploaded."""

    def to_host(self, x, call: "HostCall"):
        """A lazy argument's value as a host array (an implicit barrier)."""
        raise NotImplementedError

    def host_arg(self, x, call: "HostCall"):
        """Any other argument as the host library takes it (torch: the lazy device is the CPU)."""
        return x

    def changed(self, call: "HostCall", func):
        """``(lazy, host)`` for each argument the host library changed in place."""
        raise NotImplementedError

    def write(self, lazy, host, call: "HostCall") -> None:
        """Make ``host`` (an argument's changed copy) the new value of ``lazy``."""
        raise NotImplementedError

    def from_host(self, host, call: "HostCall"):
        """A host array result as a new lazy array (or as it is, where it cannot be one)."""
        raise NotImplementedError


class HostCall:
    """One fallback call: the arguments on both sides, for the bridge to consult."""

    __slots__ = ("args", "kwargs", "host_args", "host_kwargs", "inputs", "device", "notes")

    def __init__(self, args, kwargs):
        self.args, self.kwargs = args, kwargs
        self.host_args = self.host_kwargs = None
        self.inputs: list = []
        """``(lazy, host)`` for each lazy argument, in argument order."""
        self.device = None
        """The first lazy argument's device (a bridge's :meth:`~Bridge.host_arg` may set it)."""
        self.notes: dict = {}
        """The bridge's own state for this call (NumPy's copies of the inputs before it)."""


def run(name: str, func, args, kwargs, bridge: Bridge):
    """``func(*args, **kwargs)`` on the host, counted as ``name`` at the user's line."""
    events.fallback(name, sourceloc.user_location())
    call = HostCall(args, kwargs)
    lazy, to_host, host_arg, inputs = bridge.lazy, bridge.to_host, bridge.host_arg, call.inputs

    def down(x):
        if isinstance(x, lazy):
            h = to_host(x, call)
            inputs.append((x, h))
            if call.device is None:
                call.device = x.device
            return h
        if isinstance(x, (list, tuple)):
            return _same_kind(x, map(down, x))
        if isinstance(x, dict):
            return {k: down(v) for k, v in x.items()}
        return host_arg(x, call)

    call.host_args = down(args)
    call.host_kwargs = down(kwargs)
    out = func(*call.host_args, **call.host_kwargs)
    for x, h in bridge.changed(call, func):
        bridge.write(x, h, call)
    # a result that is an argument's host copy (``out=``, an in-place op) is that argument
    arguments = {id(h): x for x, h in inputs}
    host, from_host = bridge.host, bridge.from_host

    def up(o):
        if isinstance(o, host):
            x = arguments.get(id(o))
            return x if x is not None else from_host(o, call)
        if isinstance(o, (list, tuple)):
            return _same_kind(o, map(up, o))
        return o

    return up(out)


def _same_kind(seq, items):
    """``items`` as a sequence of ``seq``'s type: a named tuple (NumPy's ``EighResult``,
    torch's ``return_types``) takes them as separate arguments."""
    if isinstance(seq, tuple) and hasattr(seq, "_fields"):
        return type(seq)(*items)
    return type(seq)(items)
