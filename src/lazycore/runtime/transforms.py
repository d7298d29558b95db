"""The features that rewrite a barrier's step, as transforms of its pipeline.

Each transform says whether it applies to a step, and may rewrite the
walked step (its program, arguments and outputs), bring arguments of its own
to the program, take results of its own from it, and give the outputs'
values back in its terms. The barrier runs the registered transforms
(:data:`lazycore.runtime.barrier.TRANSFORMS`) in order at each of those
points; none of them is an ``if`` inside the barrier.

* :class:`BucketSizes`: marked inputs padded to their buckets, the program
  of the padded walk, outputs cut back (:mod:`lazycore.runtime.buckets`,
  :mod:`lazycore.runtime.padding`).
* :class:`RolledStacks`: rolled layers' values passed and kept as stacks,
  and the program variant that leaves them alone
  (:mod:`lazycore.runtime.stacks`, :mod:`lazycore.runtime.rolling`).
* :class:`ValueChecks`: the flags the program returns after its outputs
  (:mod:`lazycore.runtime.checks`), settled when it is waited for.

Sharding needs no rewrite here: a mesh's layouts are part of its leaves'
digests, and the compiler lays the program out
(:mod:`lazycore.runtime.compiler`); its results carry their layouts
(:func:`lazycore.runtime.containment.layout_of`).
"""

from __future__ import annotations

from lazycore.ir.config import settings
from lazycore.ir.graph import Value
from lazycore.runtime import buckets, donation, programs, stacks


class Transform:
    """One feature that rewrites a step. Every hook does nothing by default."""

    name = "transform"

    def applies(self, step) -> bool:
        """Whether the step is this transform's at all (checked before each hook)."""
        return True

    def rewrite(self, step) -> None:
        """Rewrite a walked step (not a recalled one): its walk, arguments, outputs and key."""

    def keeps(self, step) -> bool:
        """Whether a new program of the step should leave its stacked arguments alone."""
        return False

    def arguments(self, step) -> None:
        """Arguments the program takes in its own terms (``step.stacked``),
        once its program is known; may pick another variant of the program."""

    def results(self, step, results: list) -> None:
        """Take this transform's extra results of the launched program."""

    def value(self, step):
        """None, or ``(k, leaf) -> Value``: output ``k``'s value from its result leaf."""
        return None


class BucketSizes(Transform):
    name = "buckets"

    def rewrite(self, step) -> None:
        padded = buckets.prepare(step.walk, step.device,
                                 lambda data, out_types, encoding: donation.keyed(step, data, out_types, encoding),
                                 step.held)
        if padded is None:
            return
        # marked inputs padded: the program of their buckets
        step.padded = padded
        step.walk = padded.walk or step.walk  # None: its program is cached
        step.data, step.packs, step.out_types = padded.data, padded.packs, padded.out_types
        step.donate, step.key = padded.donate, padded.key

    def value(self, step):
        return step.padded.value if step.padded is not None else None


class RolledStacks(Transform):
    name = "stacks"

    def keeps(self, step) -> bool:
        # parameters live handles hold that its loops would read stacked (a
        # forward pass over weights it does not change): its variant that
        # leaves its stacks alone, under this key too (always right)
        return step.padded is None and stacks.keeps(step.walk, step.held, step.device)

    def arguments(self, step) -> None:
        exe = step.exe
        if exe.arguments is None:  # it takes no stacks
            return
        step.stacked, keep = stacks.arguments(exe.arguments, step.data, step.held, step.device, step.padded is None)
        if (keep or not settings.donation) and not exe.keeps:  # the variant that leaves its stacks alone
            programs.keep_variant(step)


class ValueChecks(Transform):
    name = "checks"

    def results(self, step, results: list) -> None:
        step.flags = results[step.exe.value_count(len(step.out_types)):]


class Pipeline:
    """The registered transforms, run in order at each hook. A hook a
    transform does not override is not called (a barrier's own Python is
    per step: a cached training step's is about 0.1 ms)."""

    def __init__(self, transforms):
        self.transforms = tuple(transforms)
        self._hooks = {name: tuple(t for t in self.transforms if _overrides(t, name))
                       for name in ("rewrite", "keeps", "arguments", "results", "value")}

    def _active(self, hook: str, step):
        return [t for t in self._hooks[hook] if t.applies(step)]

    def rewrite(self, step) -> None:
        for t in self._active("rewrite", step):
            t.rewrite(step)

    def keeps(self, step) -> bool:
        return any(t.keeps(step) for t in self._active("keeps", step))

    def arguments(self, step) -> None:
        for t in self._active("arguments", step):
            t.arguments(step)

    def results(self, step, results: list) -> None:
        for t in self._active("results", step):
            t.results(step, results)

    def value(self, step):
        """``(k, leaf) -> Value`` for the step's outputs."""
        for t in self._active("value", step):
            f = t.value(step)
            if f is not None:
                return f
        return _plain


def _overrides(t: Transform, hook: str) -> bool:
    return getattr(type(t), hook) is not getattr(Transform, hook)


def _plain(k: int, leaf) -> Value:
    return Value(leaf, 0)
