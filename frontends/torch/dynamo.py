"""``torch.compile(fn, backend="lazycore")``: dynamo's graphs run as lazycore programs.

    compiled = torch.compile(model, backend="lazycore")
    out = compiled(x)                     # CPU tensors in, CPU tensors out

Dynamo captures the Python function as FX graphs (breaking the graph where it
cannot trace: ``print``, ``.item()``, ``loss.backward()``) and guards each one
(sizes, dtypes, the Python values it read); a failed guard traces a new graph.
AOTAutograd (:func:`torch._dynamo.backends.common.aot_autograd`, as
PyTorch/XLA's ``openxla`` backend does) turns each graph into functional ATen
graphs: one for inference, or a forward and a backward for training. In-place
updates of inputs come back as outputs, which AOTAutograd copies into them.

Each ATen graph becomes a :class:`Program`. Its first call with a kind of
arguments runs the graph on lazy tensors (the frontend's per-op tracing)
while :mod:`lazycore.capture` records the nodes it made; later calls replay
the recording on the new inputs, with no op dispatched, and the barrier finds
the executable in the compile cache: one lazy graph and one executable per
ATen graph and kind of arguments.

Where the tensors live: dynamo traces with fake tensors, which PyTorch makes
for no ``lazy`` device (its MetaConverter refuses them), and it models only
plain tensors and traceable wrapper subclasses, which lazycore's tensor is
not. So the graphs dynamo hands over hold host tensors: a program uploads its
inputs, runs, and downloads its results to the devices the graph said,
except the activations a forward saves for its backward, which stay on the
lazy device in between. A compiled function called with lazy tensors runs as
written, under any backend, ``fullgraph=True`` too
(:func:`_run_lazy_frames_as_written`): dynamo would take them for opaque
objects and break its graph at every op on them (lazycore's own frames it
never traces), so lazycore traces them per op and the results stay lazy. For a whole step on lazy tensors,
``lazycore.torch.capture`` is the way (docs/guides/torch.md, "torch.compile").
"""

from __future__ import annotations

import functools

import numpy
import torch
from torch._dynamo import trace_rules

from lazycore.ir.context import LOCK
from lazycore.ir.tensor import LazyTensor
from lazycore.ir.context import TRACE
from lazycore.trace import capture as _capture
from lazycore.trace import core
from lazycore.trace import views as _views

from . import dtypes
from .capture import _arg_key
from .tensor import Tensor, device as _lazy_device, from_host, lc_device, read, to_host, wrap_layout

_KINDS_KEPT = 8
"""Kinds of arguments (sizes, dtypes, Python values) a program keeps recordings for."""

# Dynamo runs lazycore's own Python as it is and never traces it: a function
# called with lazy tensors reaches lazycore's dispatch from dynamo's resumed
# frames, and tracing that would hand this backend graphs of meta tensors.
# (This module loads when dynamo looks the backend up, before any frame.)
for _package in ("lazycore", "lazycore.frontends", "lazycore.dialect", "lazycore.passes"):
    trace_rules.add(_package)


def _holds_lazy(x, depth: int = 2) -> bool:
    """Whether ``x`` is a lazy tensor, or a list, tuple or dict holding one
    (``depth`` levels down: einsum's operands, an optimizer's state lists)."""
    if type(x) is Tensor:
        return True
    if depth and type(x) in (list, tuple):
        return any(_holds_lazy(v, depth - 1) for v in x)
    if depth and type(x) is dict:
        return any(_holds_lazy(v, depth - 1) for v in list(x.values()))
    return False


def _run_lazy_frames_as_written() -> None:
    """A frame dynamo is asked to compile whose arguments or locals hold lazy
    tensors runs as written, under any backend (as its graph would break at
    each op on them anyway, module docs): lazycore traces its ops, so the
    function is compiled by lazycore's own barrier. Dynamo's own rule only
    breaks the graph there, and a ``fullgraph=True`` function raised at its
    first op on a lazy tensor instead (timm's ``Kron`` optimizer compiles its
    preconditioner's helpers so: "Failed to convert args/kwargs to proxy").
    Only that call is left alone, with the calls it makes: a call of the same
    code with host tensors is compiled."""
    from torch._dynamo import convert_frame
    from torch._dynamo.types import ConvertFrameReturn, FrameAction, FrameExecStrategy

    cls = convert_frame.ConvertFrameAssert
    inner = cls.__call__
    if getattr(inner, "_lazycore", False):
        return

    from torch._C._dynamo.eval_frame import set_fullgraph_compiled_frame_count as frames_compiled

    @functools.wraps(inner)
    def __call__(self, frame, *args, **kwargs):
        if any(_holds_lazy(v) for v in list(frame.f_locals.values())):
            # a fullgraph function whose frame this is counts it compiled (by
            # lazycore), not "found no compiled frames" (-1: not counting)
            count = frames_compiled(-1)
            frames_compiled(count + 1 if count >= 0 else count)
            # (the frames it calls too: a generator expression there raised under fullgraph)
            return ConvertFrameReturn(FrameExecStrategy(FrameAction.SKIP, FrameAction.SKIP), apply_to_code=False,
                                      skip_reason="lazy tensors in the frame: lazycore traces it as written")
        return inner(self, frame, *args, **kwargs)

    __call__._lazycore = True
    cls.__call__ = __call__


