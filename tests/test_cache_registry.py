"""Every cache has one owner and a bound, and lazycore.cache.clear() empties them all (issue 42).

The registry is lazycore.ir.memo; the one replayer (lazycore.trace.replayer)
is a registered memo from key to recordings behind guards.
"""

import ast
import gc
import pathlib

import numpy as np
import pytest

import lazycore as lc
from lazycore.ir import memo
from lazycore.ir.memo import MEMOS, Family, Memo
from lazycore.trace.replayer import GUARDED, Replayer


def _workload():
    """Enough work to fill the caches of every layer: per-op torch tracing with a
    float parameter, a captured step with an optimizer, autocast, the NumPy shim
    and a frontend's own lc.replayed lowering."""
    import torch

    import lazycore.numpy as lnp
    import lazycore.torch as ltorch

    dev = ltorch.device()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    @ltorch.capture
    def step(x):
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    for i in range(4):
        step(torch.full((3, 4), float(i), device=dev))
        ltorch.mark_step()
    for i in range(4):  # an optimizer stepped outside capture: optimizer replay
        opt.zero_grad()
        model(torch.ones(3, 4, device=dev)).sum().backward()
        opt.step()
        ltorch.mark_step()
    x = torch.ones(4, 4, device=dev)
    (x.t() * 2.5 + 1).cpu()
    with torch.autocast("lazy", dtype=torch.bfloat16):
        (x @ x).float().cpu()

    @lc.replayed
    def scaled(a, s):
        return lc.apply("mul", a, lc.broadcast_to(lc.scalar(s, a.dtype), a.shape))

    h = lc.from_numpy(np.ones(3, np.float32))
    for s in (0.5, 0.25, 0.125):
        scaled(h, s)
    lc.mark_step()
    a = lnp.asarray(np.arange(6, dtype=np.float32))
    np.asarray(lnp.sin(a) * 2.0)
    return step, opt


def test_every_registered_cache_has_a_bound_and_clear_empties_all_of_them():
    step, opt = _workload()
    sizes = memo.sizes()
    for name in ("runtime.programs", "runtime.scalar_packs", "runtime.step_plans", "trace.replayed",
                 "ir.generated_code", "torch.meta", "torch.capture_plans",
                 "torch.autocast_plans", "trace.user_files", "ir.result_types_bytes", "ir.op_name_bytes",
                 "ir.leaf_digests", "ir.library_files"):
        assert sizes[name][0] > 0, (name, sizes[name])
    for name, cache in MEMOS.items():
        bound = cache.limit
        assert type(bound) is int and bound > 0, (name, bound)
        assert len(cache) <= bound, (name, len(cache), bound)
    assert step.replays > 0
    report = lc.metrics.report()
    assert "runtime.programs" in report and "torch.capture_plans" in report
    lc.cache.clear()
    assert {name: n for name, (n, _) in memo.sizes().items() if n} == {}
    del step, opt


def test_a_replayer_tries_a_keys_recordings_in_order_and_keeps_per_key_of_them():
    class Rec:
        def __init__(self, name, holds):
            self.name, self.holds, self.calls = name, holds, 0

        def attempt(self, x):
            self.calls += 1
            return (self.name, x) if self.holds(x) else GUARDED

    r = Replayer("test.replayer", 3, per_key=2)
    try:
        a, b, c = Rec("a", lambda x: x > 0), Rec("b", lambda x: True), Rec("c", lambda x: x < 0)
        r.add("k", b)
        r.add("k", a)  # tried first: the newest
        assert r.replay("k", 1) == ("a", 1)
        assert r.replay("k", -1) == ("b", -1)  # a's guard failed, b's held (and is the newest now)
        r.add("k", c)  # two per key: a goes
        assert r.get("k") == (b, c) and r.find("k") is c
        assert r.replay("missing", 1) is GUARDED
        r.add("k2", a)
        r.add("k3", a)
        r.add("k", a)  # a known key is replaced in place, not counted against the bound
        assert len(r) == 3
        r.add("k4", a)  # a fourth key: emptied whole, as every memo
        assert list(r) == ["k4"]
    finally:
        del MEMOS["test.replayer"]


def test_a_family_counts_and_clears_its_live_members():
    fam = Family("test.family", 2)
    try:
        m1, m2 = Memo("m", 2, fam), Memo("m", 2, fam)
        m1.put(1, 1)
        m2.put(1, 1)
        m2.put(2, 2)
        assert len(fam) == 3 and fam.limit == 4
        with pytest.raises(ValueError):
            Memo("m", 3, fam)  # members share the family's bound
        del m2
        gc.collect()
        assert len(fam) == 1
        fam.clear()
        assert len(m1) == 0
    finally:
        del MEMOS["test.family"]


# --- no cache outside the registry -----------------------------------------------------------

ROOT = pathlib.Path(__file__).resolve().parents[1]
FOLDERS = ("src/lazycore", "dialect", "passes", "frontends")

