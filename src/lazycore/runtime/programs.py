"""A walked graph's program: its keys, and whether it is loaded or compiled.

The barrier's program stage (:func:`obtain`: memory | disk | compile) keys
its in-memory cache with :func:`make_key` and asks :func:`program` for what
it misses. Neither loads the MLIR bindings: a
program found in the persistent cache (:mod:`lazycore.runtime.diskcache`) is
loaded as it is, so a process whose programs are all on disk never imports
the compiler (:mod:`lazycore.runtime.compiler`, 50 ms of a new process's
first step), which lowers and compiles the rest.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import importlib.util
import os
import sys
import threading
from pathlib import Path

import lazycore
from lazycore.ir import events
from lazycore.ir.config import settings
from lazycore.ir.memo import Memo
from lazycore.runtime import pjrt
from lazycore.runtime.cache import CACHE
from lazycore.runtime.diskcache import DISK

_ENVIRONMENTS = Memo("runtime.environments", 64)


def _compiler():
    """The compiler, loaded by the first program not found on disk (it loads MLIR)."""
    if _AHEAD:
        _AHEAD[0].join()  # (no two threads in the compiler's imports at once)
    from lazycore.runtime import compiler

    return compiler


_AHEAD: list = []
"""The thread :func:`load_compiler_ahead` started (at most one per process)."""


def load_compiler_ahead() -> None:
    """Import the compiler (the MLIR bindings, the passes and lowerings) on a
    background thread where the process's first program will be compiled
    whatever it is: no persistent cache, or one that holds no program. A
    frontend calls this at its import; the first compile joins the thread
    (:func:`_compiler`), and so do a fork and the process's exit. Otherwise the
    ~80-150 ms import is paid inside the first call that compiles (a cold
    first token); with programs on disk it may never be needed, so it stays
    lazy. ``LAZYCORE_COMPILER_AHEAD=0`` (``settings.compiler_ahead``): never."""
    if not settings.compiler_ahead or _AHEAD or "lazycore.runtime.compiler" in sys.modules or DISK.holds_programs():
        return
    thread = threading.Thread(target=_load_compiler, name="lazycore-compiler-import", daemon=True)
    _AHEAD.append(thread)
    os.register_at_fork(before=thread.join)  # (a child must not inherit a half-held import lock)
    atexit.register(thread.join)
    thread.start()


def _load_compiler() -> None:
    try:
        from lazycore.passes.pipeline import _ensure_passes_loaded
        from lazycore.runtime import compiler  # noqa: F401

        _ensure_passes_loaded()
    except Exception:  # noqa: BLE001  (the first compile imports it again, and raises there)
        pass


def _extensions() -> tuple[tuple, tuple]:
    """The user's lowerings and PDL pattern sources. Registering either
    imports their registry; while it is not imported there are none."""
    if "lazycore.passes.lowering.registry" not in sys.modules:
        return (), ()
    from lazycore.passes.lowering import registry

    return tuple(registry.USER.items()), tuple(registry.PDL_SOURCES)


def _environments() -> tuple[bytes, bytes | None]:
    """:func:`environment` and :func:`portable_environment`, kept per state of
    the user's lowerings and PDL patterns (every barrier asks)."""
    state = _extensions()
    envs = _ENVIRONMENTS.get(state)
    if envs is None:
        lowerings, sources = state
        user = [(name, [(getattr(r.fn, "__module__", None), getattr(r.fn, "__qualname__", None), id(r.fn)) for r in rs])
                for name, rs in sorted(lowerings)]
        pdl = [hashlib.blake2b(t.encode(), digest_size=16).hexdigest() for t in sources]
        versions = (lazycore.__version__, pjrt.jaxlib_version(), pjrt.consumer_stablehlo_version())
        env = repr(versions + (user, pdl)).encode()
        portable = None
        if not lowerings:
            portable = repr((_bindings_version(), _compiler_sources().hex(), pdl)).encode() + env
        envs = _ENVIRONMENTS.put(state, (env, portable))
    return envs


def environment() -> bytes:
    """What outside the graph changes the compiled program, as bytes."""
    return _environments()[0]


def portable_environment() -> bytes | None:
    """:func:`environment` as every process sees it, for the persistent cache:
    also the MLIR bindings' version and a digest of the compiler's own source
    (an edited pass or lowering must not find programs compiled before the
    edit, whatever the version says). None while user Python lowerings are
    registered: no digest of a function covers what it reads (closures,
    globals, other modules), so :func:`program` keys those programs by their
    StableHLO instead."""
    return _environments()[1]


def _bindings_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch-mlir")
    except PackageNotFoundError:
        return "unknown"


def _source(module: str) -> Path:
    """Where ``module``'s source is, found without importing it."""
    return Path(importlib.util.find_spec(module).origin)


