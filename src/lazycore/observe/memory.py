"""Peak device memory, and XLA's memory figures for every program.

``torch.cuda.max_memory_allocated`` answers "how much memory did my step
need at most"; on a lazy device the answer comes from two places:

* Where the PJRT device's allocator keeps figures (GPUs, TPUs:
  ``peak_bytes_in_use``, ``bytes_in_use``, ``bytes_limit``), its peak, once
  it has risen past what it was at the last reset (an allocator's peak cannot
  be reset, only outgrown).
* Everywhere (the CPU client keeps none: jax's ``memory_stats()`` is None),
  lazycore's own account of the buffers its values hold, taken at each
  barrier, when memory grows: the bytes live values held when it began, the
  program's arguments no live value holds (an input the step dropped, as
  ``x = x * 2`` drops x), and what XLA says the program adds on the device,
  its results less those it writes into donated inputs and its scratch
  buffer (``output - alias + temp`` of the compiled program's memory
  analysis). Every query and reset counts the bytes held then too. A value
  uploaded and dropped again before any barrier or query is not seen.

Counting what live values hold is a walk over the device's live tensors at
each barrier (about as long as the barrier's own walk over them), so it starts
with the first memory question (a query or a reset, ``metrics.memory()``).
Until then each barrier counts only what its program needs at once
(``argument + output - alias + temp``: for a training step, which reads every
parameter, gradient and state tensor, nearly all of it) at no cost beyond a
dictionary look-up.

Each barrier's figures are those of the device (or mesh) whose barrier it
is, per physical device. Besides, every program compiled or loaded is
described once with XLA's figures (:class:`Program`:
``lazycore.metrics.programs(every=True)``), not only those of meshes.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from lazycore.ir import events, sourceloc
from lazycore.dialect.types import to_numpy_dtype
from lazycore.ir.context import LOCK
from lazycore.ir.graph import Data
from lazycore.ir.memo import Memo
from lazycore.runtime import pjrt
from lazycore.runtime.device import known_devices
from lazycore.runtime.transfer import live_bytes

PROGRAMS_KEPT = 64
"""Programs described (:func:`programs`), most recent last."""


@dataclass
class Program:
    """One program compiled (or read from the persistent cache), as XLA sees it."""

    number: int
    """The process's number for it (``program 3``; kernel profiles name it so)."""
    device: str
    """The lazycore device or mesh it runs on."""
    memory: dict[str, int] = field(default_factory=dict)
    """XLA's figures per device, in bytes: ``argument``, ``output``, ``alias``
    (results written into donated arguments), ``temp`` (its scratch buffer),
    ``generated_code``."""
    nodes: int = 0
    """Nodes of the graph it was compiled from (0: not known)."""
    where: str = "?"
    """The user line whose barrier needed it."""
    loaded: bool = False
    """Read from the persistent compile cache instead of compiled."""

    @property
    def peak(self) -> int:
        """What running it needs on a device at once: arguments, results not
        written into arguments, and scratch."""
        m = self.memory
        return m.get("argument", 0) + m.get("output", 0) - m.get("alias", 0) + m.get("temp", 0)


class Ledger:
    """Peaks per physical device since the last reset, and the programs described."""

    def __init__(self):
        self.peaks: dict = {}  # PJRT device -> [bytes, buffers]
        self.started: dict = {}  # lazycore device -> its live figures per PJRT device when its barrier began
        self.allocator_base: dict = {}  # PJRT device -> the allocator's peak at the last reset
        self.exact = False
        """Whether barriers walk the live values (from the first memory question on)."""
        self.programs: deque = deque(maxlen=PROGRAMS_KEPT)

    def note(self, pd, buffers: int, nbytes: int) -> None:
        p = self.peaks.get(pd)
        if p is None:
            self.peaks[pd] = [nbytes, buffers]
            return
        if nbytes > p[0]:
            p[0] = nbytes
        if buffers > p[1]:
            p[1] = buffers

    def reset(self) -> None:
        """Peaks from now on: what live values hold now."""
        self.peaks.clear()
        self.programs.clear()
        for d in known_devices():
            for pd, (n, b) in live(d).items():
                self.note(pd, n, b)
                self.allocator_base[pd] = pjrt.memory_stats(pd).get("peak_bytes_in_use", 0)

    def reset_device(self, device) -> None:
        """:meth:`reset` for one lazycore device's physical devices (``torch.lazy.reset_peak_memory_stats``)."""
        for pd, (n, b) in live(device).items():
            self.peaks[pd] = [b, n]
            self.allocator_base[pd] = pjrt.memory_stats(pd).get("peak_bytes_in_use", 0)


