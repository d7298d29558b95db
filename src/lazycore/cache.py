"""The compile cache: barrier programs by structure, so a hit skips MLIR.

Key choice. A key is a 128-bit BLAKE2b digest over everything that decides
what the compiled program computes and how it is called:

* the graph *as walked*: for every node in the barrier's post-order walk its
  structural digest (op, attributes, result types, operand digests; see
  :mod:`lazycore.graph`) and, for every operand edge, the walk position of the
  node it comes from. Node digests alone cannot tell ``add(a, a)`` from
  ``add(a, b)``: leaves hash their type only. The edge positions record how
  leaves (and inner nodes) are shared, a stronger form of the
  parameter-index pattern, so two graphs with one key are the same DAG and
  bind the same parameters in the same places;
* the outputs (walk positions and result indices) and the parameter types;
* the device (name and chip model), the donation plan, the pass pipeline,
  any user lowerings or PDL patterns registered, and the lazycore, jaxlib and
  StableHLO versions.

A cryptographic digest of an unambiguous encoding makes a wrong hit as
likely as a 128-bit collision, so no structural comparison is needed on a
hit. The cache holds at most ``config.settings.cache_size`` programs and
drops the least recently used first.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

from lazycore import metrics
from lazycore.config import settings


_ENVIRONMENTS: dict[tuple, bytes] = {}


def environment() -> bytes:
    """What outside the graph changes the compiled program, as bytes; kept
    per state of the user's lowerings and PDL patterns (every barrier asks)."""
    from lazycore.passes.lowering import registry

    state = (tuple(registry.USER.items()), tuple(registry.PDL_SOURCES))
    env = _ENVIRONMENTS.get(state)
    if env is None:
        import lazycore
        from lazycore import pjrt

        user = sorted((name, fn.__module__, fn.__qualname__, id(fn)) for name, fn in registry.USER.items())
        pdl = [hashlib.blake2b(t.encode(), digest_size=16).hexdigest() for t in registry.PDL_SOURCES]
        env = repr((lazycore.__version__, pjrt.jaxlib_version(), pjrt.consumer_stablehlo_version(), user, pdl))
        if len(_ENVIRONMENTS) >= 64:
            _ENVIRONMENTS.clear()
        env = _ENVIRONMENTS[state] = env.encode()
    return env


def make_key(walk: bytes, device, donate: dict[int, int], pipeline: str) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    h.update(repr((device.name, device.kind, sorted(donate.items()), pipeline)).encode())
    h.update(b"\0")
    h.update(environment())
    h.update(b"\0")
    h.update(walk)
    return h.digest()


class CompileCache:
    """LRU map from key to compiled program."""

    def __init__(self):
        self._entries: OrderedDict[bytes, object] = OrderedDict()

    def get(self, key: bytes):
        exe = self._entries.get(key)
        if exe is not None:
            self._entries.move_to_end(key)
            metrics.bump("cache_hits")
        return exe

    def put(self, key: bytes, exe) -> None:
        self._entries[key] = exe
        self._entries.move_to_end(key)
        while len(self._entries) > settings.cache_size:
            self._entries.popitem(last=False)

    def __contains__(self, key: bytes) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()


CACHE = CompileCache()


def size() -> int:
    return len(CACHE)


def clear() -> None:
    """Forget every compiled program, the device copies of recent scalar
    packs and the barrier walks kept for recall (:mod:`lazycore.stepplans`)."""
    from lazycore import barrier, stepplans

    CACHE.clear()
    barrier._PACKS.entries.clear()
    stepplans.clear()