# Module-level containers that start empty and functions under functools.cache
# that are not caches (or are bounded by what they index), each with why. A
# cache belongs in lazycore.ir.memo instead: a Memo, a Family, or memo.register.
NOT_CACHES = {
    # registries: filled by explicit calls (at import, or by a plugin), the program's own tables
    "src/lazycore/ir/memo.py:MEMOS": "the registry of caches itself",
    "dialect/spec.py:OPS": "the op table: rows defined at import or by a user's define()",
    "dialect/build.py:OP_CLASSES": "one MLIR op class per row of the op table",
    "passes/catalog.py:PASSES": "the pass catalogue, registered at import",
    "passes/lowering/registry.py:BUILTIN": "the lowerings, registered at import",
    "passes/lowering/registry.py:USER": "lowerings a user registers",
    "passes/lowering/registry.py:PDL_SOURCES": "PDL patterns a user registers",
    "passes/patterns.py:_WRITTEN": "rewrite patterns, registered at import",
    "passes/tools/plugins.py:_imported": "plugin modules imported once each",
    "frontends/numpy/fallback.py:HANDLED": "NumPy functions the frontend implements, registered at import",
    "frontends/torch/dispatch.py:_HANDLERS": "aten op -> handler, registered at import",
    "frontends/torch/tensor.py:_KEYS": "interning: one LayoutKey object per layout, whose identity live tensors "
             "and dispatch's signatures share (bounded by _KEYS_BOUND)",
    "frontends/torch/dispatch.py:_OPS": "the aten ops of _HANDLERS, kept alive so their ids stay theirs",
    "frontends/torch/dispatch.py:_INDEX_PROBED": "a fixed set of aten op names, filled at import",
    "frontends/torch/lowering.py:LOWERINGS": "aten op -> lowering, registered at import",
    "src/lazycore/trace/views.py:_FIELDS": "view step class -> its fields' getter, registered at import",
    # listeners and hooks
    "src/lazycore/ir/config.py:_WATCHERS": "listeners of settings",
    "src/lazycore/observe/inspect_graph.py:OBSERVERS": "listeners of graphs",
    "frontends/torch/lowering.py:_LISTENERS": "listeners of lowerings",
    "frontends/torch/optim.py:_HOOK": "the optimizer hook handles, installed once",
    "frontends/torch/capture.py:_STEP_HOOKS": "the two optimizer step hook handles, installed once",
    "frontends/torch/optim.py:_SCHEDULING": "the LR schedulers stepping now (a stack)",
    "src/lazycore/runtime/peers.py:_WATCH": "the one watch of a multi-process run's peers",
    "src/lazycore/runtime/peers.py:_KEEP": "the exit handler of a multi-process run, kept alive",
    # work in flight, emptied by whoever takes it
    "src/lazycore/runtime/closures.py:PENDING": "step closures waiting for their step",
    "src/lazycore/runtime/closures.py:ERRORS": "step closures' errors waiting to be raised",
    "src/lazycore/runtime/programs.py:_AHEAD": "the one thread importing the compiler ahead, to join",
    "src/lazycore/runtime/checks.py:STEP_CHECKS": "step checks waiting for their device's barrier",
    "src/lazycore/runtime/checks.py:RUNNING": "the step-checked step whose barrier runs now (one entry)",
    "src/lazycore/observe/debug.py:_READ": "what the next barrier line reports (one entry)",
    "src/lazycore/observe/debug.py:_PROGRAM": "the step program's phases the next barrier line reports (one entry)",
    "frontends/torch/optim.py:_DEVICE_VALUES": "a flag: non-empty while an eager branch runs",
    "frontends/torch/optim.py:_ENDS_WITH_BACKWARD": "backward passes whose optimizer steps end the training "
                                                    "step when they finish: each emptied by its own end",
    # configuration and state, which clearing would change rather than recompute
    "src/lazycore/ir/sourceloc.py:_SKIP": "library folders whose frames are skipped (skip())",
    "src/lazycore/ir/sourceloc.py:_SKIP_FILES": "library files whose frames are skipped (skip())",
    "src/lazycore/ir/heap.py:_frozen_at": "when the heap was frozen (two names at most)",
    "src/lazycore/observe/debug.py:_devices": "debug mode's state per device",
    "src/lazycore/observe/inspect_graph.py:_next_number": "dump folders' counters, one per dump folder",
    "src/lazycore/runtime/checks.py:_REGISTRIES": "which lines warned already (warnings' once-per-line "
                                                  "state; clearing repeats warnings), at most 1024 files",
    "src/lazycore/runtime/device.py:_DEVICES": "the devices jaxlib sees",
    "frontends/torch/tensor.py:_TORCH_TO_LC": "torch device index -> lazy device, one per device",
    "frontends/torch/tensor.py:_LC_TO_TORCH": "lazy device -> torch device, one per device",
    "frontends/torch/optim.py:_RATES": "per optimizer (weakly keyed): its learning rates on the device",
    "frontends/torch/optim.py:_CYCLED": "per optimizer (weakly keyed): its cycled betas[0] or momentum on the device",
    "frontends/torch/optim.py:_MADE_CAPTURABLE": "per optimizer (weakly keyed): the groups made capturable, "
                                                 "with the user's flag for its state_dict",
    "frontends/torch/generation.py:_DECODERS": "per model (weakly keyed): its decoding step's captured call, "
                                               "whose recordings are bounded by the capture's own memo",
    "frontends/torch/prompt_step.py:_STEPS": "per model (weakly keyed): its prompt forward's captured call, "
                                             "whose recordings are bounded by the capture's own memo",
    "frontends/torch/optim_replay.py:_REPLAYED": "per optimizer (weakly keyed): whether replay is worth trying; "
                                                 "its recordings are torch.capture_plans",
    # look-ups bounded by a fixed table, never stale
    "src/lazycore/trace/core.py:_SPECS": "op name -> its row: bounded by the op table (spec_of refuses others)",
    "frontends/torch/lowering.py:_RANGES": "integer dtype -> its range: bounded by the dtypes",
    "frontends/torch/tensor.py:_LC_OF": "torch device (or its name) -> lazy device: bounded by the devices",
    "src/lazycore/runtime/pjrt.py:fingerprint": "device -> its XLA fingerprint, fixed for the process: one per device",
}