LEDGER = Ledger()


def per_device(devices) -> dict:
    """PJRT device -> ``(buffers, bytes)`` of the device buffers the live
    handles of ``devices`` (lazycore devices or meshes) hold there: a buffer
    split over a mesh counts its block on each device, a replicated one its
    whole size on each, a stack whose rows live handles hold once. A walk
    over the registries, for memory queries only.

    A row is counted by its stack's buffer (``Data.storage``), never by
    ``Data.buffer``: that slices the row out of its stack, by a program,
    and a leaf with a buffer of its own no longer passes its stack whole,
    so a query would make the next rolled steps stack the rows again
    (11 programs and 126 runs for :func:`lazycore.metrics.report` between
    two steps of a 5-layer AdamW model)."""
    out: dict = {}
    seen: set[int] = set()
    for dev in devices:
        for handle in dev.arena.live():
            node = handle._value.node
            if type(node) is not Data:
                continue
            # a row already read out holds its own buffer besides the stack's
            for buffer in (node._buffer, node.storage):
                shards = getattr(buffer, "addressable_shards", None)
                if shards is None or id(buffer) in seen:  # none yet, or a failed value's: no memory
                    continue
                seen.add(id(buffer))
                for shard in shards:
                    n, b = out.get(shard.device, (0, 0))
                    out[shard.device] = (n + 1, b + shard.data.nbytes)
    return out


def live(device) -> dict:
    """PJRT device -> ``(buffers, bytes)`` the live values of lazycore device
    ``device`` hold there (a walk over its live handles)."""
    target = device.pjrt
    if target is None:
        return {}
    if isinstance(target, pjrt.MeshTarget):
        found = per_device([device])
        return {pd: found.get(pd, (0, 0)) for pd in target.devices}
    return {target: live_bytes(device)}


_NBYTES = Memo("observe.type_bytes", 4096)
"""id(TensorType) -> (the type, its bytes): the walk runs at every barrier, and
a recalled step's results share their type objects, so most look-ups find
the object itself (hashing the type's shape cost more than the rest of the
walk)."""
_nbytes_of = _NBYTES.get  # bound once: per walked value (see lazycore.ir.graph)


def _nbytes(t) -> int:
    e = _nbytes_of(id(t))
    if e is None or e[0] is not t:
        e = _NBYTES.put(id(t), (t, t.size * to_numpy_dtype(t.dtype).itemsize))
    return e[1]


def _held(device) -> tuple[int, int, set]:
    """``(buffers, bytes, ids of the buffers)`` live handles of a single device hold."""
    seen: set[int] = set()
    total = 0
    for handle in device.arena.live():
        node = handle._value[0]
        if type(node) is Data:
            row = node.row
            key = id(node._buffer if row is None else row[0].buffer)
            if key not in seen:
                seen.add(key)
                total += _nbytes(node.types[0])
    return len(seen), total, seen


def _physical(target) -> tuple:
    return target.devices if isinstance(target, pjrt.MeshTarget) else (target,)


def _on_barrier_start(device) -> None:
    target = device.pjrt
    if target is None:
        return
    pjrt.LAUNCHES.last.pop(target, None)  # (a program run outside a barrier: its arguments are not ours to keep)
    if not LEDGER.exact:
        return
    if isinstance(target, pjrt.MeshTarget):
        now, held = live(device), None
    else:
        n, b, held = _held(device)
        now = {target: (n, b)}
    LEDGER.started[device] = (now, held)
    for pd, (n, b) in now.items():
        LEDGER.note(pd, n, b)


