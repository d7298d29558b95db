"""lazycore: LazyTensor tracing for array frontends, compiled by XLA through MLIR.

The package is layered; each layer imports only the ones below it (checked by
import-linter: ``[tool.importlinter]`` in pyproject.toml):

- ``lazycore.frontends``: torch and NumPy (``lazycore.torch``, ``lazycore.numpy``)
- ``lazycore.observe``: metrics, debug lines, guards, profiles, IR dumps, testing
- ``lazycore.trace``: the core API frontends build on, recorded lowerings, views, captures
- ``lazycore.runtime``: devices, barriers, the compile cache, the compiler, PJRT
- ``lazycore.ir``: settings, graph nodes and hashing, tensor handles, events

``lazycore.dialect`` (the op table; its MLIR half loads on first use),
``lazycore.passes`` and ``lazycore.dialect.mlir`` are the compiler the runtime drives.
This module is the facade: the core API and the public modules by their
short names (``lazycore.metrics``, ``lazycore.cache``, ...), all loaded on
first use, so ``lazy-opt`` does not import jax and tracing never loads MLIR.

A short name is an attribute of this package, never a module name of its
own: ``lazycore.metrics`` *is* the module ``lazycore.observe.metrics`` (one
object, one name), so setting or patching an attribute through the short name
reaches the module every layer reads. Import statements name the module
where it lives (``from lazycore.observe.testing import capture``); ``from
lazycore import metrics`` gives the same object.
"""

import importlib

__version__ = "0.1.0"

_CORE = {
    "BarrierError", "LazyTensor", "apply", "assign", "broadcast_to", "check", "convert_to", "devices", "default_device",
    "dynamic",
    "from_buffer", "from_host", "from_numpy", "live_tensors", "mark_step", "scalar", "to_buffer", "to_device", "to_numpy",
}
# functions and classes of other modules, by name -> their module
_NAMED = {
    "export": "lazycore.observe.export", "ExportError": "lazycore.observe.export",
    "replayed": "lazycore.trace.recipes",  # a frontend's op lowering, recorded once per signature
    # Python run after a step's program (lazycore.runtime.closures)
    "add_step_closure": "lazycore.runtime.closures", "StepClosureError": "lazycore.runtime.closures",
    "wait_step_closures": "lazycore.runtime.closures",
    # loops and branches kept as loops and branches in the program
    **{name: "lazycore.trace.control" for name in ("cond", "fori_loop", "scan", "while_loop")},
    # one program over many devices
    **{name: "lazycore.trace.sharding" for name in (
        "Mesh", "all_gather", "all_reduce", "all_to_all", "collective_permute", "reduce_scatter", "shard",
        "sharding_of")},
}
# public short name -> the module it stands for (an attribute alias: the module keeps its one name)
PUBLIC_MODULES = {
    "config": "lazycore.ir.config",
    "graph": "lazycore.ir.graph",
    "sourceloc": "lazycore.ir.sourceloc",
    "tensor": "lazycore.ir.tensor",
    "device": "lazycore.runtime.device",
    "distributed": "lazycore.runtime.distributed",
    "barrier": "lazycore.runtime.barrier",
    "autostep": "lazycore.runtime.autostep",
    "cache": "lazycore.runtime.cache",
    "compiler": "lazycore.runtime.compiler",
    "failures": "lazycore.runtime.failures",
    "stepplans": "lazycore.runtime.stepplans",
    "core": "lazycore.trace.core",
    "recipes": "lazycore.trace.recipes",
    "capture": "lazycore.trace.capture",
    "views": "lazycore.trace.views",
    "metrics": "lazycore.observe.metrics",
    "debug": "lazycore.observe.debug",
    "guards": "lazycore.observe.guards",
    "profile": "lazycore.observe.profile",
    "inspect_graph": "lazycore.observe.inspect_graph",
    "testing": "lazycore.observe.testing",
}

# the packages and modules under their own names (``lazycore.numpy`` as ``jax.numpy``), loaded on first use
SUBPACKAGES = ("dialect", "passes", "frontends", "numpy", "torch")


def _load(target: str):
    module = importlib.import_module(target)
    if not target.startswith("lazycore.ir"):
        # anything past the graph layer can run a barrier: wire the observers in
        importlib.import_module("lazycore.observe")
    return module


def __getattr__(name):
    if name in _CORE:
        value = getattr(_load("lazycore.trace.core"), name)
    elif name in _NAMED:
        value = getattr(_load(_NAMED[name]), name)
    elif name in PUBLIC_MODULES:
        value = _load(PUBLIC_MODULES[name])
    elif name in SUBPACKAGES:
        # without this, whether `lazycore.passes` resolves after `import lazycore.torch` depended on
        # whether the background compiler import (runtime.compiler_ahead) had got to it yet
        value = importlib.import_module(f"lazycore.{name}")
    else:
        raise AttributeError(f"module 'lazycore' has no attribute '{name}'")
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | _CORE | set(_NAMED) | set(PUBLIC_MODULES))
