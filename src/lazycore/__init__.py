"""lazycore: LazyTensor tracing for array frontends, compiled by XLA through MLIR."""

__version__ = "0.1.0"

# The runtime API loads on first use: tools that only need the compiler
# (lazy-opt, lit tests) do not pay for importing jax.
_CORE = {
    "BarrierError", "LazyTensor", "apply", "assign", "broadcast_to", "convert_to", "devices", "default_device",
    "from_buffer", "from_host", "from_numpy", "live_tensors", "mark_step", "scalar", "to_buffer", "to_device", "to_numpy",
}
_SUBMODULES = {"barrier", "cache", "config", "core", "debug", "device", "failures", "graph", "guards", "inspect_graph", "metrics", "profile", "tensor", "testing"}


def __getattr__(name):
    import importlib

    if name in _CORE:
        value = getattr(importlib.import_module("lazycore.core"), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"lazycore.{name}")
    else:
        raise AttributeError(f"module 'lazycore' has no attribute '{name}'")
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | _CORE | _SUBMODULES)