def _on_barrier(walk, device, hit, donate, pipeline, loaded) -> None:
    launched = pjrt.LAUNCHES.last.pop(device.pjrt, None)
    started = LEDGER.started.pop(device, None)
    if launched is None:
        return
    exe, args = launched
    m = exe.memory()
    grows = m.get("output", 0) - m.get("alias", 0) + m.get("temp", 0)
    made = len(exe.output_types) - len(donate)
    if started is None:  # before the first question: what the program itself needs, no walk
        for pd in _physical(device.pjrt):
            LEDGER.note(pd, len(args) + made, m.get("argument", 0) + grows)
        return
    now, held = started
    # arguments no live handle holds (an input the step dropped, as ``x = x * 2``
    # does) are on the device while the program runs all the same
    loose = [a for a in args if id(a) not in held] if held is not None else ()
    loose_bytes = sum(a.nbytes for a in loose)
    for pd, (n, b) in now.items():
        LEDGER.note(pd, n + made + len(loose), b + grows + loose_bytes)


def _on_program(exe, device, walk, loaded) -> None:
    LEDGER.programs.append(Program(
        number=exe.number, device=device.name, memory=dict(exe.memory()),
        nodes=len(walk.order) if walk is not None else 0, where=sourceloc.user_location(), loaded=loaded,
    ))


events.listen("barrier_start", _on_barrier_start)
events.listen("barrier", _on_barrier)
events.listen("program", _on_program)


# --- queries -------------------------------------------------------------------------


def current(device) -> tuple[int, int]:
    """``(buffers, bytes)`` live values of lazycore device ``device`` hold now, summed over its physical devices."""
    LEDGER.exact = True
    with LOCK:
        now = live(device)
        for pd, (n, b) in now.items():
            LEDGER.note(pd, n, b)
    return sum(n for n, _ in now.values()), sum(b for _, b in now.values())


def peak(device) -> tuple[int, int]:
    """``(buffers, bytes)`` at most held at once since the last reset, on the
    physical device of lazycore device ``device`` (on a mesh: the fullest one),
    lazycore's own account."""
    LEDGER.exact = True
    with LOCK:
        now = live(device)
        for pd, (n, b) in now.items():
            LEDGER.note(pd, n, b)
        found = [LEDGER.peaks[pd] for pd in now]
    if not found:
        return 0, 0
    return max(p[1] for p in found), max(p[0] for p in found)


def allocator_peak(device) -> int | None:
    """The device allocator's peak bytes in use, where it keeps one and it
    rose past its value at the last reset; else None."""
    target = device.pjrt
    pds = target.devices if isinstance(target, pjrt.MeshTarget) else (() if target is None else (target,))
    best = None
    for pd in pds:
        p = pjrt.memory_stats(pd).get("peak_bytes_in_use")
        if p is not None and p > LEDGER.allocator_base.get(pd, 0):
            best = p if best is None else max(best, p)
    return best


def max_allocated(device) -> int:
    """Peak bytes on ``device`` since the last reset: the allocator's where it
    keeps one and outgrew its reset value, else lazycore's own account."""
    mine = peak(device)[1]
    theirs = allocator_peak(device)
    return mine if theirs is None else max(mine, theirs)


def reset_peak(device) -> None:
    LEDGER.exact = True
    with LOCK:
        LEDGER.reset_device(device)


def peaks() -> dict[str, dict[str, int]]:
    """Per physical device (jax's name): ``peak_bytes`` and ``peak_buffers`` since the last reset."""
    LEDGER.exact = True
    with LOCK:
        for d in known_devices():
            for pd, (n, b) in live(d).items():
                LEDGER.note(pd, n, b)
        return {str(pd): {"peak_bytes": p[0], "peak_buffers": p[1]} for pd, p in LEDGER.peaks.items()}


def programs() -> list[Program]:
    """The most recent programs compiled or loaded, mesh or not, oldest first."""
    with LOCK:
        return list(LEDGER.programs)