@functools.cache
def _compiler_sources() -> bytes:
    """A digest of the source of everything between a walk and its StableHLO:
    the op table, the passes and lowerings (the default pipeline with them),
    the compiler, the bindings' door, and the graph and walk that key a
    program."""
    files: set[Path] = {_source(m) for m in ("lazycore.runtime.compiler", "lazycore.runtime.programs",
                                             "lazycore.dialect.mlir", "lazycore.ir.graph", "lazycore.runtime.barrier",
                                             "lazycore.runtime.rolling")}
    for package in ("lazycore.dialect", "lazycore.passes"):  # (lowerings are a folder of passes)
        files.update(_source(package).parent.rglob("*.py"))
    # names and contents only: two checkouts of one source share programs
    parts = sorted(path.name.encode() + b"\0" + hashlib.blake2b(path.read_bytes(), digest_size=16).digest()
                   for path in files)
    return hashlib.blake2b(b"".join(parts), digest_size=16).digest()


def make_key(walk: bytes, device, donate: dict[int, int], pipeline: str | None, stacked: bool | str = True
             ) -> bytes:
    """The compile cache's key for a walked graph.

    A key is a 128-bit BLAKE2b digest over everything that decides
    what the compiled program computes and how it is called:

    * the graph *as walked*: for every node in the barrier's post-order walk its
      structural digest (op, attributes, result types, operand digests; see
      :mod:`lazycore.ir.graph`) and, for every operand edge, the walk position of the
      node it comes from. Node digests alone cannot tell ``add(a, a)`` from
      ``add(a, b)``: leaves hash their type only. The edge positions record how
      leaves (and inner nodes) are shared, a stronger form of the
      parameter-index pattern, so two graphs with one key are the same DAG and
      bind the same parameters in the same places;
    * the outputs (walk positions and result indices) and the parameter types;
    * the device (name and chip model), the donation plan, the pass pipeline,
      any user lowerings or PDL patterns registered, and the lazycore, jaxlib and
      StableHLO versions;
    * ``stacked``: whether the program takes and returns the stacks of its
      rolled loops, and donates those it takes (:func:`program`).

    A cryptographic digest of an unambiguous encoding makes a wrong hit as
    likely as a 128-bit collision, so no structural comparison is needed on a
    hit.
    """
    from lazycore.runtime import rolling  # (here: it loads lazycore.passes, which tracing never needs)

    h = hashlib.blake2b(digest_size=16)
    h.update(repr((device.name, device.kind, sorted(donate.items()), pipeline, rolling.least_copies(device),
                   stacked)).encode())
    h.update(b"\0")
    h.update(environment())
    h.update(b"\0")
    h.update(walk)
    return h.digest()




def portable_key(walk: bytes, device, donate: dict[int, int], pipeline: str | None, stacked: bool | str = True
                 ) -> bytes | None:
    """The persistent cache's key for a walked graph: :func:`make_key`'s
    parts as every process sees them (:func:`portable_environment`), and the
    XLA side (:func:`lazycore.runtime.pjrt.fingerprint`: versions, flags,
    compile options, platform, device kind and count). None while user Python
    lowerings are registered or ``pipeline`` names a pass registered outside
    lazycore: their code is not in the key."""
    env = portable_environment()
    if env is None or not _own_passes_only(pipeline):
        return None
    from lazycore.runtime import rolling

    h = hashlib.blake2b(digest_size=16)
    h.update(repr(("walk", device.name, device.kind, sorted(donate.items()), pipeline, rolling.least_copies(device),
                   stacked)).encode())
    for part in (env, pjrt.fingerprint(device.pjrt), walk):
        h.update(b"\0")
        h.update(part)
    return h.digest()


def _own_passes_only(pipeline: str | None) -> bool:
    """No element of ``pipeline`` is a Python pass registered outside lazycore
    (MLIR's own passes come with the bindings, whose version is in the key)."""
    if pipeline is None:  # the default one: lazycore's passes, in the source digest
        return True
    from lazycore.passes.pipeline import PASSES, split_elements

    for element in split_elements(pipeline):
        info = PASSES.get(element.partition("{")[0].strip())
        if info is not None and not info.factory.__module__.startswith("lazycore."):
            return False
    return True


