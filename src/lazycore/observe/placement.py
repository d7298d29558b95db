"""Where programs and data live: mesh programs' layouts and collectives, memory per device.

A program split over a mesh is only as good as the layouts XLA's SPMD
partitioner chose and the communication it inserted for them, and neither is
visible from the lazy graph. Each new mesh program is described once, when it
is compiled or loaded (the ``program`` event): its mesh, its inputs' and
results' layouts, the collectives in XLA's optimized HLO (by kind), XLA's
memory figures for one device, and the user line whose barrier made it.
``lazycore.metrics.programs()`` returns the recent ones and
``lazycore.metrics.report()`` prints them, with the bytes live values hold on
each physical device (:func:`memory`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from lazycore.ir import events, sourceloc
from lazycore.runtime import pjrt
from lazycore.runtime.device import known_devices
from lazycore.observe.memory import per_device

COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")

# an HLO instruction's opcode (its async "-start" half counted once), not an
# instruction name ("%all-reduce.1") or an operand reference
_OPCODE = re.compile(r"(?<![%\w.-])(" + "|".join(COLLECTIVES) + r")(?:-start)?\(")


def collectives(hlo_text: str) -> dict[str, int]:
    """Collective instructions in an HLO module's text, by kind (only kinds present)."""
    counts: dict[str, int] = {}
    for m in _OPCODE.finditer(hlo_text):
        counts[m.group(1)] = counts.get(m.group(1), 0) + 1
    return counts


@dataclass
class MeshProgram:
    """One program compiled (or loaded) for a mesh."""

    mesh: dict[str, int]
    """Axis name -> size."""
    inputs: list[str]
    """Each argument's layout: its spec (an axis name or None per dimension) or XLA's text."""
    outputs: list[str]
    """Each result's layout, as XLA chose it."""
    collectives: dict[str, int]
    """Collective instructions XLA inserted, by kind."""
    memory: dict[str, int] = field(default_factory=dict)
    """XLA's figures for one device: argument, output, temporary and code bytes."""
    where: str = "?"
    """The user line whose barrier needed the program."""
    loaded: bool = False
    """Read from the persistent compile cache instead of compiled."""


def _layout(sharding) -> str:
    if sharding is None:
        return "replicated"
    return str(sharding.spec) if sharding.spec is not None else str(sharding)


def _memory(loaded) -> dict[str, int]:
    try:
        stats = loaded.get_compiled_memory_stats()
    except Exception:  # noqa: BLE001 - a backend without the figures reports none
        return {}
    return {
        name: int(getattr(stats, f"{name}_size_in_bytes"))
        for name in ("argument", "output", "temp", "generated_code")
        if hasattr(stats, f"{name}_size_in_bytes")
    }


def describe(exe, device, walk, loaded: bool = False) -> MeshProgram:
    """The :class:`MeshProgram` of executable ``exe`` compiled for mesh ``device`` from ``walk``."""
    target = device.pjrt
    try:
        text = "\n".join(m.to_string() for m in exe.loaded.hlo_modules())
    except Exception:  # noqa: BLE001 - a deserialized program may not keep its HLO
        text = ""
    inputs = [_layout(leaf.sharding) for leaf in walk.data] if walk is not None else []
    inputs += ["replicated"] * (len(exe.input_types) - len(inputs))  # packed scalar parameters
    return MeshProgram(
        mesh=dict(zip(target.axis_names, target.shape)),
        inputs=inputs,
        outputs=[_layout(s) for s in exe.output_shardings],
        collectives=collectives(text),
        memory=_memory(exe.loaded),
        where=sourceloc.user_location(),
        loaded=loaded,
    )


def _on_program(exe, device, walk, loaded) -> None:
    if isinstance(getattr(device, "pjrt", None), pjrt.MeshTarget):
        events.EVENTS.programs.append(describe(exe, device, walk, loaded))


events.listen("program", _on_program)


def programs() -> list[MeshProgram]:
    """The most recent mesh programs (``events.PROGRAMS_KEPT``), oldest first."""
    return list(events.EVENTS.programs)


def memory() -> dict[str, dict[str, int]]:
    """Per physical device (jax's name, such as ``cpu:2``): ``buffers``
    and ``bytes`` held by live lazy values (a value split over a mesh counts
    its block on each device), and what the device's allocator reports
    (GPUs and TPUs: bytes in use, peak, limit; nothing on the CPU)."""
    out: dict[str, dict[str, int]] = {}
    for d, (buffers, nbytes) in per_device(known_devices()).items():
        out[str(d)] = {"buffers": buffers, "bytes": nbytes, **pjrt.memory_stats(d)}
    return out


def _shape(mesh: dict) -> str:
    return " x ".join(f"{k}={v}" for k, v in mesh.items())


def report_lines(show_bytes) -> list[str]:
    lines = []
    progs = programs()
    if progs:
        lines += ["", f"mesh programs: {len(progs)} (most recent last)"]
        for i, p in enumerate(progs, 1):
            how = "loaded" if p.loaded else "compiled"
            coll = ", ".join(f"{k} {v}" for k, v in sorted(p.collectives.items())) or "none"
            lines.append(f"  {i}. mesh {_shape(p.mesh)}, {how} for the barrier at {p.where}")
            lines.append(f"     inputs:  {', '.join(p.inputs) or '-'}")
            lines.append(f"     outputs: {', '.join(p.outputs) or '-'}")
            lines.append(f"     collectives XLA inserted: {coll}")
            if p.memory:
                mem = ", ".join(f"{k} {show_bytes(v)}" for k, v in p.memory.items())
                lines.append(f"     per device: {mem}")
    mem = memory()
    if mem:
        lines += ["", "device memory (live lazy values):"]
        for name, stats in mem.items():
            extra = "".join(f", {k} {show_bytes(v) if 'bytes' in k else v}" for k, v in stats.items()
                            if k not in ("buffers", "bytes"))
            lines.append(f"  {name}: {stats['buffers']} buffers, {show_bytes(stats['bytes'])}{extra}")
    return lines
