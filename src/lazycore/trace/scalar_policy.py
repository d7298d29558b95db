"""The learned scalar policy: which Python numbers a program bakes in.

LazyTensor's rule bakes 0 and 1 into the program as constants (they enable
folds like ``x * 1``) and makes every other number a program parameter, so
a new learning rate does not recompile. Baking is a bet that the number at
that place never changes; a loop ``x * k`` over ``k = 0, 1, 2, ...`` loses it
twice (one program for 0, one for 1, one for the rest). This policy learns
from the loop instead: a place where a number has taken two different values
makes it a parameter from then on, so the third value compiles nothing.

A *place* is the position in the step log (:data:`lazycore.ir.graph.LOG`)
the scalar's node will take, its dtype, the op of the node logged just
before it, and the user's instruction that made it (the raw location
:func:`~lazycore.ir.sourceloc.caller` finds, as every op's node records):
the same op of the same step graph lands there every step, while another
graph's number at that position mostly comes from another line, so folds
elsewhere (and lowerings that match a constant 1) keep their constants. One
line can make two graphs, though: a library call the user made once
(transformers' attention, decomposed by the lowerings) runs in generate()'s
prompt step and in its decoding steps, and their numbers met at one
position and line (the prompt's scale 0.5 and a decoding step's mask 0.0:
a parameter, and one program more). The preceding op tells those steps
apart at the cost of one list index, where a digest of the step so far
would cost a walk. A false promotion that remains only trades a fold for
a parameter, once per place; the values stay exact. The line is found (a walk over the frames) only when a
position sees another value than last time: a loop whose numbers repeat
pays one lookup.
A place less its position (dtype, preceding op, line) remembers the first
value made there too: a *new* position whose line has made another value
before is a parameter at once (:meth:`ScalarPolicy._line_varied`), and one
of that first value stays baked where the line's other numbers came in the
same step (a backward pass's numbers under one ``backward()``). The
first step's log also holds what ran before the loop (the model's
initialization, a rollout's forward pass), so a loop's steady positions are
first met at its second step; PPO's minibatch start ``i % 2`` (0, then 1)
would otherwise be baked there and promoted, with a compile, a step later.
Integers that decide shapes (``expand(3, k)``) are attributes, never
scalars, and stay baked.

A place's key must not move when an earlier place is promoted: the promoted
form makes other nodes before it (a parameter where a constant was, a
dynamic slice where a static one was), and a moved place was new, baked its
number once more and was promoted a step later, with a compile. The op
before a place is read as the one a promotion replaced (:data:`_SAME`), and
a place promoted promotes its line, so the place at a moved position is a
parameter at once.

A slice's start (``x[:, i:i + k]``, ``alphas[t]``, a random crop's corner)
has a place of its own (:meth:`ScalarPolicy.start_varies`): what it slices
(the storage and the sizes of the view steps before it,
:func:`lazycore.trace.views._sliced`, or the value's type), the user's line
and the how-manieth start of that line over that value in the step (not of
all the step's starts: a call that ends without a barrier left another
number of them to the next), not a step-log position, which a promoted start moves
(its dynamic slice takes more nodes than a static one) and a first step's
log (what ran before the loop) shifts. What it slices: a start that follows
a growing length (the n-gram processor's ``input_ids[:, cur_len - 1:]``)
meets a new shape, a new program whatever the start, at every step;
promoting it there won nothing and made the first length's start a
parameter in a second ``generate()``, whose first step missed the program
compiled with it baked.

Integers that decide no shape but where a write lands have a place of their
own (:meth:`ScalarPolicy.varies`): the bounds of a box copied between two
arrays of one shape (CutMix's ``x[:, :, y0:y1, x0:x1] = x.flip(0)[:, :, y0:y1,
x0:x1]``, a new box every step) are slice attributes while the box at that
line repeats, and once it has changed the frontend writes the box as a
``select`` under a mask whose bounds are program parameters: the box's size
is then no shape of the program, so every later box compiles nothing.

A float argument of a recorded lowering (:mod:`lazycore.trace.recipes`) has
a second place, by the lowering and its call's kinds instead of the step-log
position: a recording serves its call signature for later values without
asking the policy, so a whole number recorded for itself later (a schedule
reaching ``lr = 0.0``, SGD's ``alpha = -0.0``) falls where the log may be
longer or shorter than at the first recording (the first step holds the
model's initialization too); at the argument's place it meets the value
recorded before and is a parameter, as the replays' values are. -0.0 and 0.0
are one value to both places (neither promotes the other), and each keeps
its sign in the constant or parameter it becomes.

An int argument of a recorded lowering (``arange(n) + offset``) has a second
place too, by the lowering, the op it lowers, the argument's position and the
user's instruction (:meth:`lazycore.trace.recipes.Recorder.int_place`), where
the user's own code made the call (not the backward pass under a
``backward()``, nor a library function's body: their many ops at one
instruction would promote each other's ints, a constant of the first step
then a parameter of the next, a compile): an int is
part of its recording's key, so the policy hears of it only when a value
records, at a step-log position that another graph (generation's filling
token, then its full-cache tokens) puts after other ops. At its position
alone a moving offset was baked at its first value in each graph and
promoted a step later, with a compile; at its argument's place the value of
an earlier graph promotes it at once. The place answers by ``folds`` as the
position does (arange's step, baked until varied).
"""