def artifact_key(artifact: bytes, device, plan: tuple = (None, None, False)) -> bytes:
    """The persistent cache's key for a program known by its StableHLO (and
    its stacked arguments and results: ``plan``, their
    :attr:`~lazycore.runtime.pjrt.Executable.arguments` and ``rows``)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(repr(("artifact", device.name, device.kind, plan)).encode())
    for part in (pjrt.fingerprint(device.pjrt), artifact):
        h.update(b"\0")
        h.update(part)
    return h.digest()


def program(walk, device, donate: dict[int, int], pipeline: str | None, stacked: bool | str = True,
            counter: str = "compiles", looked: bool = False) -> tuple[pjrt.Executable, bool]:
    """The walk's program, and whether it came from the persistent cache
    (:mod:`lazycore.runtime.diskcache`) instead of being compiled (and
    written there); raises :class:`~lazycore.runtime.failures.ProgramError`.
    ``pipeline``: the pass pipeline, None for the default one; ``stacked``:
    the program takes the parameters its rolled loops read as stacks, and
    returns the stacks they make (:mod:`lazycore.runtime.stacks`), donating
    the stacks it takes (``"keep"``: not, for stacks live handles hold rows
    of); a program that must leave its inputs alone
    (:func:`lazycore.runtime.barrier.run_alone`) is not stacked. ``counter``: the
    counter a compile bumps (:data:`lazycore.ir.events.COUNTERS`).

    The cache is looked up by :func:`portable_key` before lowering; while user
    Python lowerings or passes take part, by the lowered StableHLO
    (:func:`artifact_key`), which saves the XLA compile only. With
    ``settings.dump_dir`` set the program is always lowered and compiled: the
    dumps show every stage of every new program. ``looked``: it was
    looked up under its portable key already (:func:`stored`), and is not there."""
    if settings.cache_dir is None:
        return _compiler().compile_walk(walk, device, donate, pipeline, stacked, counter), False
    read = not settings.dump_dir
    key = portable_key(walk.encoding, device, donate, pipeline, stacked)
    if key is not None:
        exe = DISK.load(key, device.pjrt) if read and not looked else None
        if exe is not None:
            return exe, True
        exe = _compiler().compile_walk(walk, device, donate, pipeline, stacked, counter)
    else:
        compiler = _compiler()
        artifact, inputs, outputs, plan = compiler.walk_artifact(walk, device, donate, pipeline, stacked)
        key = artifact_key(artifact, device, plan)
        exe = DISK.load(key, device.pjrt) if read else None
        if exe is not None:
            return exe, True
        exe = compiler.compile_artifact(artifact, inputs, outputs, device, plan, counter)
    DISK.store(key, exe)
    return exe, False


def stored(walk, device, donate: dict[int, int], pipeline: str | None, stacked: bool | str = True):
    """The walk's program from the persistent cache where it is there under
    its portable key (:func:`program`'s first lookup), else None: nothing is
    lowered or compiled."""
    if settings.cache_dir is None or settings.dump_dir:
        return None
    key = portable_key(walk.encoding, device, donate, pipeline, stacked)
    return DISK.load(key, device.pjrt) if key is not None else None


# --- the barrier's program stage -------------------------------------------------


def obtain(step, transforms) -> None:
    """``step.exe``: the step's program from the in-memory cache, else loaded
    or compiled (:func:`program`), and the arguments its transforms bring
    (:class:`lazycore.runtime.transforms.Pipeline`); raises
    :class:`~lazycore.runtime.failures.ProgramError`."""
    exe = step.exe = CACHE.get(step.key)
    step.hit = exe is not None
    step.loaded = False
    if exe is None:
        step.exe, step.loaded = _new_program(step, step.key, lambda: transforms.keeps(step))
    transforms.arguments(step)


def keep_variant(step) -> None:
    """``step.exe``: the variant of the step's program that leaves its stacks
    alone (``stacked="keep"``, :mod:`lazycore.runtime.stacks`)."""
    kept = make_key(step.encoding, step.device, step.donate, step.pipeline, stacked="keep")
    exe = CACHE.get(kept)
    if exe is None:
        if step.walk is None:  # recalled: walked now
            step.walk = step.walker(step.outputs())
        exe, step.loaded = _new_program(step, kept, None)
    step.exe = exe


def _new_program(step, key: bytes, keeps):
    """The step's program, loaded or compiled and cached under ``key``, and
    whether it was loaded. ``keeps()``: whether it must leave its stacks
    alone (``stacked="keep"``), as it must without donation; None: it must."""
    walk = step.walk
    events.emit("compile", len(walk.order), walk)
    donates = settings.donation and keeps is not None
    exe = stored(walk, step.device, step.donate, step.pipeline, True) if donates else None
    if exe is not None:
        # the donating program, loaded: its plan says which stacks it takes, so the
        # arguments stage picks the variant that keeps them where handles hold them,
        # without finding the walk's loops (about 50 ms of a GPT's first step)
        loaded = True
    else:
        stacked = True if donates and not keeps() else "keep"
        exe, loaded = program(walk, step.device, step.donate, step.pipeline, stacked=stacked,
                              looked=stacked is True)
    CACHE.put(key, exe)
    events.emit("program", exe, step.device, walk, loaded)
    return exe, loaded
