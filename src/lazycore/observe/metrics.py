"""Runtime counters, phase timings, graph sizes and the text report.

Counters answer "did it recompile / transfer / donate?" in tests and in the
field; timings give one duration (seconds) per barrier for each phase:
``trace`` (walk the graph, make the cache key), ``lowering`` (build the lazy
module, run the pass pipeline), ``compile`` (XLA) and ``execute``; host <->
device copies are timed as ``transfer``, and programs read from the
persistent compile cache as ``disk_load``. Only the most recent durations are
kept, so a long training loop does not grow them; counts, totals and maxima
cover everything since the last :func:`reset`. :func:`report` prints all of
it, with the compile cache's hit rate, graph sizes per barrier and the
fallback ops with the user lines that reached them.

Every timed phase also goes to the active profiler (:mod:`lazycore.profile`),
when there is one, and a compile slower than ``settings.slow_compile_ms``
logs a warning on the ``lazycore`` logger.
"""

from __future__ import annotations

import logging
import math

from lazycore.ir import events, memo, sourceloc
from lazycore.ir.context import LOCK
from lazycore.ir.config import settings
from lazycore.runtime import cache
from lazycore.runtime.diskcache import DISK
from lazycore.observe import kernels as _kernels
from lazycore.observe import memory as _memory
from lazycore.observe import placement
from lazycore.ir.events import PHASES, REPORT_PHASES, TIMINGS_KEPT

logger = logging.getLogger("lazycore")

_E = events.EVENTS
_counters = _E.counters
_timings = _E.timings
_totals = _E.totals
_graphs = _E.graphs
_graph_totals = _E.graph_totals
_fallback_sites = _E.fallback_sites

# The active profiler (lazycore.profile), or None: it gets every timed phase
# and graph size.
_recorder = None


def fallbacks() -> dict[str, dict[str, int]]:
    """Fallback counts by op name, then by user source location (``file:line``)."""
    with LOCK:
        return {op: dict(sites) for op, sites in _fallback_sites.items()}


def counters() -> dict[str, int]:
    """A snapshot of every counter."""
    with LOCK:
        return dict(_counters)


def timings() -> dict[str, list[float]]:
    """Durations in seconds per barrier phase, oldest first."""
    with LOCK:
        return {p: list(_timings[p]) for p in PHASES}


def transfer_timings() -> list[float]:
    """Durations in seconds of host <-> device copies, oldest first."""
    with LOCK:
        return list(_timings["transfer"])


def graph_sizes() -> list[tuple[int, int, int]]:
    """``(nodes, outputs, parameters)`` of each barrier's graph, oldest first."""
    with LOCK:
        return list(_graphs)


def programs(every: bool = False) -> list:
    """The most recent programs compiled for meshes, oldest first: each a
    :class:`~lazycore.observe.placement.MeshProgram` (its mesh, its inputs'
    and results' layouts, the collectives XLA inserted, per-device memory,
    the user line whose barrier made it). ``every=True``: every program
    compiled or loaded, on one device or a mesh, each a
    :class:`~lazycore.observe.memory.Program` with XLA's memory figures
    (argument, output, alias, temp and generated code bytes)."""
    return _memory.programs() if every else placement.programs()


def memory() -> dict[str, dict[str, int]]:
    """Per physical device: ``buffers`` and ``bytes`` live lazy values hold
    there, ``peak_bytes`` and ``peak_buffers`` (the most they held at once
    since the last :func:`reset`, with what each barrier's program added:
    :mod:`lazycore.observe.memory`), and the device allocator's own figures
    where it reports them (GPUs, TPUs: ``bytes_in_use``, ``peak_bytes_in_use``,
    ``bytes_limit``; nothing on the CPU)."""
    out = placement.memory()
    for name, p in _memory.peaks().items():
        if name not in out:
            out[name] = {"buffers": 0, "bytes": 0}
        out[name].update(p)
    return out


def reset() -> None:
    """Zero the counters and forget the timings, graph sizes and fallback sites."""
    with LOCK:
        _E.reset()
        _memory.LEDGER.reset()


def _on_phase(phase: str, start: float, end: float) -> None:
    if phase == "compile":
        _check_slow_compile(end - start)
    if _recorder is not None:
        _recorder.span(phase, start, end)


def _on_graph(nodes: int, outputs: int, params: int) -> None:
    if _recorder is not None:
        _recorder.graph(nodes, outputs, params)


def _check_slow_compile(xla_seconds: float) -> None:
    """Log one warning for a compile (lowering + XLA) over the threshold."""
    lowering = _timings["lowering"][-1] if _timings["lowering"] else 0.0
    ms = (lowering + xla_seconds) * 1e3
    if ms <= settings.slow_compile_ms:
        return
    nodes, outputs, params = _graphs[-1] if _graphs else (0, 0, 0)
    logger.warning(
        "lazycore: slow compile: %.1f ms (lowering %.1f ms, XLA %.1f ms; threshold %s ms) for a graph of "
        "%d nodes, %d outputs, %d parameters; barrier reached from %s",
        ms, lowering * 1e3, xla_seconds * 1e3, settings.slow_compile_ms, nodes, outputs, params,
        sourceloc.user_location(),
    )


events.listen("phase", _on_phase)
events.listen("graph", _on_graph)


# --- the report ----------------------------------------------------------------------