from __future__ import annotations

from lazycore.ir import events
from lazycore.ir.graph import LOG
from lazycore.ir.memo import Memo
from lazycore.ir.sourceloc import caller, format_location, known_user_frame

PLACES_KEPT = 4096
"""Places the policy remembers (emptied whole when full, as every memo)."""

_PROMOTED = object()

_SAME = {"scalar": "constant", "dynamic_slice": "slice"}
"""A preceding op as a place reads it: the op a promotion makes there (a
parameter for a constant, a dynamic slice for a static one) is read as the
one it replaces, so a place's key does not change when an earlier place is
promoted (else the later place was new, baked its number again and was
promoted a step later: a compile more per place after every promotion)."""


class ScalarPolicy:
    """Per place (position, dtype, preceding op, line): the first value seen,
    or promoted (a parameter from then on); per position, dtype and
    preceding op and its instruction, the last value seen there, its line
    and the answer, so a repeated number needs no walk for its line (the
    preceding node's instruction, which it records, tells apart the numbers
    of two lines that meet at one position in two steps: the first step's
    log also holds what ran before the loop, and another line's 0.0 there
    gave a loop's 0.0 that line's answer, a constant, and a step later its
    own, a parameter, with a compile); per slice start's line
    (:meth:`start_varies`), the step it last counted in, its count there and
    the value (or promoted) per count."""

    __slots__ = ("places",)

    def __init__(self):
        self.places = Memo("trace.scalar_places", PLACES_KEPT)

    def _promote(self, key, seen, value, where) -> None:
        self.places[key] = _PROMOTED
        events.emit("scalar_promoted", seen, value, format_location(where))

    def bake(self, value, dtype: str, arg=None, folds=None) -> bool:
        """Whether ``value`` becomes a ``lazy.constant`` (else a program parameter).
        ``arg``: for a float argument of a recorded lowering, its place
        there (:func:`lazycore.trace.recipes._call_place` and the argument's
        index), or an int argument's
        (:meth:`~lazycore.trace.recipes.Recorder.int_place`), a place of
        its own beside the step-log one: a number promoted at either is a
        parameter. ``folds``: whether the value is
        baked until its place promotes it (default: 0 and 1 are)."""
        if arg is not None:
            # (an int's place answers by ``folds`` too: arange's step, baked until varied)
            at_arg = self._arg(value, dtype, arg, folds if type(value) is int else None)
            return self._bake(value, dtype, folds) and at_arg
        return self._bake(value, dtype, folds)

    def _arg(self, value, dtype: str, arg, folds=None) -> bool:
        """The policy at a recorded call's argument's place (see :meth:`bake`)."""
        place = ("argument", dtype, arg)
        places = self.places
        seen = places.get(place, places)
        if seen is places:
            places.put(place, value)
        elif seen is _PROMOTED:
            return False
        elif not (seen == value or seen != seen):
            self._promote(place, seen, value, caller())
            return False
        return (value == 0 or value == 1) if folds is None else folds

    def _bake(self, value, dtype: str, folds=None) -> bool:
        if folds is None:
            folds = value == 0 or value == 1
        if not LOG.on:  # no positions to tell places apart
            return folds
        nodes = LOG.nodes
        n = len(nodes)
        if n:
            before = nodes[-1]
            loc = before.loc
            at = (n, dtype, _SAME.get(before.op, before.op), None if loc is None else (id(loc[0]), loc[1]))
        else:
            loc, at = None, (n, dtype, None, None)
        places = self.places
        last = places.get(at)
        if last is not None and last[0] == value:
            return last[2]
        where = caller()
        place = at + (where,)
        seen = places.get(place, places)  # (the memo itself: nothing seen yet)
        if seen is places:
            if self._line_varied(value, at[1:] + (where,)):
                places.put(place, _PROMOTED)
                bake = False
            else:
                places.put(place, value)
                bake = folds
        elif seen is _PROMOTED:
            bake = False
        elif seen == value or seen != seen:  # (NaN: never a constant anyway)
            bake = folds
        else:
            self._promote(place, seen, value, where)
            if where is not None:  # (its line too: see _line_varied)
                places[("line",) + at[1:] + (where,)] = _PROMOTED
            bake = False
        places.put(at, (value, where, bake, loc))  # (loc: its code, whose id ``at`` holds, lives as long)
        return bake

    def _line_varied(self, value, line) -> bool:
        """Whether the user's instruction ``line`` (with the scalar's dtype
        and the op logged before it: a place less its step-log position) has
        made another value than ``value`` before, at any position; asked
        when a position is new. The first step's log also holds what was
        made before the loop (the model's initialization, a rollout), so the
        loop's steady positions are first met at its second step: a number
        that took another value at that instruction in the first step (PPO's
        minibatch start ``i % 2``) is a parameter at once there, instead of
        baked once more and promoted, with a compile, a step later. A user's
        frame must be known: ops recorded from library frames alone share
        no instruction.

        An instruction can make several numbers in one step (the backward
        pass under the user's ``backward()``, a library call's body): the
        first value it made is baked where met (nothing had varied yet), and
        one made after it in that step promotes the line for the others. The
        first value stays baked at a new position of a later step, as it
        was in the first: else two embeddings comparing their indices with
        their padding indices 0, then 5, under one ``backward()`` baked the
        0 in the first step and made it a parameter at its moved position
        in the second, a compile."""
        if line[-1] is None:
            return False
        key = ("line",) + line
        places = self.places
        first = places.get(key, places)
        if first is places:
            places.put(key, (LOG.start, value, False))
            return False
        if first is _PROMOTED:
            return True
        step, seen, within = first
        if seen == value or seen != seen:
            return False
        if within:
            return True
        if step == LOG.start:  # another number of this step: the others promoted, the first kept
            places.put(key, (step, seen, True))
            events.emit("scalar_promoted", seen, value, format_location(line[-1]))
            return True
        self._promote(key, seen, value, line[-1])
        return True

    def start_varies(self, value: int, of, start=None) -> bool:
        """Whether a slice's start (a view's: ``x[:, i:i + k]``, ``alphas[t]``,
        a random crop's corner) is a program parameter (True) or baked,
        by its place: ``of`` (what it slices: the value's type, or its
        view's storage and the sizes of the steps before it), the user's
        instruction that read it and how many starts of that instruction
        over that value the step has asked about before (every read of such
        a view asks, before any replay of the read: a row loop
        ``x[i:i + 1]`` within one step has a place per row). Baked,
        whatever the value, until the place has seen two.
        Not a step-log position: an earlier start promoted makes other nodes
        (a dynamic slice of a parameter for a static one), and a first step
        also logs what ran before the loop, so a position would move and a
        varying start be baked again at its new one, with a compile. Nor a
        count of all the step's starts: a step is what ran since the last
        barrier, and a call that ends in reads of computed values (generate()
        copying its tokens to the host) runs none, so its last starts were
        counted into the next call's and the next call's starts took places
        by how many the one before had made: whisper's batch rows
        ``input_features[i:i + 1]`` after a beam search met the places of a
        sampling call's rows one off, 1 where 0 had been, a parameter and a
        compile (issue 40: hunt 30 whisper-sample [2, 1]). Counted per line
        and value, a start's place holds only starts of its own instruction.
        The shape sliced is part of every program that slices it, so a start
        varying with it (a growing sequence's last token counted from the
        front) stays baked at each: its programs are as many either way,
        and a later loop over the same shapes finds each one. ``start``: the
        frame that called into the frontend, where the search for the line
        starts (a user's frame is the line itself: no walk, as a replay's
        location, :meth:`lazycore.trace.recipes.Recipe.replay`)."""
        if start is not None and known_user_frame(start):
            code = start.f_code
            line = ("start", of, id(code), start.f_lasti)
        else:
            where = caller(start=start)
            code = None if where is None else where[0]
            line = ("start", of, id(code), -1 if where is None else where[1])
        # (the code object's id, not the object: hashing a code object hashes
        # its bytecode and constants, microseconds a read; the line's entry
        # holds its code, so the id names no other code while the entry lives)
        places = self.places
        got = places.get(line)
        if got is None:  # [code, step, starts asked this step, value (or promoted) per count]
            places.put(line, [code, LOG.start, 1, [value]])
            return False
        if got[1] != LOG.start:
            got[1], got[2] = LOG.start, 0
        k = got[2]
        got[2] = k + 1
        seen = got[3]
        if k >= len(seen):
            if k < PLACES_KEPT:  # (beyond: baked, as a place forgotten)
                seen.append(value)
            return False
        was = seen[k]
        if was is _PROMOTED:
            return True
        if was == value:
            return False
        seen[k] = _PROMOTED
        events.emit("scalar_promoted", was, value, format_location((code, line[3]) if code is not None else None))
        return True

    def varies(self, kind, values: tuple, where=None) -> bool:
        """Whether the numbers ``values`` (a box's bounds) at the user's
        instruction ``where`` (default: :func:`caller`'s) have been other
        numbers there before: from then on they are program parameters
        (True), until then baked (False). ``kind`` (hashable): what the
        numbers are and what else decides the code made of them (the
        arrays' shape and type), so places of two frontend paths, or of two
        shapes, at one line stay apart."""
        if where is None:
            where = caller()
        place = (kind, where)
        places = self.places
        seen = places.get(place, places)
        if seen is places:
            places.put(place, values)
            return False
        if seen is _PROMOTED:
            return True
        if seen == values:
            return False
        self._promote(place, seen, values, where)
        return True


POLICY = ScalarPolicy()
"""The policy :func:`lazycore.trace.core.scalar` asks."""
