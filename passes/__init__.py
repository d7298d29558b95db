"""Passes over the ``lazy`` dialect and its lowering to StableHLO.

Pipeline names (usable in :func:`run_pipeline` and ``lazy-opt``):
``lazy-canonicalize``, ``lazy-update-to-select``, ``lazy-aliasing``,
``lazy-to-stablehlo``, ``lazy-apply-pdl``, plus any upstream MLIR pass (``cse``,
``canonicalize``...). ``DEFAULT_PIPELINE`` composes them. Lowerings are
patterns in a registry: see :mod:`lazycore.passes.lowering`.

The names below load MLIR and register the passes when first asked for:
the runtime reads the loop matcher (:mod:`lazycore.passes.rolled_chains`,
plain Python) before any compile, and a program loaded from disk needs no
compiler.
"""

import importlib
import importlib.util

_WHERE = {
    "DEFAULT_PIPELINE": "pipeline", "PASSES": "catalog", "IRPrinting": "pipeline", "PassError": "catalog",
    "build_stages": "pipeline", "register_pass": "catalog", "run_pipeline": "pipeline",
    "split_elements": "pipeline",
    "Decline": "lowering", "builtin_lowering": "lowering", "load_pdl_patterns": "lowering",
    "register_lowering": "lowering", "unregister_lowering": "lowering",
    "LoweringError": "to_stablehlo",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    where = _WHERE.get(name)
    if where is None:
        # a module of this package (`lazycore.passes.pipeline.default_for`, as the guides write it) resolves
        # whether or not something imported it before
        if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
            return importlib.import_module(f".{name}", __name__)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from .pipeline import _ensure_passes_loaded

    _ensure_passes_loaded()
    value = getattr(importlib.import_module(f".{where}", __name__), name)
    globals()[name] = value
    return value
