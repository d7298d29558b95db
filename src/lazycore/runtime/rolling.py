"""Loops kept as loops at a barrier: the chains of identical layers in a
walk (:mod:`lazycore.passes.rolled_chains` finds them, on lazy graph nodes
here).

The compiler emits the chains; before a new program is made (compiled or
loaded), the barrier asks which parameters it takes stacked
(:func:`stack_groups`), without loading MLIR, so a program loaded from disk
still needs no compiler. A captured step's replay is one ``call`` node
(:mod:`lazycore.trace.capture`), whose body hides its layers from a walk:
the chains of a walk with call nodes are looked for in the walk with their
bodies in place (:func:`inlined`), made only when a program is, so a replay
stays one node and its program rolls what a trace of the step would roll.

``settings.roll_loops`` (``"auto"`` by default: each platform's entry in
:data:`DEFAULTS`; ``LAZYCORE_ROLL_LOOPS=0`` or ``1`` turns it off or on
everywhere): the decision it makes for a device (:func:`least_copies`: from
how many identical layers a run is rolled) is part of the compile key. Nothing here touches MLIR.
"""

from __future__ import annotations

from lazycore.ir.config import settings
from lazycore.ir.graph import LOG, Node, Scalar, Value
from lazycore.ir.regions import RegionNode
from lazycore.ir import remake
from lazycore.ir.walk import Walk
from lazycore.passes.rolled_chains import MIN_COPIES, Chain, Stacks, find_chains as _find_chains  # noqa: F401
from lazycore.runtime import checks, pjrt


def find_chains(order: list[Node], outputs: list[Value], flags: list[Value] = (),
                least: int = MIN_COPIES) -> list[Chain]:
    """The chains of at least ``least`` copies to emit as loops in a walk, in walk order; ``flags``: the
    walk's value check flags (:func:`lazycore.runtime.checks.flag_values`),
    which a loop returns as one stack per check of its body."""
    return _find_chains(order, outputs, scalar_leaf=lambda node: type(node) is Scalar, flags=flags, least=least)


def find_chain(order: list[Node], outputs: list[Value]) -> Chain | None:
    """The largest chain in a walk, or None."""
    chains = find_chains(order, outputs)
    return max(chains, key=lambda c: len(c.copies) * len(c.copies[0])) if chains else None


DEFAULTS: dict[str, int | None] = {
    # benchmarks/rolled_layers.py --sweep --reps 2 (benchmark 11), 2026-11-30
    # 09:37-09:44, 2 cores, quiet (load 0.2-1.3, nothing else running).
    # Rolled/unrolled at 4/8/12/16/24 layers. GPT training step: first calls
    # 1.19/0.99/0.76/0.62/0.46x (4.1/6.0/9.5/12.4/15.8 s unrolled), steps
    # 1.04/1.03/1.03/1.00/0.96x: over 1000 steps rolling pays from 16 layers
    # (net +3.9 s; -2.3 to -2.7 s at 4 to 12). MLP forward: first calls
    # 2.03/2.13/1.12/1.15/0.97x, steps 1.04/1.01/0.93/0.93/0.97x: pays from
    # 12 (+1.0 s). So the CPU rolls a run of at least 16 identical layers.
    "cpu": 16,
    # unmeasured: no GPU or TPU machine measured yet; rolling from
    # rolled_chains.MIN_COPIES copies kept until a sweep there says
    "gpu": MIN_COPIES,
    "tpu": MIN_COPIES,
}
"""The fewest identical layers a platform's programs roll into a loop while
``settings.roll_loops`` is ``"auto"`` (its default), by the platform of
:class:`lazycore.runtime.device.Device` (``cpu``, ``gpu``, ``tpu``); None:
never. A platform not listed rolls from :data:`UNLISTED` copies."""
UNLISTED = MIN_COPIES


def least_copies(device) -> int | None:
    """The fewest copies of a layer a program of ``device`` rolls into a
    loop, None where it rolls none: ``settings.roll_loops`` where it is
    forced (True: from :data:`MIN_COPIES`; False: never), its platform's
    entry in :data:`DEFAULTS` where it is ``"auto"``; never a mesh's. Part
    of the compile key."""
    if device is not None and isinstance(device.pjrt, pjrt.MeshTarget):
        return None
    forced = settings.roll_loops
    if forced is True:
        return MIN_COPIES
    if forced is False:
        return None
    return DEFAULTS.get(device.platform, UNLISTED) if device is not None else UNLISTED


def rolls_on(device) -> bool:
    """Whether programs of ``device`` may roll layers at all (from
    :func:`least_copies` copies)."""
    return least_copies(device) is not None