_EMPTY_CALLS = {"dict", "list", "set", "OrderedDict", "defaultdict", "deque", "Counter",
                "WeakKeyDictionary", "WeakValueDictionary", "WeakSet"}


def _called(node):
    node = node.func if isinstance(node, ast.Call) else node
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None


def _starts_empty(v) -> bool:
    if isinstance(v, ast.Dict):
        return not v.keys
    if isinstance(v, (ast.List, ast.Set)):
        return not v.elts
    return isinstance(v, ast.Call) and _called(v) in _EMPTY_CALLS and not (
        _called(v) in ("dict", "list", "set") and v.args)


def _module_level(body, prefix=""):
    """Statements run once per process: a module's, inside its ifs, trys and withs, and its classes'."""
    for st in body:
        if isinstance(st, ast.ClassDef):
            yield from _module_level(st.body, f"{prefix}{st.name}.")
        elif isinstance(st, (ast.If, ast.Try, ast.With)):
            for part in (st.body, getattr(st, "orelse", []), getattr(st, "finalbody", []),
                         *(h.body for h in getattr(st, "handlers", []))):
                yield from _module_level(part, prefix)
        else:
            yield prefix, st


def module_caches(source: str) -> list[str]:
    """Names of what may be a module-level cache in ``source``: a container that
    starts empty (and is not handed to ``memo.register``), or a function under
    ``functools.cache``/``lru_cache`` that takes arguments (without any, it
    holds one value)."""
    tree = ast.parse(source)
    registered = {a.id for n in ast.walk(tree) if isinstance(n, ast.Call) and _called(n) == "register"
                  for a in n.args[1:2] if isinstance(a, ast.Name)}
    found = []
    for prefix, st in _module_level(tree.body):
        if isinstance(st, (ast.Assign, ast.AnnAssign)) and st.value is not None and _starts_empty(st.value):
            targets = st.targets if isinstance(st, ast.Assign) else [st.target]
            found += [prefix + t.id for t in targets if isinstance(t, ast.Name) and t.id not in registered]
        elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = st.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
            params = [p for p in params if p is not None and not (prefix and p.arg in ("self", "cls"))]
            if params and any(_called(d) in ("cache", "lru_cache") for d in st.decorator_list):
                found.append(prefix + st.name)
    return found


def test_the_scan_finds_caches_of_each_shape():
    source = """
import functools, weakref
A = {}
B: dict[str, int] = dict()
C = weakref.WeakKeyDictionary()
TABLE = {"add": 1}
D = Memo("x", 4)
E = []
memo.register("e", E, 10)
if True:
    F = set()
class K:
    G = {}
    @functools.cache
    def method(self, x): ...
@functools.lru_cache(maxsize=None)
def looked_up(x): ...
@functools.cache
def once(): ...
def f():
    local = {}
"""
    assert module_caches(source) == ["A", "B", "C", "F", "K.G", "K.method", "looked_up"]


def test_every_module_level_cache_is_registered_or_says_why_it_is_none():
    """A new dict, list or functools cache at module level fails here until it is
    a memo (lazycore.ir.memo: bounded, cleared by lazycore.cache.clear()) or
    NOT_CACHES says why it is none."""
    found = set()
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            found.update(f"{rel}:{name}" for name in module_caches(path.read_text()))
    unexplained = sorted(found - set(NOT_CACHES))
    assert not unexplained, (
        "module-level caches outside lazycore.ir.memo's registry: make each a Memo (or Family, or "
        "memo.register it) with a bound, or add it to NOT_CACHES in tests/test_cache_registry.py "
        "saying why it is no cache:\n  " + "\n  ".join(unexplained))
    stale = sorted(set(NOT_CACHES) - found)
    assert not stale, f"NOT_CACHES names what is gone or registered now (drop them): {stale}"
