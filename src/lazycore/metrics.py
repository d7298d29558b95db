"""Runtime counters, phase timings, graph sizes and the text report.

Counters answer "did it recompile / transfer / donate?" in tests and in the
field; timings give one duration (seconds) per barrier for each phase:
``trace`` (walk the graph, make the cache key), ``lowering`` (build the lazy
module, run the pass pipeline), ``compile`` (XLA) and ``execute``; host <->
device copies are timed as ``transfer``. Only the most recent durations are
kept, so a long training loop does not grow them; counts, totals and maxima
cover everything since the last :func:`reset`. :func:`report` prints all of
it, with the compile cache's hit rate, graph sizes per barrier and the
fallback ops with the user lines that reached them.

Every timed phase also goes to the active profiler (:mod:`lazycore.profile`),
when there is one, and a compile slower than ``settings.slow_compile_ms``
logs a warning on the ``lazycore`` logger.
"""

from __future__ import annotations

import contextlib
import logging
import math
import sys
import time
from collections import deque

COUNTERS = (
    "compiles",
    "cache_hits",
    "executions",
    "fallbacks",  # ops a frontend ran outside lazycore (it bumps this itself)
    "transfers_to_device",
    "transfers_to_host",
    "bytes_to_device",
    "bytes_to_host",
    "donated_buffers",
    "failed_outputs",  # program outputs that hold an error (lazycore.failures)
)
PHASES = ("trace", "lowering", "compile", "execute")
REPORT_PHASES = PHASES + ("transfer",)
TIMINGS_KEPT = 10_000

logger = logging.getLogger("lazycore")

_counters: dict[str, int] = dict.fromkeys(COUNTERS, 0)
_timings: dict[str, deque] = {p: deque(maxlen=TIMINGS_KEPT) for p in REPORT_PHASES}
# phase -> [count, total seconds, max seconds] since the last reset
_totals: dict[str, list] = {p: [0, 0.0, 0.0] for p in REPORT_PHASES}
# (nodes, outputs, parameters) per barrier, most recent last
_graphs: deque = deque(maxlen=TIMINGS_KEPT)
_graph_totals = [0, 0, 0]  # barriers, max nodes, total nodes

# The active profiler (lazycore.profile), or None: one check per timed phase.
_recorder = None


def bump(name: str, n: int = 1) -> None:
    if name not in _counters:
        raise KeyError(f"unknown counter '{name}' (known: {', '.join(COUNTERS)})")
    _counters[name] += n


_fallback_sites: dict[str, dict[str, int]] = {}


def fallback(op: str, location: str) -> None:
    """Count a frontend op that ran outside lazycore, with the user line that reached it."""
    _counters["fallbacks"] += 1
    sites = _fallback_sites.setdefault(op, {})
    sites[location] = sites.get(location, 0) + 1


def fallbacks() -> dict[str, dict[str, int]]:
    """Fallback counts by op name, then by user source location (``file:line``)."""
    return {op: dict(sites) for op, sites in _fallback_sites.items()}


def counters() -> dict[str, int]:
    """A snapshot of every counter."""
    return dict(_counters)


def timings() -> dict[str, list[float]]:
    """Durations in seconds per barrier phase, oldest first."""
    return {p: list(_timings[p]) for p in PHASES}


def transfer_timings() -> list[float]:
    """Durations in seconds of host <-> device copies, oldest first."""
    return list(_timings["transfer"])


def graph_sizes() -> list[tuple[int, int, int]]:
    """``(nodes, outputs, parameters)`` of each barrier's graph, oldest first."""
    return list(_graphs)


def _finish(phase: str, start: float, end: float) -> None:
    seconds = end - start
    _timings[phase].append(seconds)
    tot = _totals[phase]
    tot[0] += 1
    tot[1] += seconds
    if seconds > tot[2]:
        tot[2] = seconds
    if phase == "compile":
        _check_slow_compile(seconds)
    if _recorder is not None:
        _recorder.span(phase, start, end)


def record(phase: str, seconds: float) -> None:
    """Add a duration measured elsewhere (it ends now)."""
    end = time.perf_counter()
    _finish(phase, end - seconds, end)


@contextlib.contextmanager
def timed(phase: str):
    start = time.perf_counter()
    try:
        yield
    finally:
        _finish(phase, start, time.perf_counter())


def record_graph(nodes: int, outputs: int, params: int) -> None:
    """The size of the graph a barrier runs (called once per barrier, before compile or execute)."""
    _graphs.append((nodes, outputs, params))
    g = _graph_totals
    g[0] += 1
    g[2] += nodes
    if nodes > g[1]:
        g[1] = nodes
    if _recorder is not None:
        _recorder.graph(nodes, outputs, params)


def _check_slow_compile(xla_seconds: float) -> None:
    """Log one warning for a compile (lowering + XLA) over the threshold."""
    from lazycore.config import settings

    lowering = _timings["lowering"][-1] if _timings["lowering"] else 0.0
    ms = (lowering + xla_seconds) * 1e3
    if ms <= settings.slow_compile_ms:
        return
    from lazycore import sourceloc

    nodes, outputs, params = _graphs[-1] if _graphs else (0, 0, 0)
    # Start the search above the timer's ``with`` exit (contextlib's frames are
    # not library frames to sourceloc): 1 is our caller, as user_location counts.
    depth, f = 1, sys._getframe(1)
    for i in range(1, 8):
        if f is None:
            break
        if f.f_code.co_filename == contextlib.__file__:
            depth = i + 1
        f = f.f_back
    logger.warning(
        "lazycore: slow compile: %.1f ms (lowering %.1f ms, XLA %.1f ms; threshold %s ms) for a graph of "
        "%d nodes, %d outputs, %d parameters; barrier reached from %s",
        ms, lowering * 1e3, xla_seconds * 1e3, settings.slow_compile_ms, nodes, outputs, params,
        sourceloc.user_location(depth + 1),
    )


def reset() -> None:
    """Zero the counters and forget the timings, graph sizes and fallback sites."""
    for k in _counters:
        _counters[k] = 0
    _fallback_sites.clear()
    for d in _timings.values():
        d.clear()
    for tot in _totals.values():
        tot[:] = [0, 0.0, 0.0]
    _graphs.clear()
    _graph_totals[:] = [0, 0, 0]


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


def report() -> str:
    """Everything above as text: counters, phase timings (count, total,
    median, p90, max in ms), compile cache hits and misses, graph sizes per
    barrier, and fallback ops by name with the user lines that reached them."""
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
    from lazycore import cache
    from lazycore.config import settings

    lines += [
        "",
        f"compile cache: {hits} hits, {misses} misses (compiles), hit rate {rate}; "
        f"{cache.size()} programs cached (limit {settings.cache_size})",
    ]

    barriers, max_nodes, total_nodes = _graph_totals
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
    return "\n".join(lines) + "\n"