def chains(walk, device, constants) -> tuple:
    """``(walk, chains)``: the runs of identical layers a program of the walk
    emits as loops (none with rolling off, with folded constants, or on a
    mesh), and the walk to emit the program from, in whose order they were
    found: ``walk`` itself, or, where its call nodes hold layers, the walk
    with their bodies in place (:func:`inlined`). Found once per walk."""
    least = least_copies(device)
    if constants or least is None:
        return walk, []
    kept = walk.__dict__.get("chains")
    if kept is None or kept[0] != least:
        kept = walk.chains = (least, _found(walk, least))
    return kept[1]


def _found(walk, least: int) -> tuple:
    if any(type(node) is RegionNode and node.op == "call" for node in walk.order):
        whole = inlined(walk)
        found = find_chains(whole.order, list(whole.outputs), checks.flag_values(whole), least)
        # (none found: the call nodes stay, emitted inline as the step made its nodes)
        return (whole, found) if found else (walk, [])
    return walk, find_chains(walk.order, list(walk.outputs), checks.flag_values(walk), least)


def inlined(walk):
    """``walk`` with each ``call`` node's body made again on the node's
    operands, walked as a barrier walks: the graph a trace of the captured
    step makes. Its parameters are the walk's, in the walk's order (a body
    reads nothing but its node's operands), so the program built from it is
    called as the walk's. Its nodes are the compiler's alone: in no step's
    log, and a body's nodes keep their digests over the placeholders."""
    on, LOG.on = LOG.on, False
    try:
        new: dict[tuple, Value] = {}  # (id(node), index) -> its value in the inlined graph

        def get(v):
            return new.get((id(v[0]), v[1]), v)

        remake.onto(walk.order, get, new)
        whole = Walk([get(v) for v in walk.outputs])
    finally:
        LOG.on = on
    whole.data, whole.packs, whole.params = walk.data, walk.packs, walk.params
    return whole


def groups(walk, chains) -> list[tuple]:
    """The runs of device-data parameters the chains read stacked (indices
    in ``walk.data``; each run once, in the order its first reader stacks
    it): entry arguments of their own in a stacked program.

    Chains that read one set of layers over different windows (which copies
    a chain verifies differs at its ends: the forward over layers 2-6, the
    backward over 6-1, the updates over 0-5, as in torchvision's ShuffleNet)
    read one run, their union, each a window of it. The run's new values
    come back as that one stack (:func:`lazycore.runtime.compiler._returned`),
    so the next step passes it whole; a run per window returned one of them
    and stacked the others again every step, by a program of their own."""
    index = {id(leaf): i for i, leaf in enumerate(walk.data)}
    runs: list[list[int]] = []
    for chain in sorted(chains, key=lambda c: c.last_position):  # as the compiler emits them
        for values in chain.stacked:
            if all(id(v[0]) in index for v in values):
                _join(runs, [index[id(v[0])] for v in values])
    return [tuple(run) for run in runs]


def _join(runs: list[list[int]], group: list[int]) -> None:
    """Adds ``group`` to ``runs``: nothing where it is a window of one (in
    either direction), the grown run where it extends one (and the runs
    that one then reaches), else a run of its own."""
    if any(_window(run, group) for run in runs):
        return
    for n, run in enumerate(runs):
        grown = _union(run, group)
        if grown is None:
            continue
        runs[n] = grown
        m = n + 1
        while m < len(runs):  # the grown run may now reach a later one
            further = _union(runs[n], runs[m])
            if further is None:
                m += 1
            else:
                runs[n] = further
                del runs[m]
                m = n + 1
        return
    runs.append(group)


def _window(run: list[int], group: list[int]) -> bool:
    """Whether ``group`` is rows of ``run`` one apart, forwards or backwards."""
    k = len(group)
    if k > len(run) or group[0] not in run:
        return False
    at = run.index(group[0])
    return run[at:at + k] == group or (at + 1 >= k and run[at - k + 1:at + 1][::-1] == group)


def _union(run: list[int], group: list[int]) -> list[int] | None:
    """The shortest run with ``run`` (in its direction) and ``group`` as
    windows, where they overlap at an end; else None."""
    if len(set(run)) != len(run) or len(set(group)) != len(group):
        return None
    common = len(set(run) & set(group))
    if not common:
        return None
    for g in (group, group[::-1]):
        if _window(g, run) and g[g.index(run[0]):][:len(run)] == run:
            return g
        if run[-common:] == g[:common]:
            return run + g[common:]
        if run[:common] == g[-common:]:
            return g[:-common] + run
    return None


def stack_groups(walk, device=None) -> list[tuple]:
    """The device-data parameters a stacked program of the walk takes as
    stacks, per stack (:func:`lazycore.runtime.compiler.build_program`)."""
    return groups(*chains(walk, device, None))
