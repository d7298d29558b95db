"""``lazycore.export(fn, *examples, dynamic=...)``: one program for every size of some dimensions.

Like ``jax.export`` with symbolic shapes::

    exported = lazycore.export(mlp, x, dynamic={0: {0: "b"}})   # x: (4, 16); b any size
    exported.mlir_text        # func.func @main(%arg0: tensor<?x16xf32>) -> tensor<?x10xf32>
    exported.args[0].shape    # ("b", 16)
    exported.call(np.ones((7, 16), np.float32))    # at b=7; compiled once per size

``dynamic`` maps an argument (its position, or its parameter name in ``fn``'s
signature) to its symbolic dimensions: ``{dim: "name"}``, or one entry per
dimension (``("b", None, "s")``; None: static). A name used twice is one size:
``{0: {0: "b"}, 1: {0: "b"}}`` says both arguments have the same first
dimension, as a name does in ``jax.export.symbolic_shape``. The examples
must agree (equal sizes for one name).

lazycore traces and lowers ``fn`` at the corners of a box of sizes (3 and 5
times each symbol's example size, which keeps whatever the examples'
sizes divide), and once more at 7 times, and generalizes the static
programs to one with ``?`` dimensions
(:mod:`lazycore.passes.symbolic_shapes`): every result dimension is a sum of
products of the symbols with integer coefficients (``b``, ``2*b``, ``b*s``).
What does not fit raises :class:`~lazycore.observe.export.ExportError` naming
the op and the user's line: Python code that branches on a size, a size baked
into a constant's values (a table computed on the host for the example's
length), a size that is no such polynomial (``x[::2]``: ``ceil(b/2)``).

The artifact holds the symbolic program. A consumer runs it as ``jax.export``
does its own: ``stablehlo-refine-arguments`` at the concrete argument types and
``stablehlo-refine-shapes`` make it static; :meth:`Exported.call` does that at
each new size and compiles the result with lazycore's PJRT client.
"""

from __future__ import annotations

import inspect

import numpy as np

from lazycore.dialect.types import TensorType
from lazycore.ir.context import locked
from lazycore.runtime import pjrt

__all__ = ["call", "generalize", "parse_dynamic", "points_of"]

# multiples of the examples' sizes: the box's corners, then the check
LOW, HIGH, CHECK = 3, 5, 7


def parse_dynamic(dynamic, fn, types, name: str) -> dict[str, list[tuple[int, int]]]:
    """symbol -> the (argument, dimension) pairs it names, in order."""
    if not isinstance(dynamic, dict):
        raise TypeError(f"lazycore.export: dynamic= is a dict of argument -> dimensions, got {type(dynamic).__name__}")
    params = _parameter_names(fn)
    symbols: dict[str, list[tuple[int, int]]] = {}
    for key, spec in dynamic.items():
        if isinstance(key, str):
            if key not in params:
                raise ValueError(f"lazycore.export: dynamic= names argument {key!r}; {name}'s are "
                                 f"{', '.join(params) or 'not named'}")
            index = params.index(key)
        else:
            index = key
        if not isinstance(index, int) or not -len(types) <= index < len(types):
            raise ValueError(f"lazycore.export: dynamic= names argument {key!r}; {name} takes {len(types)}")
        index %= len(types)
        rank = len(types[index].shape)
        pairs = spec.items() if isinstance(spec, dict) else enumerate(spec)
        if not isinstance(spec, dict) and len(spec) != rank:
            raise ValueError(f"lazycore.export: dynamic= gives {len(spec)} dimensions for argument {key!r} of rank "
                             f"{rank}")
        for dim, symbol in pairs:
            if symbol is None:
                continue
            if not isinstance(dim, int) or not -rank <= dim < rank:
                raise ValueError(f"lazycore.export: dynamic= names dimension {dim!r} of argument {key!r} of rank "
                                 f"{rank}")
            if not isinstance(symbol, str) or not symbol.isidentifier():
                raise ValueError(f"lazycore.export: a symbolic dimension's name is an identifier, got {symbol!r}")
            symbols.setdefault(symbol, []).append((index, dim % rank))
    for symbol, uses in symbols.items():
        sizes = {types[i].shape[d] for i, d in uses}
        if len(sizes) > 1:
            raise ValueError(f"lazycore.export: the examples' sizes of {symbol!r} differ "
                             f"({', '.join(f'argument {i} dimension {d}: {types[i].shape[d]}' for i, d in uses)}); "
                             "one name is one size")
        if sizes.pop() < 1:
            raise ValueError(f"lazycore.export: the example's size of {symbol!r} is 0; give a size of 1 or more")
    return symbols


