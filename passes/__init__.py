"""Passes over the ``lazy`` dialect and its lowering to StableHLO.

Pipeline names (usable in :func:`run_pipeline` and ``lazy-opt``):
``lazy-canonicalize``, ``lazy-update-to-select``, ``lazy-aliasing``,
``lazy-to-stablehlo``, ``lazy-apply-pdl``, plus any upstream MLIR pass (``cse``,
``canonicalize``...). ``DEFAULT_PIPELINE`` composes them. Lowerings are
patterns in a registry: see :mod:`lazycore.passes.lowering`.
"""

from .pipeline import (  # noqa: F401
    DEFAULT_PIPELINE,
    PASSES,
    IRPrinting,
    PassError,
    build_stages,
    register_pass,
    run_pipeline,
    split_elements,
)
from .lowering import (  # noqa: F401
    Decline,
    builtin_lowering,
    load_pdl_patterns,
    register_lowering,
    unregister_lowering,
)
from .to_stablehlo import LoweringError  # noqa: F401
from .pipeline import _ensure_passes_loaded

_ensure_passes_loaded()
