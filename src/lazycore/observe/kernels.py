"""Per-kernel device time: which fused kernels of which program took the time.

A program XLA compiled runs as a sequence of kernels, one per instruction of
its optimized HLO's entry computation: a ``fusion`` (elementwise ops, a
reduction, a matmul with what XLA fused into it), a ``custom-call`` (a
library routine), a ``copy``. XLA's profiler (:class:`~lazycore.runtime.pjrt.KernelSession`,
what ``jax.profiler.trace`` uses) times each one as it runs. A
:class:`KernelProfile` groups those times by program and kernel, and says for
each kernel which HLO ops it holds and which of your lines they came from
(lazycore writes the user's ``file:line`` into the StableHLO, and XLA keeps it
in the instructions' metadata).

The profiler names the HLO module, not lazycore's program: every lazycore
module is ``main``. Executions are matched to programs by order: lazycore
notes each program it launches while the profile records, and an execution
is the next launch of a module of that name whose optimized HLO has every
kernel the execution ran. Programs that are not lazycore's (a ``jax.jit``
of your own) show under their module's name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_COMPUTATION = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")
# name = type opcode(...): a tuple type holds no " word(" (its comments, /*index=5*/, hold an "=")
_INSTRUCTION = re.compile(r"^\s*(ROOT\s+)?%?([\w.\-]+)\s*=\s*.*?\s([\w\-]+)\(")
_CALLS = re.compile(r"(?:calls|to_apply)=%?([\w.\-]+)")
# a loop's or a branch's computations: their instructions are kernels of their own
_BODIES = re.compile(r"(?:body|condition|true_computation|false_computation)=%?([\w.\-]+)")
_BRANCHES = re.compile(r"branch_computations=\{([^}]*)\}")
CONTAINERS = ("while", "conditional", "call")
"""Opcodes whose kernel runs other kernels (a loop's body, a branch): their time includes those."""
_LINE = re.compile(r'source_file="([^"]*)"\s+source_line=(\d+)')


@dataclass
class Kernel:
    """One instruction of a program's entry computation: a kernel it runs."""

    name: str
    opcode: str
    """``fusion``, ``custom-call``, ``copy``, ``dot``, ..."""
    ops: tuple[str, ...] = ()
    """The HLO ops it computes (a fusion's fused ops), each once, in order."""
    lines: tuple[str, ...] = ()
    """The user lines (``file:line``) its ops came from, each once, in order."""

    @property
    def what(self) -> str:
        if self.opcode in CONTAINERS:
            return f"{self.opcode} (its body's kernels are rows of their own)"
        inside = [op for op in self.ops if op not in ("parameter", "constant", "tuple", "get-tuple-element",
                                                      "bitcast", "broadcast")]
        if self.opcode == "fusion" and inside:
            return "fusion: " + ", ".join(inside[:6]) + (", ..." if len(inside) > 6 else "")
        return self.opcode


def kernels_of(hlo_text: str) -> dict[str, Kernel]:
    """The kernels of a program from its optimized HLO text: the entry
    computation's instructions, each with the ops and user lines of the
    computations it calls (a fusion's fused computation)."""
    computations: dict[str, list] = {}
    entry = None
    current = None
    for line in hlo_text.splitlines():
        m = _COMPUTATION.match(line)
        if m and "=" not in line.split("{", 1)[0].split("(", 1)[0]:
            current = computations.setdefault(m.group(2), [])
            if m.group(1):
                entry = m.group(2)
            continue
        if line.strip() == "}":
            current = None
            continue
        if current is None:
            continue
        m = _INSTRUCTION.match(line)
        if m:
            opcode = m.group(3)
            if opcode in CONTAINERS:
                bodies = _BODIES.findall(line) + [c.strip().lstrip("%") for b in _BRANCHES.findall(line)
                                                  for c in b.split(",") if c.strip()]
                if opcode == "call":
                    bodies += _CALLS.findall(line)
                current.append((m.group(2), opcode, (), _lines(line), bodies))
            else:
                current.append((m.group(2), opcode, _CALLS.findall(line), _lines(line), ()))
    if entry is None:
        return {}

    def inside(comp: str, seen: set) -> tuple[list, list]:
        ops, lines = [], []
        for _, opcode, calls, where, _ in computations.get(comp, ()):
            ops.append(opcode)
            lines.extend(where)
            for c in calls:
                if c not in seen:
                    seen.add(c)
                    o, w = inside(c, seen)
                    ops.extend(o)
                    lines.extend(w)
        return ops, lines

    out: dict[str, Kernel] = {}
    todo, done = [entry], set()
    while todo:
        comp = todo.pop()
        if comp in done:
            continue
        done.add(comp)
        for name, opcode, calls, where, bodies in computations.get(comp, ()):
            ops, lines = [], list(where)
            for c in calls:
                o, w = inside(c, {c})
                ops.extend(o)
                lines.extend(w)
            out[name] = Kernel(name, opcode, tuple(dict.fromkeys(ops)), tuple(dict.fromkeys(lines)))
            todo.extend(bodies)
    return out


def _lines(instruction: str) -> list[str]:
    return [f"{f.rsplit('/', 1)[-1]}:{n}" for f, n in _LINE.findall(instruction)]


@dataclass
class Row:
    """One kernel of one program over the profile."""

    program: str
    """``program N`` (lazycore's number for it, as in ``metrics.programs(every=True)``), or another module's name."""
    kernel: str
    time: float
    """Device seconds, all its runs together."""
    count: int
    """How many times it ran."""
    what: str = ""
    """What it computes: ``fusion: tanh, dot, ...``, ``custom-call``, ``copy``."""
    lines: tuple[str, ...] = ()
    """Your lines its ops came from."""
    container: bool = False
    """A loop or branch: its time includes kernels that are rows of their own (left out of totals and shares)."""

    @property
    def mean(self) -> float:
        return self.time / self.count if self.count else 0.0


@dataclass
class KernelProfile:
    """The kernels XLA ran while a profile recorded (``lazycore.profile.kernels()``)."""

    rows: list[Row] = field(default_factory=list)
    """One per (program, kernel), most device time first."""
    events: list = field(default_factory=list)
    """Every kernel run: ``(program, kernel, start, duration, device)``, ``start`` in
    ``time.perf_counter()`` seconds, oldest first (what a Perfetto trace shows)."""
    executions: dict[str, int] = field(default_factory=dict)
    """Program -> how many times it ran in the profile."""
    first_runs: dict[str, float] = field(default_factory=dict)
    """Program -> device seconds of its first run, for programs compiled or loaded inside the
    profile: kept out of the rows and totals, since XLA's CPU backend compiles a program's
    kernels as they first run (a first small matmul: hundreds of ms, the whole table)."""
    from_disk: list[str] = field(default_factory=list)
    """Programs loaded from the disk cache: the lines in their HLO are those of the process that
    compiled them (another script, or this one as it was then), so their rows name none."""

    @property
    def total(self) -> float:
        """Device seconds of all kernels (a loop's own row not added: its body's kernels are)."""
        return sum(r.time for r in self.rows if not r.container)

    def table(self, limit: int | None = 20) -> str:
        """The rows as text: program, kernel, total ms, count, mean µs, share of all kernel time, what it is, lines."""
        total = self.total or 1.0
        rows = self.rows if limit is None else self.rows[:limit]
        kw = max([28] + [len(r.kernel) for r in rows])
        head = f"{'program':<12} {'kernel':<{kw}} {'time ms':>9} {'count':>6} {'mean us':>9} {'share':>6}  what (your lines)"
        lines = [head]
        for r in rows:
            where = f" ({', '.join(r.lines[:3])}{', ...' if len(r.lines) > 3 else ''})" if r.lines else ""
            share = "     -" if r.container else f"{100 * r.time / total:>5.1f}%"
            lines.append(f"{r.program:<12} {r.kernel:<{kw}} {r.time * 1e3:>9.3f} {r.count:>6} {r.mean * 1e6:>9.1f} "
                         f"{share}  {r.what}{where}")
        left = len(self.rows) - len(rows)
        if left > 0:
            lines.append(f"... {left} more kernels")
        runs = ", ".join(f"{p} x{n}" for p, n in self.executions.items())
        lines.append(f"{sum(not r.container for r in self.rows)} kernels, {self.total * 1e3:.3f} ms of device time; "
                     f"executions: {runs or 'none'}")
        if self.first_runs:
            firsts = ", ".join(f"{p} {t * 1e3:.3f} ms" for p, t in self.first_runs.items())
            lines.append(f"first runs kept apart (XLA compiles a program's kernels as they first run): {firsts}")
        if self.from_disk:
            lines.append(f"{', '.join(self.from_disk)}: loaded from the disk cache, compiled by another process "
                         "(the lines it was recorded at are not known here)")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def build(kernel_events, launches, new_after: int | None = None) -> KernelProfile:
    """A :class:`KernelProfile` from a :class:`~lazycore.runtime.pjrt.KernelSession`'s
    kernels and launches (each ``(executable, device)``). ``new_after``: the number of
    the newest program made before the profile began (None: none is new); the first run of a
    later one is kept apart (:attr:`KernelProfile.first_runs`)."""
    runs: dict[int, list] = {}
    for e in kernel_events:
        runs.setdefault(e.run, []).append(e)
    ordered = sorted(runs.values(), key=lambda evs: evs[0].start)
    known: dict[int, tuple[str, dict, str]] = {}  # id(executable) -> (label, kernels, module)

    def described(exe):
        d = known.get(id(exe))
        if d is None:
            label, kernels = f"program {exe.number}", kernels_of(exe.hlo_text())
            if exe.from_disk:
                kernels = {n: Kernel(k.name, k.opcode, k.ops) for n, k in kernels.items()}
            d = known[id(exe)] = (label, kernels, exe.module_name())
        return d

    prof = KernelProfile()
    sums: dict[tuple[str, str], list] = {}
    at = 0
    for evs in ordered:
        module = evs[0].module
        names = {e.name for e in evs}
        label, kernels, first = module or "?", {}, False
        for j in range(at, len(launches)):
            lab, ks, mod = described(launches[j][0])
            if mod == module and names <= ks.keys():
                label, kernels, at = lab, ks, j + 1
                if launches[j][0].from_disk and label not in prof.from_disk:
                    prof.from_disk.append(label)
                first = new_after is not None and launches[j][0].number > new_after and label not in prof.executions
                break
        prof.executions[label] = prof.executions.get(label, 0) + 1
        for e in evs:
            prof.events.append((label, e.name, e.start, e.duration, e.device))
        if first:
            prof.first_runs[label] = sum(e.duration for e in evs)
            continue
        for e in evs:
            k = kernels.get(e.name)
            s = sums.get((label, e.name))
            if s is None:
                s = sums[(label, e.name)] = [0.0, 0, k.what if k else "", k.lines if k else (),
                                             k is not None and k.opcode in CONTAINERS]
            s[0] += e.duration
            s[1] += 1
    prof.rows = sorted((Row(p, k, t, n, what, lines, c) for (p, k), (t, n, what, lines, c) in sums.items()),
                       key=lambda r: -r.time)
    prof.events.sort(key=lambda e: e[2])
    return prof


class Last:
    """The most recent kernel profile, for ``metrics.report()``."""

    def __init__(self):
        self.profile: KernelProfile | None = None


LAST = Last()


def report_lines(limit: int = 10) -> list[str]:
    prof = LAST.profile
    if prof is None or not prof.rows:
        return []
    return ["", f"kernels (the last lazycore.profile.kernels(), top {limit} by device time):"] + [
        "  " + line for line in prof.table(limit).splitlines()]
