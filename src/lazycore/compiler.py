"""From a ``lazy``-dialect module to a PJRT executable.

``compile_module`` is the meeting point of the compiler half and the runtime
half: lazy module in, executable out. The hand-off to jaxlib is one call,
:func:`lazycore.mlir.serialize_stablehlo`, at the version jaxlib reports.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from lazycore import pjrt
from lazycore.dialect import from_mlir_type
from lazycore.mlir import ir, new_context, serialize_stablehlo
from lazycore.passes.pipeline import DEFAULT_PIPELINE, run_pipeline


def parse(text: str, context: ir.Context | None = None) -> ir.Module:
    """Parse MLIR text in a lazycore context (``lazy`` and StableHLO loaded)."""
    ctx = context or new_context()
    with ctx:
        return ir.Module.parse(text)


def entry_types(module: ir.Module, entry: str = "main"):
    for op in module.body.operations:
        if op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == entry:
            ft = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
            return tuple(from_mlir_type(t) for t in ft.inputs), tuple(from_mlir_type(t) for t in ft.results)
    raise ValueError(f"module has no entry function @{entry}")


def lower(
    module: ir.Module | str,
    pipeline: str = DEFAULT_PIPELINE,
    *,
    donate: dict[int, int] | None = None,
    after_each: Callable[[str, ir.Operation], None] | None = None,
) -> ir.Module:
    """Run the pipeline (default: canonicalize, cse, aliasing, to StableHLO)."""
    if isinstance(module, str):
        module = parse(module)
    overrides = {"lazy-aliasing": {"donate": dict(donate)}} if donate else None
    run_pipeline(module, pipeline, overrides=overrides, after_each=after_each)
    return module


def compile_stablehlo(module: ir.Module, device=None) -> pjrt.Executable:
    """Serialize a StableHLO module for jaxlib and compile it with PJRT."""
    inputs, outputs = entry_types(module)
    # with locations: XLA's op metadata and errors then name the user's lines
    text = module.operation.get_asm(enable_debug_info=True)
    artifact = serialize_stablehlo(text, pjrt.consumer_stablehlo_version())
    return pjrt.compile_artifact(artifact, inputs, outputs, device)


def compile_module(
    module: ir.Module | str,
    pipeline: str = DEFAULT_PIPELINE,
    *,
    donate: dict[int, int] | None = None,
    device=None,
    after_each: Callable[[str, ir.Operation], None] | None = None,
) -> pjrt.Executable:
    """Lazy-dialect module (or its text) -> executable on ``device`` (CPU default)."""
    return compile_stablehlo(lower(module, pipeline, donate=donate, after_each=after_each), device)


def run_module(module: ir.Module | str, inputs: Sequence[np.ndarray], **kw) -> list[np.ndarray]:
    """Compile and run once on host arrays (tests, demos)."""
    return compile_module(module, **kw).run_numpy([np.asarray(a) for a in inputs])