def _percentile(ordered: list, q: float):
    """Nearest-rank percentile of a sorted, non-empty list."""
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _median(ordered: list):
    n = len(ordered)
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # unreachable


def _disk_line(c: dict) -> str:
    if settings.cache_dir is None:
        return "persistent compile cache: off"
    entries, size = DISK.usage()
    return (
        f"persistent compile cache: {c['disk_cache_hits']} loads, {c['disk_cache_writes']} writes, "
        f"{c['disk_cache_errors']} errors; {entries} programs, {_bytes(size)} of {_bytes(settings.cache_max_bytes)} "
        f"in {settings.cache_dir}"
    )


def report() -> str:
    """Everything above as text: counters, phase timings (count, total,
    median, p90, max in ms), compile cache hits and misses, the persistent
cache's loads, writes and size, graph sizes per
    barrier, the tracing memos' sizes, fallback ops by name with the user
    lines that reached them, the mesh programs (:func:`programs`), the
    memory live values hold per device and its peaks (:func:`memory`), every
    program's memory figures, and the last kernel profile's top kernels
    (``lazycore.profile.kernels()``). A consistent
    snapshot: no thread records, runs or counts while it is made
    (:data:`lazycore.ir.context.LOCK`)."""
    with LOCK:
        return _report()


def _report() -> str:
    c = _counters
    lines = ["lazycore metrics report", "", "counters:"]
    width = max(len(k) for k in c)
    for k, v in c.items():
        extra = f"  ({_bytes(v)})" if k.startswith("bytes_") else ""
        lines.append(f"  {k:<{width}}  {v:>10}{extra}")

    lines += ["", "timings (ms):"]
    lines.append(f"  {'phase':<9} {'count':>8} {'total':>11} {'median':>10} {'p90':>10} {'max':>10}")
    truncated = False
    for p in REPORT_PHASES:
        count, total, mx = _totals[p]
        kept = sorted(_timings[p])
        if not count or not kept:
            lines.append(f"  {p:<9} {count:>8} {total * 1e3:>11.3f} {'-':>10} {'-':>10} {'-':>10}")
            continue
        truncated |= count > len(kept)
        lines.append(
            f"  {p:<9} {count:>8} {total * 1e3:>11.3f} {_median(kept) * 1e3:>10.3f} "
            f"{_percentile(kept, 0.9) * 1e3:>10.3f} {mx * 1e3:>10.3f}"
        )
    if truncated:
        lines.append(f"  (median and p90 over the most recent {TIMINGS_KEPT} of each phase)")

    hits, misses = c["cache_hits"], c["compiles"]
    looked = hits + misses
    rate = f"{100.0 * hits / looked:.1f}%" if looked else "-"

    lines += [
        "",
        f"compile cache: {hits} hits, {misses} misses (compiles), hit rate {rate}; "
        f"{cache.size()} programs cached (limit {settings.cache_size})",
        _disk_line(c),
        "tracing memos (entries of bound): "
        + ", ".join(f"{name} {n}/{bound}" for name, (n, bound) in memo.sizes().items()),
    ]

    barriers, total_nodes, max_nodes = _graph_totals
    lines += ["", f"graph sizes per barrier: {barriers} barriers"]
    if barriers and _graphs:
        lines.append(f"  {'':<10} {'mean':>10} {'median':>8} {'p90':>8} {'max':>8}")
        for i, name in enumerate(("nodes", "outputs", "parameters")):
            kept = sorted(g[i] for g in _graphs)
            mean = total_nodes / barriers if i == 0 else sum(kept) / len(kept)
            top = max_nodes if i == 0 else kept[-1]
            lines.append(f"  {name:<10} {mean:>10.1f} {_median(kept):>8g} {_percentile(kept, 0.9):>8} {top:>8}")

    lines += ["", f"fallbacks: {c['fallbacks']} calls, {len(_fallback_sites)} ops"]
    for op, sites in sorted(_fallback_sites.items(), key=lambda kv: -sum(kv[1].values())):
        lines.append(f"  {op}: {sum(sites.values())}")
        for loc, n in sorted(sites.items(), key=lambda kv: -kv[1]):
            lines.append(f"      {n:>6}  {loc}")
    lines += placement.report_lines(_bytes)
    lines += _memory_lines()
    lines += _kernels.report_lines()
    return "\n".join(lines) + "\n"


def _memory_lines() -> list[str]:
    lines = []
    progs = list(_memory.LEDGER.programs)
    if progs:
        shown = progs[-8:]
        more = f"; the {len(shown)} most recent, the rest in metrics.programs(every=True)" if len(progs) > 8 else ""
        lines += ["", f"programs: {len(progs)} (most recent last; XLA's memory per device{more})"]
        for p in shown:
            how = "loaded" if p.loaded else "compiled"
            mem = ", ".join(f"{k} {_bytes(v)}" for k, v in p.memory.items()) or "no figures"
            lines.append(f"  program {p.number} on {p.device}, {p.nodes} nodes, {how} for the barrier at {p.where}")
            lines.append(f"     {mem}")
    peaks = _memory.peaks()
    if peaks:
        lines += ["", "peak memory since the last reset (live lazy values and each program's results and scratch):"]
        for name, p in peaks.items():
            lines.append(f"  {name}: {_bytes(p['peak_bytes'])} in {p['peak_buffers']} buffers at most")
    return lines