_run_lazy_frames_as_written()


def lazycore_backend(gm: torch.fx.GraphModule, example_inputs, **kwargs):
    """The dynamo backend (``torch_dynamo_backends`` entry point ``lazycore``):
    ``gm`` through AOTAutograd, each ATen graph a :class:`Program`."""
    return _aot()(gm, example_inputs, **kwargs)


@functools.cache
def _aot():
    from torch._dynamo.backends.common import aot_autograd

    from .lowering import lookup, register
    from .ops import nn

    fma = torch.ops.prims.fma.default  # (made by torch._inductor, which aot_autograd loads)
    if lookup(fma) is None:
        register(fma, nn.fma)
    # keep_inference_input_mutations: an inference graph updates its inputs
    # itself (an optimizer step's parameters and state), and the program writes
    # them back (_write_back); else AOTAutograd's epilogue copy_()s each one from
    # a downloaded result: a torch kernel per tensor, slow beside XLA's threads
    return aot_autograd(fw_compiler=functools.partial(_compile, kind="forward"),
                        bw_compiler=functools.partial(_compile, kind="backward"),
                        inference_compiler=functools.partial(_compile, kind="inference"),
                        keep_inference_input_mutations=True)


def _compile(gm: torch.fx.GraphModule, example_inputs, kind: str) -> "Program":
    returned = None
    if kind == "forward":
        # outputs past AOTAutograd's returns are the activations the backward reads
        from torch._guards import TracingContext

        meta = getattr(TracingContext.try_get(), "fw_metadata", None)
        if meta is not None:
            returned = meta.num_forward
    return Program(gm, kind, returned)


class Program:
    """One ATen graph, run as a lazycore program (see the module docs).

    ``returned``: how many leading outputs go back to the graph's devices
    (None: all); the rest stay lazy (a forward's saved activations)."""

    def __init__(self, gm: torch.fx.GraphModule, kind: str, returned: int | None = None):
        self.kind = kind
        """``"forward"``, ``"backward"`` or ``"inference"``."""
        # AOTAutograd's calling convention: one list of arguments, which the callee
        # empties (host inputs can go while the program runs); on the instance, so
        # the wrappers AOTAutograd puts around the backward (functools.wraps) keep it
        self._boxed_call = True
        self.device = _lazy_device()
        self._lc_device = lc_device(self.device)
        self._homes = _homes(gm, returned)
        self._mutated = _mutated_inputs(gm)
        _to_lazy_device(gm, self.device)
        self.gm = gm
        self._recordings: dict = {}  # argument key -> (Recording, output spec)
        self.traces = 0
        """Calls that ran the graph op by op."""
        self.replays = 0
        """Calls that replayed a recording."""
        self.why: str | None = None
        """Why the last traced call cannot be replayed (None: it can)."""

    def __call__(self, args: list):
        lazy = [from_host(a.detach(), self.device) if isinstance(a, torch.Tensor) and type(a) is not Tensor else a
                for a in args]  # as data, 0-dim ones too: a 0 or 1 would be baked in as a Python number is
        updated = [(args[i], lazy[i]) for i in self._mutated if type(args[i]) is not Tensor]
        args.clear()
        outs = self._run(lazy)
        outs = [_download(o, home) if home is not None else o for o, home in zip(outs, self._homes)]
        for host, new in updated:
            _write_back(host, new)
        return outs

    def _run(self, args) -> list:
        key = _arg_key(args, None)  # (capture's: tensors by layout, Python values by value)
        got = self._recordings.get(key) if key is not None else None
        if got is not None:
            rec, spec = got
            with LOCK:  # a replay's values are raw until its tensors hold them (docs/threads.md)
                values = rec.replay([a._storage.handle for a in args if type(a) is Tensor])
                if values is not None:
                    self.replays += 1
                    return _outputs(values, spec, self._lc_device, self.device)
        return self._trace(args, key)

    def _trace(self, args, key) -> list:
        if key is None:
            self.traces += 1
            self.why = "an argument is a view lazycore cannot key, or an unhashable Python value"
            return list(self.gm(*args))
        # a recording watches the whole graph: no other thread's op may land in it
        # (as lazycore.torch.capture's recorded calls, docs/threads.md)
        with LOCK:
            return self._record(args, key)

    def _record(self, args, key) -> list:
        self.traces += 1
        watch = _capture.begin([a._storage.handle for a in args if type(a) is Tensor])
        with TRACE.cutter.holding():  # one ATen graph: no step ends inside it
            outs = list(self.gm(*args))
        try:
            _capture.check(watch)
        except _capture.Refused as e:
            self.why = e.args[0]
            return outs
        spec, kept = _by_value(outs)
        del outs  # (their storages: the recording keeps the values alone)
        try:
            rec = _capture.finish(watch, kept)
        except _capture.Refused as e:
            self.why = e.args[0]
        else:
            self.why = None
            if len(self._recordings) >= _KINDS_KEPT:
                self._recordings.pop(next(iter(self._recordings)))
            self._recordings[key] = (rec, spec)
        return _outputs([h._value for h in kept], spec, self._lc_device, self.device)


