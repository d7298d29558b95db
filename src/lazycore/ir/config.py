"""Runtime settings, read from the environment once and changeable at run time.

``LAZYCORE_CACHE_SIZE``: how many compiled programs the compile cache keeps
(least recently used dropped first; default 256).
``LAZYCORE_CACHE_DIR``: the folder of the persistent compile cache (default
``$XDG_CACHE_HOME/lazycore``, else ``~/.cache/lazycore``); ``off`` disables it
(see :mod:`lazycore.runtime.diskcache`).
``LAZYCORE_CACHE_MAX_BYTES``: the size bound of that folder (default 1 GiB;
least recently used entries removed first).
``LAZYCORE_DEBUG``: 0 (default), 1 (one line per barrier on stderr, recompile
reasons, a warning when compiles keep happening), 2 (also the graph text per
barrier); see :mod:`lazycore.debug`.
``LAZYCORE_SLOW_COMPILE_MS``: log a warning for a compile slower than this (default 2000).
``LAZYCORE_GUARD_COMPILES``, ``LAZYCORE_GUARD_IMPLICIT_BARRIERS``,
``LAZYCORE_GUARD_TRANSFERS``: allow | warn | error, globally (see :mod:`lazycore.guards`).
``LAZYCORE_REPLAY``: 1 (default) replay recorded lowerings for repeated call
signatures, 0 run every lowering's Python each call (see :mod:`lazycore.recipes`).
``LAZYCORE_REPLAY_OPTIMIZER``: 1 (default) a traced ``optimizer.step()`` and
``clip_grad_norm_`` replay a recording of themselves (an optimizer's from its
fourth step), 0 traces them per op every step.
``LAZYCORE_AUTO_BARRIER``: 1 (default) automatic step barriers, 0 none (see
:mod:`lazycore.runtime.autostep`); ``LAZYCORE_AUTO_BARRIER_NODES``: the graph
size (nodes since the last barrier, at most 100000) at which a graph is cut.
``LAZYCORE_DUMP_DIR``: write the IR of every compiled graph, stage by stage,
under this folder (see :mod:`lazycore.inspect_graph`).
``LAZYCORE_BUCKETS``: the sizes a dynamic dimension is padded to (``16,48,64``;
default powers of two; ``off``: marks are ignored, see :mod:`lazycore.runtime.buckets`).
``LAZYCORE_LEARN_BUCKETS``: 1 mark an input dimension dynamic once it has
changed twice at the same place; 0 (default) only the dimensions the user marks.
``LAZYCORE_KEEP_HOST_MEMORY``: 1 (default) glibc's ``malloc`` keeps freed memory
for the next step's buffers; 0 leaves it as it is (see :mod:`lazycore.runtime.hostmem`).
``LAZYCORE_INDEX_CHECKS``: 1 (default) an op indexing with values held on the
device checks them (eager's error at the barrier, :mod:`lazycore.runtime.checks`);
0 no check: an out-of-range index is clamped (read) or dropped (written).
``LAZYCORE_EAGER``: 1 every frontend op runs at once, as a program of its own
(its errors raised at its call); 0 (default) lazy. :func:`eager` for a block.
``LAZYCORE_DEBUG_NANS``: 1 a barrier whose results hold a NaN or an infinity
raises ``FloatingPointError`` naming the op that made it first and its line
(:mod:`lazycore.observe.nans`); 0 (default) no check. :func:`debug_nans` for a block.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, fields


def _env_number(name: str, default, parse, what: str, least):
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = parse(raw)
    except ValueError:
        raise ValueError(f"{name} must be {what}, got {raw!r}") from None
    if value < least:
        raise ValueError(f"{name} must be at least {least}, got {value}")
    return value


def _env_int(name: str, default: int) -> int:
    return _env_number(name, default, int, "an integer", 1)


AUTO_BARRIER_NODES_MAX = 100_000
"""The step log's length (``lazycore.ir.graph.STEP_LOG_LIMIT``): the size bound counts its nodes."""


