"""The one door to the MLIR Python bindings.

lazycore builds and transforms IR with the upstream MLIR Python bindings as
shipped inside the ``torch-mlir`` wheel. Every other module imports MLIR names
from here, so the source of the bindings can be swapped in one place. jaxlib
carries a second, private MLIR build: nothing from it is imported here, and no
``ir`` object ever crosses into it (see :func:`serialize_stablehlo`).

It sits in the dialect package, the bottom of the compiler half: the dialect's
MLIR half (:mod:`lazycore.dialect.build`, which makes contexts with ``lazy``
loaded: ``new_context``) and the passes build on it, and it imports nothing of
lazycore.
"""

from __future__ import annotations

from torch_mlir import ir, passmanager, rewrite
from torch_mlir.dialects import func
from torch_mlir.dialects import ext
from torch_mlir._mlir_libs import _stablehlo


# The bindings look for a Python module per dialect (``<package>.dialects.<name>``)
# whenever they wrap an op, and retry the failing import every time. The ``lazy``
# op classes register themselves through ``dialects.ext``, and the wheel ships
# StableHLO's without Python op classes; an empty module under each name ends
# the search (``lazy``'s cost ~18% of a small compile, StableHLO's ~13% of a
# 12-layer GPT step's lowering).
import sys as _sys
import types as _types

for _name in ("lazy", "stablehlo", "chlo", "vhlo", "sdy"):
    _sys.modules.setdefault(f"torch_mlir.dialects.{_name}", _types.ModuleType(f"torch_mlir.dialects.{_name}"))

__all__ = [
    "ir",
    "passmanager",
    "rewrite",
    "func",
    "ext",
    "stablehlo",
    "serialize_stablehlo",
    "serialize_stablehlo_module",
    "stablehlo_version",
]

stablehlo = _stablehlo

def stablehlo_version() -> str:
    """The StableHLO version these bindings produce."""
    return _stablehlo.get_current_version()


def serialize_stablehlo_module(module: ir.Module, target_version: str) -> bytes:
    """:func:`serialize_stablehlo` of a module held in these bindings, without
    printing and parsing it (the same bytes, 3-4x faster: GPT-2 small's step
    program printed and re-parsed in 1.7 s)."""
    return _stablehlo.serialize_portable_artifact(module, target_version)


def serialize_stablehlo(module_text: str, target_version: str) -> bytes:
    """Serialize a StableHLO module (as text) to a portable artifact.

    ``target_version`` is the consumer's StableHLO version (jaxlib reports it),
    so an older consumer can read what a newer producer wrote.
    """
    return _stablehlo.serialize_portable_artifact_str(module_text, target_version)
