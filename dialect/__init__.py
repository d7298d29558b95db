"""The ``lazy`` MLIR dialect: one op table, one generated dialect.

Importing this package fills the op table (one module per op family);
:mod:`.build`, loaded on first use of its names, generates the MLIR ops and
makes the contexts that know them (:func:`~lazycore.dialect.build.new_context`);
:mod:`.mlir` is the one door to the MLIR bindings. The shape rules in the
table are plain Python and usable without MLIR: ``lazycore.dialect.infer("add", a, b)``.
"""

from .types import ShapeError, TensorType  # noqa: F401
from .spec import OPS, OpSpec, define, infer, op, spec_of  # noqa: F401

# Op families: each module adds its rows to the table.
from . import elementwise, shape, reduction, linalg, indexing, random, checks, collectives, fft, barrier  # noqa: F401,E402
from . import factorizations  # noqa: F401,E402
from . import lanes  # noqa: F401,E402

# The MLIR half (generated op classes, builders) loads on first use: the shape
# rules above serve the per-op path, which never touches MLIR.
_BUILD = {"Lazy", "OP_CLASSES", "attr", "create", "from_mlir_type", "load", "tensor_type"}


def __getattr__(name):
    if name in _BUILD:
        from . import build

        return getattr(build, name)
    raise AttributeError(f"module 'lazycore.dialect' has no attribute '{name}'")