def _env_auto_nodes(name: str) -> int:
    value = _env_int(name, 50_000)
    if value > AUTO_BARRIER_NODES_MAX:
        raise ValueError(f"{name} must be at most {AUTO_BARRIER_NODES_MAX}, got {value}")
    return value


GUARD_MODES = ("allow", "warn", "error")
DEBUG_LEVELS = (0, 1, 2)


def _env_debug(name: str) -> int:
    raw = (os.environ.get(name) or "0").strip()
    if raw not in ("0", "1", "2"):
        raise ValueError(f"{name} must be 0, 1 or 2, got {raw!r}")
    return int(raw)


def _env_ms(name: str, default: float) -> float:
    return _env_number(name, default, float, "a number of milliseconds", 0)


def _env_flag(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    if raw.strip() not in ("0", "1"):
        raise ValueError(f"{name} must be 0 or 1, got {raw!r}")
    return raw.strip() == "1"


def _env_roll_loops(name: str) -> bool | str:
    raw = os.environ.get(name)
    return "auto" if raw is None or raw.strip() == "" else _env_flag(name, True)


def cache_dir_setting(value) -> str | None:
    """``off`` (or None) -> None; a path -> that path, absolute (a later
    ``chdir`` keeps the folder)."""
    if value is None or str(value).strip().lower() == "off":
        return None
    path = os.path.expanduser(os.fspath(value).strip())
    if path.startswith("~"):  # no home directory to expand it against
        raise ValueError(f"cache_dir: cannot expand {value!r} (no home directory)")
    return os.path.abspath(path)


def default_cache_dir() -> str | None:
    """``$XDG_CACHE_HOME/lazycore``, else ``~/.cache/lazycore``; None without a home directory."""
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    if os.path.isabs(xdg):  # the XDG spec ignores a relative value
        return os.path.join(xdg, "lazycore")
    home = os.path.expanduser("~")
    return None if home.startswith("~") else os.path.join(home, ".cache", "lazycore")


def _env_cache_dir(name: str) -> str | None:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default_cache_dir()
    try:
        return cache_dir_setting(raw)
    except ValueError:
        raise ValueError(f"{name} must be a folder or 'off', got {raw!r}") from None


def buckets_setting(value):
    """``None`` (powers of two), ``()`` (``off``: no padding) or the sorted bucket
    sizes, from a setting's text (``"16,48,64"``) or a sequence of sizes."""
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("", "pow2"):
            return None
        if text == "off":
            return ()
        value = text.split(",")
    sizes = tuple(sorted({int(v) for v in value}))
    if any(n < 1 for n in sizes):
        raise ValueError(f"bucket sizes must be at least 1, got {value!r}")
    return sizes


def _env_buckets(name: str):
    raw = os.environ.get(name)
    try:
        return buckets_setting(raw)
    except ValueError:
        raise ValueError(f"{name} must be 'off', 'pow2' or sizes such as '16,48,64', got {raw!r}") from None


def _env_guard(name: str) -> str:
    raw = (os.environ.get(name) or "allow").strip().lower()
    if raw not in GUARD_MODES:
        raise ValueError(f"{name} must be one of {', '.join(GUARD_MODES)}, got {raw!r}")
    return raw


@dataclass
class Settings:
    debug: int = _env_debug("LAZYCORE_DEBUG")
    """``LAZYCORE_DEBUG``: 0 off; 1 a line per barrier (step, nodes, outputs, hit or
    compile, times), recompile reasons, a warning on repeated compiles; 2 also the
    graph text with source locations (see lazycore.debug)."""
    cache_size: int = _env_int("LAZYCORE_CACHE_SIZE", 256)
    """Compiled programs kept by the compile cache."""
    cache_dir: str | None = _env_cache_dir("LAZYCORE_CACHE_DIR")
    """``LAZYCORE_CACHE_DIR``: the persistent compile cache's folder (default
    ``$XDG_CACHE_HOME/lazycore`` or ``~/.cache/lazycore``); None (``off``): no
    persistent cache. ``configure(cache_dir="off")`` works too."""
    compiler_ahead: bool = _env_flag("LAZYCORE_COMPILER_AHEAD", True)
    """``LAZYCORE_COMPILER_AHEAD``: importing a frontend starts the compiler's
    imports (MLIR, passes, lowerings) on a background thread where the first
    program will be compiled (no persistent cache, or one holding no program):
    ``lazycore.runtime.programs.load_compiler_ahead``. False: the first compile imports it."""
    cache_max_bytes: int = _env_int("LAZYCORE_CACHE_MAX_BYTES", 1 << 30)
    """``LAZYCORE_CACHE_MAX_BYTES``: the persistent cache's size bound; after a write
    the least recently used entries go until the folder is within it."""
    pipeline: str | None = None
    """Pass pipeline for barriers; None: the compiler's default pipeline."""
    donation: bool = True
    """Let barriers donate dead input buffers to outputs of the same type."""
    slow_compile_ms: float = _env_ms("LAZYCORE_SLOW_COMPILE_MS", 2000.0)
    """``LAZYCORE_SLOW_COMPILE_MS``: log a warning (logger ``lazycore``) for a compile
    (lowering + XLA) of one graph that takes longer than this."""
    guard_compiles: str = _env_guard("LAZYCORE_GUARD_COMPILES")
    """``LAZYCORE_GUARD_COMPILES``: allow | warn | error on a compile after warm-up (see lazycore.guards)."""
    guard_implicit_barriers: str = _env_guard("LAZYCORE_GUARD_IMPLICIT_BARRIERS")
    """``LAZYCORE_GUARD_IMPLICIT_BARRIERS``: allow | warn | error when observing a value runs pending work."""
    guard_transfers: str = _env_guard("LAZYCORE_GUARD_TRANSFERS")
    """``LAZYCORE_GUARD_TRANSFERS``: allow | warn | error on a host <-> device copy."""
    replay: bool = _env_flag("LAZYCORE_REPLAY", True)
    """``LAZYCORE_REPLAY``: frontends record an op's lowering once per call signature
    and replay it (lazycore.recipes); False runs the lowering's Python every call."""
    capture_calls: bool = _env_flag("LAZYCORE_CAPTURE_CALLS", True)
    """``LAZYCORE_CAPTURE_CALLS``: a captured step's replay makes one ``call`` node
    holding the step (lazycore.trace.capture); False makes every node of the step."""
    replay_optimizer: bool = _env_flag("LAZYCORE_REPLAY_OPTIMIZER", True)
    """``LAZYCORE_REPLAY_OPTIMIZER``: a traced ``optimizer.step()`` over lazy parameters,
    and ``clip_grad_norm_``, are captured with the gradients as arguments and
    replayed (lazycore.frontends.torch.optim_replay); False traces them per op every step."""
    roll_loops: bool | str = _env_roll_loops("LAZYCORE_ROLL_LOOPS")
    """``LAZYCORE_ROLL_LOOPS``: a run of identical layers in a graph (each with
    its own weights) compiles as one loop over the stacked weights
    (lazycore.runtime.rolling). ``"auto"`` (the default): as the device's
    platform's entry in ``lazycore.runtime.rolling.DEFAULTS`` says; 1 (True)
    or 0 (False) turns it on or off on every platform. The decision a program
    was compiled under is part of the compile key."""
    auto_barrier: bool = _env_flag("LAZYCORE_AUTO_BARRIER", True)
    """``LAZYCORE_AUTO_BARRIER``: cut a loop without ``mark_step`` into one program per
    step (after ``optimizer.step()``, where the graph repeats, at a size bound; see
    lazycore.runtime.autostep). False: only ``mark_step`` and reads run barriers."""
    auto_barrier_nodes: int = _env_auto_nodes("LAZYCORE_AUTO_BARRIER_NODES")
    """``LAZYCORE_AUTO_BARRIER_NODES``: a graph of this many nodes since the last barrier is
    cut there and the line reported once (default 50000, at most 100000)."""
    buckets: tuple[int, ...] | None = _env_buckets("LAZYCORE_BUCKETS")
    """``LAZYCORE_BUCKETS``: the sizes a dynamic dimension (``lazycore.torch.dynamic``)
    is padded to: None powers of two, ``()`` none (``off``: marks are ignored),
    else these sizes (a size above the largest is not padded)."""
    generation_replay: bool = _env_flag("LAZYCORE_GENERATION_REPLAY", True)
    """``LAZYCORE_GENERATION_REPLAY``: transformers' ``generate()`` on a lazy device
    replays a static cache's decoding step as a captured call (lazycore.frontends.torch.generation);
    False traces every decoding step per op."""
    generation_static_cache: bool = _env_flag("LAZYCORE_GENERATION_STATIC_CACHE", True)
    """``LAZYCORE_GENERATION_STATIC_CACHE``: ``generate()`` on a lazy device asked for
    the default cache decodes with a static one where nobody sees the cache (its
    steps then replay); False keeps the default cache, traced per op in buckets."""
    learn_buckets: bool = _env_flag("LAZYCORE_LEARN_BUCKETS", False)
    """``LAZYCORE_LEARN_BUCKETS``: mark an input dimension dynamic once its size
    has changed twice at the same place of the same graph (the debug log says so)."""
    gc_freeze: bool = _env_flag("LAZYCORE_GC_FREEZE", True)
    """``LAZYCORE_GC_FREEZE``: importing a frontend ends with ``gc.freeze()``, so
    Python's full collections skip the objects the imports made (lazycore.ir.heap)."""
    gc_threshold: int = _env_number("LAZYCORE_GC_THRESHOLD", 20_000, int, "an integer", 0)
    """``LAZYCORE_GC_THRESHOLD``: importing a frontend sets the collector's first
    threshold to this, when it is still CPython's 700 (0: leave it; lazycore.ir.heap)."""
    verify_each: bool = _env_flag("LAZYCORE_VERIFY_EACH", False)
    """``LAZYCORE_VERIFY_EACH``: a barrier's compile verifies the module after every
    pass (as ``lazy-opt`` always does) rather than once, after the last one."""
    recordings_on_disk: bool = _env_flag("LAZYCORE_RECORDINGS_ON_DISK", False)
    """``LAZYCORE_RECORDINGS_ON_DISK``: the torch frontend keeps its lowerings'
    recordings in the persistent cache and a new process replays them
    (``lazycore.frontends.torch.recipe_store``). Off by default: the gain
    measured is small (a tiny GPT-2 step's second process: ~10% of its first
    step's main-thread CPU, its wall time no better)."""
    keep_host_memory: bool = _env_flag("LAZYCORE_KEEP_HOST_MEMORY", True)
    """``LAZYCORE_KEEP_HOST_MEMORY``: when lazycore first uses its devices, glibc's
    ``malloc`` is set to keep the memory it frees, so CPU programs reuse their
    buffers instead of faulting in fresh pages every step (lazycore.runtime.hostmem)."""
    index_checks: bool = _env_flag("LAZYCORE_INDEX_CHECKS", True)
    """``LAZYCORE_INDEX_CHECKS``: every op that indexes with values held on the device
    (``x[i]``, gather, scatter, index_select, embedding, nll_loss's targets, NumPy's
    take and fancy indexing, ...) checks them as eager does: an out-of-range one
    fails what the op computed at its barrier, with eager's error and the user's
    line (:mod:`lazycore.runtime.checks`). False: no check, and no cost; an
    out-of-range index is clamped into range by a read and its update dropped
    by a write (XLA's semantics). Read when an op is traced: the torch frontend's
    recorded lowerings are kept per setting."""
    eager: bool = _env_flag("LAZYCORE_EAGER", False)
    """``LAZYCORE_EAGER``: the frontends run every op at once, through the same
    lowerings, as a program of its own, and raise its errors (a failed value
    check) at its call: for bisecting a problem op by op (lazycore.runtime.eager).
    Entering it swaps the frontends' entry points; the lazy path reads nothing."""
    debug_nans: bool = _env_flag("LAZYCORE_DEBUG_NANS", False)
    """``LAZYCORE_DEBUG_NANS``: after a barrier's program, its floating results are
    checked for NaN and infinities; one found, the step's graph is run again with
    every op's result kept and ``FloatingPointError`` names the first op that made
    one from finite operands, with its line (lazycore.observe.nans). Barriers then
    donate nothing. Entering it swaps the barrier; off, nothing is checked."""
    dump_dir: str | None = os.environ.get("LAZYCORE_DUMP_DIR") or None
    """``LAZYCORE_DUMP_DIR``: for every compiled graph, a folder here with the lazy module
    before and after each pass, the StableHLO and the graph as Graphviz (None: no dumps)."""


settings = Settings()


def configure(**changes) -> dict:
    """Change settings; returns the previous values of the changed ones."""
    names = {f.name for f in fields(Settings)}
    unknown = set(changes) - names
    if unknown:
        raise KeyError(f"unknown setting(s) {', '.join(sorted(unknown))} (known: {', '.join(sorted(names))})")
    if "cache_size" in changes and int(changes["cache_size"]) < 1:
        raise ValueError(f"cache_size must be at least 1, got {changes['cache_size']}")
    if "cache_max_bytes" in changes and int(changes["cache_max_bytes"]) < 1:
        raise ValueError(f"cache_max_bytes must be at least 1, got {changes['cache_max_bytes']}")
    if "cache_dir" in changes:
        changes = {**changes, "cache_dir": cache_dir_setting(changes["cache_dir"])}
    if "auto_barrier_nodes" in changes and not 1 <= int(changes["auto_barrier_nodes"]) <= AUTO_BARRIER_NODES_MAX:
        raise ValueError(f"auto_barrier_nodes must be 1 to {AUTO_BARRIER_NODES_MAX}, "
                         f"got {changes['auto_barrier_nodes']}")
    if "buckets" in changes:
        changes = {**changes, "buckets": buckets_setting(changes["buckets"])}
    if "roll_loops" in changes and not (type(changes["roll_loops"]) is bool or changes["roll_loops"] == "auto"):
        raise ValueError(f"roll_loops must be True, False or 'auto', got {changes['roll_loops']!r}")
    if "debug" in changes and changes["debug"] not in DEBUG_LEVELS:
        raise ValueError(f"debug must be 0, 1 or 2, got {changes['debug']!r}")
    for k, v in changes.items():
        if k.startswith("guard_") and v not in GUARD_MODES:
            raise ValueError(f"{k} must be one of {', '.join(GUARD_MODES)}, got {v!r}")
    old = {k: getattr(settings, k) for k in changes}
    for k, v in changes.items():
        setattr(settings, k, v)
    for k, v in changes.items():
        if old[k] != v:
            for fn in _WATCHERS.get(k, ()):
                fn(v)
    return old


_WATCHERS: dict[str, list] = {}


def watch(name: str, fn) -> None:
    """Call ``fn(value)`` whenever setting ``name`` changes (through
    :func:`configure`), and now when it is already set: a mode that swaps
    entry points (``eager``, ``debug_nans``) costs nothing while it is off."""
    _WATCHERS.setdefault(name, []).append(fn)
    if getattr(settings, name):
        fn(getattr(settings, name))


@contextlib.contextmanager
def override(**changes):
    """Settings changed inside a ``with`` block only."""
    old = configure(**changes)
    try:
        yield settings
    finally:
        configure(**old)


def eager():
    """``with lazycore.config.eager():`` every frontend op inside runs at once,
    as its own program (``LAZYCORE_EAGER=1`` for the whole process)."""
    return override(eager=True)


def debug_nans():
    """``with lazycore.config.debug_nans():`` a barrier whose results hold a NaN
    or an infinity raises ``FloatingPointError`` naming the op that made it
    (``LAZYCORE_DEBUG_NANS=1`` for the whole process)."""
    return override(debug_nans=True)
