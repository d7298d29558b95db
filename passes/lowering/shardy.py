"""Shardy's round-trip spelling of meshes and layouts, as strings.

XLA imports these from ``mhlo.frontend_attributes`` before it partitions a
program (the lowerings of :mod:`~lazycore.passes.lowering.collectives` say
where each goes). Plain text and no MLIR: the runtime's compiler spells the
entry arguments' layouts with them before any lowering runs.

A mesh is known by its shape: one symbol per shape (``mesh_2x2``), its axes
named by position (``a0`` first). Its devices are the program's device
assignment, which the runtime makes the mesh's devices in row-major order,
so a mesh needs no ``device_ids``.
"""

from __future__ import annotations

import re

MESHES = "xla.sdy.meshes"
"""The module's frontend attribute declaring its meshes."""


def axis_name(axis: int) -> str:
    return f"a{axis}"


def mesh_symbol(mesh) -> str:
    """``mesh_2x2``."""
    return "mesh_" + "x".join(str(int(n)) for n in mesh)


def mesh_text(mesh) -> str:
    """``#sdy.mesh<["a0"=2, "a1"=2]>``."""
    return "#sdy.mesh<[" + ", ".join(f'"{axis_name(a)}"={int(n)}' for a, n in enumerate(mesh)) + "]>"


def with_mesh(declared: str | None, mesh) -> str:
    """The value of :data:`MESHES` (``declared``: its value so far, None
    for none) once it declares ``mesh`` too."""
    body = (declared or "{}")[1:-1]
    if mesh_symbol(mesh) in re.findall(r"(\w+) = #sdy\.mesh<", body):
        return declared
    return "{" + (body + ", " if body else "") + f"{mesh_symbol(mesh)} = {mesh_text(mesh)}" + "}"


def declared_meshes(declared: str | None) -> list[tuple[int, ...]]:
    """The mesh shapes a :data:`MESHES` value (None: none) declares, in order."""
    return [tuple(int(n) for n in re.findall(r'"a\d+"=(\d+)', axes))
            for axes in re.findall(r"#sdy\.mesh<\[([^\]]*)\]>", declared or "")]


def _axis(axis: int, pre: int, size: int, whole: int) -> str:
    name = f'"{axis_name(axis)}"'
    return name if pre == 1 and size == whole else f"{name}:({pre}){size}"


def sharding(mesh, dims) -> str:
    """``<@mesh_2x2, [{"a0"}, {}]>``, closed (the layout is the one given):
    a layout over ``mesh``; ``dims``: per dimension, the axes that split it,
    major first, each ``(axis, pre, size)`` (a whole axis is ``(axis, 1,
    its size)``, else the sub-axis ``"a0":(pre)size``)."""
    full = [[(a, pre, size, int(mesh[a])) for a, pre, size in d] for d in dims]
    return f"<@{mesh_symbol(mesh)}, [" + ", ".join("{" + ", ".join(_axis(*a) for a in d) + "}" for d in full) + "]>"


def whole_along(mesh, rank: int, dims) -> str:
    """``<@mesh_2, [{?}, {}]>``: a value of rank ``rank`` whole along ``dims``
    (here the last), its others open (the partitioner's to choose)."""
    whole = {d % rank for d in dims}
    return f"<@{mesh_symbol(mesh)}, [" + ", ".join("{}" if d in whole else "{?}" for d in range(rank)) + "]>"


def of_spec(mesh, spec) -> str:
    """:func:`sharding` of a value of rank ``len(spec)`` whose dimension ``d``
    is split by mesh axis ``spec[d]`` (-1: none)."""
    return sharding(mesh, [[(a, 1, int(mesh[a]))] if a >= 0 else [] for a in spec])


def tensor(mesh, dims) -> str:
    """``#sdy.sharding<...>``: an argument's or result's layout."""
    return "#sdy.sharding" + sharding(mesh, dims)


def per_value(*shardings: str) -> str:
    """``#sdy.sharding_per_value<[...]>``: an op's results' layouts."""
    return "#sdy.sharding_per_value<[" + ", ".join(shardings) + "]>"


def manual_axes(mesh) -> str:
    """``#sdy<manual_axes{"a0", "a1"}>``: every axis of ``mesh``."""
    return "#sdy<manual_axes{" + ", ".join(f'"{axis_name(a)}"' for a in range(len(mesh))) + "}>"