def _parameter_names(fn) -> list[str]:
    try:
        return [p.name for p in inspect.signature(fn).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return []


def points_of(symbols, types) -> tuple[list[dict[str, int]], list[list[TensorType]]]:
    """The sizes to trace at (the box's corners, then the check) and the
    arguments' types at each."""
    from lazycore.passes import symbolic_shapes  # the MLIR half

    example = example_sizes(symbols, types)
    points = symbolic_shapes.corners({s: LOW * v for s, v in example.items()},
                                     {s: HIGH * v for s, v in example.items()})
    points.append({s: CHECK * v for s, v in example.items()})
    named = {use: s for s, uses in symbols.items() for use in uses}
    at = [[TensorType(tuple(point[named[i, d]] if (i, d) in named else n for d, n in enumerate(t.shape)), t.dtype)
           for i, t in enumerate(types)] for point in points]
    return points, at


def example_sizes(symbols, types) -> dict[str, int]:
    """Each symbol's size in the examples."""
    return {s: types[uses[0][0]].shape[uses[0][1]] for s, uses in symbols.items()}


@locked
def generalize(modules, points, symbols):
    """The symbolic shapes of the program's arguments and results, ``modules[0]``
    rewritten in place (:func:`lazycore.passes.symbolic_shapes.generalize`);
    SymbolicShapeError where it cannot be."""
    from lazycore.passes import symbolic_shapes

    # a symbol's size is read from the first argument dimension it names
    sources = {s: uses[0] for s, uses in symbols.items()}
    return symbolic_shapes.generalize(modules, points, sources)


def symbolic_error():
    """The error :func:`generalize` raises."""
    from lazycore.passes.symbolic_shapes import SymbolicShapeError

    return SymbolicShapeError


def sizes_text(point) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(point.items()))


def symbolic_dims(d):
    """``d`` if it names a symbol, else None (the shape is the type's)."""
    return None if d is None or all(isinstance(x, int) for x in d) else d


def at_sizes(t: TensorType, dims, sizes) -> TensorType:
    """``t`` with its symbolic dimensions ``dims`` at ``sizes``."""
    if dims is None:
        return t
    return TensorType(tuple(d if isinstance(d, int) else d(sizes) for d in dims), t.dtype)


def bind(exported, shapes) -> dict[str, int]:
    """The symbols' sizes in argument shapes ``shapes``; ValueError where the
    shapes do not fit the program."""
    sizes: dict[str, int] = {}
    for a, shape in zip(exported.args, shapes):
        want = a.dims if a.dims is not None else a.type.shape
        if len(shape) != len(want):
            raise ValueError(f"{exported.name}: argument {a.index} has shape {tuple(shape)}; the program takes "
                             f"{a.type_text}")
        for d, (n, w) in enumerate(zip(shape, want)):
            if isinstance(w, int):
                if n != w:
                    raise ValueError(f"{exported.name}: argument {a.index} has shape {tuple(shape)}; the program "
                                     f"takes {a.type_text}")
                continue
            symbol = str(w)
            if sizes.setdefault(symbol, n) != n:
                raise ValueError(f"{exported.name}: {symbol} is {sizes[symbol]} and {n} in the arguments' shapes; "
                                 "one name is one size")
    return sizes


def call(exported, arrays) -> list[np.ndarray]:
    """Run a program with symbolic dimensions at the arrays' sizes: refined to
    them and compiled at the first call of each."""
    if len(arrays) != len(exported.args):
        raise TypeError(f"{exported.name} takes {len(exported.args)} arguments, got {len(arrays)}")
    arrays = [np.asarray(x, dtype=a.dtype) for x, a in zip(arrays, exported.args)]
    sizes = bind(exported, [x.shape for x in arrays])
    key = tuple(sorted(sizes.items()))
    cache = exported.__dict__.setdefault("_executables", {})
    exe = cache.get(key)
    if exe is None:
        inputs = [at_sizes(a.type, a.dims, sizes) for a in exported.args]
        outputs = [at_sizes(r.type, r.dims, sizes) for r in exported.results]
        exe = pjrt.compile_artifact(_refined(exported.artifact, inputs), inputs, outputs)
        cache[key] = exe
    return exe.run_numpy(arrays)


@locked
def _refined(artifact: bytes, inputs) -> bytes:
    from lazycore.dialect.build import new_context
    from lazycore.dialect.mlir import stablehlo
    from lazycore.passes import symbolic_shapes
    from lazycore.runtime import compiler

    module = stablehlo.deserialize_portable_artifact(new_context(), artifact)
    symbolic_shapes.refine(module, [str(t) for t in inputs])
    refined, _, _ = compiler.stablehlo_artifact(module)
    return refined