def _homes(gm: torch.fx.GraphModule, returned: int | None) -> list:
    """Per output of ``gm``: the device its result goes to (the one dynamo
    traced it on), or None to keep it lazy."""
    out = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    homes = []
    for i, node in enumerate(out.args[0]):
        val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
        if returned is not None and i >= returned:
            homes.append(None)
        else:
            homes.append(val.device if isinstance(val, torch.Tensor) else torch.device("cpu"))
    return homes


def _mutated_inputs(gm: torch.fx.GraphModule) -> list[int]:
    """The positions of the inputs ``gm`` updates in place (``copy_`` into a placeholder)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    return sorted({placeholders.index(n.args[0]) for n in gm.graph.nodes
                   if n.op == "call_function" and n.target is torch.ops.aten.copy_.default
                   and n.args[0] in placeholders})


def _write_back(host: torch.Tensor, new: Tensor) -> None:
    """``host.copy_(new)`` for a host input the graph updated: by NumPy's copy into
    its memory where it can (no torch kernel per tensor), as an in-place update
    (its version counter moves on)."""
    value = core.to_numpy(read(new))
    if host.device.type == "cpu" and host.dtype in dtypes.TO_LAZY and host.dtype != torch.bfloat16:
        numpy.copyto(host.detach().numpy(), value)
        torch.autograd.graph.increment_version(host)
    else:
        with torch.no_grad():
            host.copy_(dtypes.from_numpy(value))


def _to_lazy_device(gm: torch.fx.GraphModule, tdev: torch.device) -> None:
    """The graph as it runs here: factory ops and constants on the lazy device
    (dynamo traced it on the host, where ``device=cpu`` meant "with the inputs")."""
    cpu = torch.device("cpu")

    def move(x):
        if isinstance(x, torch.device) and x == cpu:
            return tdev
        if isinstance(x, (list, tuple)):
            return type(x)(move(y) for y in x)
        if isinstance(x, dict):
            return {k: move(v) for k, v in x.items()}
        return x

    changed = False
    for node in gm.graph.nodes:
        if node.op == "call_function":
            args, kwargs = move(node.args), move(node.kwargs)
            if args != node.args or kwargs != node.kwargs:
                node.args, node.kwargs = args, kwargs
                changed = True
        elif node.op == "get_attr":
            value = getattr(gm, node.target)
            if isinstance(value, torch.Tensor) and type(value) is not Tensor:
                # uploaded once: the recording reads it as a live tensor
                setattr(gm, node.target, from_host(value.detach(), tdev))
    if changed:
        gm.recompile()


def _by_value(outs) -> tuple[list, list]:
    """The outputs' layouts and value handles (a view's value read out of its storage)."""
    spec, kept = [], []
    for o in outs:
        if type(o) is Tensor:
            spec.append((len(kept), tuple(o.shape), tuple(o.stride()), o.dtype))
            kept.append(_views.read(o._storage, o._steps))
        else:
            spec.append(("value", o))
    return spec, kept


def _outputs(values, spec, lc_dev, tdev) -> list:
    out = []
    for s in spec:
        if s[0] == "value":
            out.append(s[1])
        else:
            i, shape, strides, dtype = s
            out.append(wrap_layout(LazyTensor(values[i], lc_dev), shape, strides, dtype, tdev))
    return out


def _download(o, home: torch.device):
    if type(o) is not Tensor:
        return o
    host = to_host(o)
    return host if home.type == "cpu" else host.to(home)
