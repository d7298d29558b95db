"""A chain of identical layers (:mod:`lazycore.passes.rolled_chains`) as one
``stablehlo.while``: in the module :func:`lazycore.runtime.compiler.build_module`
builds, and in the ``lazy-roll-loops`` pass.

The loop carries a counter, the chain's carried values, its per-copy inputs
stacked along a new leading axis (sliced at the counter in the body), the
values all copies share, and one stack per exported value (written at the
counter with ``dynamic_update_slice``, which XLA does in place), and the
flags of the copies' value checks that need the body (one made of a carried
value) in one i1 array, copy by copy; the others are had before the loop
over the stacked copies at once (:mod:`lazycore.passes.rolled_flags`), and
the program returns all of them as one ``(copies, checks)`` array
(:func:`lazycore.runtime.compiler.build_program`). Stacks
outlive their loop in a :class:`Stacks`: a later chain whose copies read an
earlier chain's exported values row by row (a backward pass reading the
forward's activations, in reverse order) slices the same stack instead of
stacking the rows again.
"""

from __future__ import annotations

import numpy as np

from lazycore.dialect import create, from_mlir_type, tensor_type
from lazycore.dialect.types import TensorType, to_numpy_dtype
from lazycore.dialect.mlir import ir
from lazycore.passes.rolled_flags import over_stacks
from lazycore.passes.rolled_chains import Stacks

__all__ = ["Stacks", "emit_chain", "pack_element", "stack_rows"]

_I64 = np.dtype(np.int64)


def _scalar(x: int):
    return create("constant", value=np.array(x, _I64)).result


def stack_rows(rows: list, t: TensorType):
    rows = [create("reshape", r, shape=(1,) + tuple(t.shape)).result for r in rows]
    # one variadic concatenate (lazy.concatenate is binary: see docs/status.md)
    stacked_type = tensor_type(TensorType((len(rows),) + tuple(t.shape), t.dtype))
    return ir.Operation.create("stablehlo.concatenate", results=[stacked_type], operands=rows, attributes={
        "dimension": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0)}).result


def pack_element(pack, i: int):
    """Element ``i`` of a rank-1 array (a scalar pack), as a scalar: how the
    compiler reads a scalar parameter, and how a loop body reads it again
    (:func:`_element_of_argument` recognizes this form)."""
    one = create("slice", pack, start=[i], limit=[i + 1], strides=[1]).result
    return create("reshape", one, shape=()).result


def _element_of_argument(v):
    """``(argument, i)`` when ``v`` is element ``i`` of a rank-1 block
    argument, read by :func:`pack_element`; else None."""
    if not isinstance(v, ir.OpResult) or v.owner.name != "lazy.reshape":
        return None
    one = v.owner.operands[0]
    if not isinstance(one, ir.OpResult) or one.owner.name != "lazy.slice":
        return None
    arg = one.owner.operands[0]
    if not isinstance(arg, ir.BlockArgument) or ir.RankedTensorType(arg.type).rank != 1:
        return None
    if ir.RankedTensorType(one.type).shape != [1]:
        return None
    return arg, ir.DenseI64ArrayAttr(one.owner.attributes["start"])[0]


def _flag_row(flags: list):
    """A copy's check flags as one (1, m) i1 row (a nonzero flag is true: an
    index check's is a mask's maximum)."""
    i1 = TensorType((1, 1), "i1")
    cells = [create("reshape", f if from_mlir_type(f.type).dtype == "i1" else create("convert", f, dtype="i1").result,
                    shape=(1, 1)).result for f in flags]
    if len(cells) == 1:
        return cells[0]
    return ir.Operation.create("stablehlo.concatenate", results=[tensor_type(TensorType((1, len(cells)), i1.dtype))],
                               operands=cells, attributes={
                                   "dimension": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 1)}).result


def _in_copy_order(found, values, k: int):
    """A per-copy input's stack ``(array, first row, step)`` as the ``k``
    copies' rows in copy order (:func:`lazycore.passes.rolled_flags.over_stacks`)."""
    array, first, step = found
    t = values[0][0].types[values[0][1]]
    rank = len(t.shape)
    low = first if step == 1 else first - k + 1
    if (low, step) != (0, 1) or from_mlir_type(array.type).shape[0] != k:
        array = create("slice", array, start=[low] + [0] * rank, limit=[low + k] + list(t.shape),
                       strides=[1] * (rank + 1)).result
    return array if step == 1 else create("reverse", array, dims=(0,)).result


def _flag_columns(columns: list, body_flags, k: int):
    """The chain's ``(k, checks)`` i1 flag array from its columns: a
    ``(k,)`` flag had over the stacks, or column ``p`` of ``body_flags``
    (the array the loop wrote); the loop's own array where it is all of them."""
    if all(type(c) is int for c in columns) and columns == list(range(from_mlir_type(body_flags.type).shape[1])):
        return body_flags
    cells = []
    for c in columns:
        if type(c) is int:
            cells.append(create("slice", body_flags, start=[0, c], limit=[k, c + 1], strides=[1, 1]).result)
            continue
        if from_mlir_type(c.type).dtype != "i1":  # (nonzero is true: an index check's flag is a mask's maximum)
            c = create("convert", c, dtype="i1").result
        cells.append(create("reshape", c, shape=(k, 1)).result)
    if len(cells) == 1:
        return cells[0]
    return ir.Operation.create("stablehlo.concatenate", results=[tensor_type(TensorType((k, len(cells)), "i1"))],
                               operands=cells, attributes={
                                   "dimension": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 1)}).result


def _single(o) -> bool:
    return len(o) == 2 and isinstance(o[1], int)


def _operand(o, get):
    return get(o) if _single(o) else [get(w) for w in o]


def emit_chain(chain, env: dict, stacks: Stacks, emit) -> None:
    """The chain as one loop at the current insertion point; binds the last
    copy's carried values to the loop's results and every exported value to
    its row of the returned stack. ``emit(node, operands)``: one node's
    results (the compiler's own emitter, regions included)."""
    def value(v):
        return env[id(v[0])][v[1]]

    k = len(chain.copies)
    inputs = []  # (stack, first row, step) per per-copy input
    for values in chain.stacked:
        found = stacks.find(values)
        if found is None:
            array = stack_rows([value(v) for v in values], values[0][0].types[values[0][1]])
            stacks.add(array, values)
            found = (array, 0, 1)
        inputs.append(found)
    arrays = []  # distinct stacks read, in order: the loop carries each once
    for array, _, _ in inputs:
        if not any(array == a for a in arrays):
            arrays.append(array)
    out_types = [chain.copies[0][j].types[r] for j, r in chain.exported]
    where = [next(n for n, a in enumerate(arrays) if a == array) for array, _, _ in inputs]
    # an exported value of a per-copy input's type (a layer's new weight) is
    # written over the row of that input the body read, when the body reads
    # nothing else of its stack: the loop then carries no stack of its own
    # for it, and XLA updates the one stack in place
    in_place: dict[int, int] = {}  # export -> position of the stack it is written into
    for e, t in enumerate(out_types):
        for q, (array, first, step) in enumerate(inputs):
            n = where[q]
            if ((first, step) == (0, 1) and where.count(n) == 1 and n not in in_place.values()
                    and chain.stacked[q][0][0].types[chain.stacked[q][0][1]] == t):
                in_place[e] = n
                break
    own = [e for e in range(len(out_types)) if e not in in_place]
    zero = _scalar(0)
    outs = [create("broadcast_in_dim", create("constant", value=np.zeros((), to_numpy_dtype(out_types[e].dtype))).result,
                   dims=(), shape=(k,) + tuple(out_types[e].shape)).result for e in own]
    if out_types:
        outs += [_scalar(0) for _ in range(k)]
    # a shared scalar the entry slices out of an argument (the scalar pack)
    # is sliced again in the body, from the argument the loop carries once:
    # sliced outside, each such scalar is a loop operand nothing fuses into,
    # a kernel of its own
    shared_values = [value(v) for v in chain.shared]
    elements = []  # per shared value: None, or (its pack's position in packs, element)
    packs = []
    for v in shared_values:
        e = _element_of_argument(v)
        if e is not None:
            n = next((n for n, p in enumerate(packs) if p == e[0]), None)
            if n is None:
                n = len(packs)
                packs.append(e[0])
            e = (n, e[1])
        elements.append(e)
    plain = [v for v, e in zip(shared_values, elements) if e is None]
    # the value checks' flags, copy c's in row c of one i1 array the program
    # returns whole: one result for all the loop's checks, not one per check
    # and copy. A flag made of the copies' stacked inputs alone is had over
    # them here, once for all copies; the others' are written by the body,
    # a row per copy
    ahead = over_stacks(chain, lambda n: _in_copy_order(inputs[n], chain.stacked[n], k),
                                     shared_values.__getitem__, emit) if chain.flags else {}
    in_body = [f for q, f in enumerate(chain.flags) if q not in ahead]
    flag_bufs = [create("broadcast_in_dim", create("constant", value=np.zeros((), np.bool_)).result,
                        dims=(), shape=(k, len(in_body))).result] if in_body else []
    carried = [zero, _scalar(k)] + [value(v) for v in chain.init] + arrays + plain + packs + flag_bufs + outs
    n_slots, n_arrays, n_shared = len(chain.init), len(arrays), len(plain) + len(packs)
    n_flags = len(flag_bufs)
    types = [v.type for v in carried]
    op = ir.Operation.create("stablehlo.while", results=types, operands=carried, regions=2)
    cond = op.regions[0].blocks.append(*types)
    with ir.InsertionPoint(cond):
        ir.Operation.create("stablehlo.return", operands=[
            create("compare", cond.arguments[0], cond.arguments[1], direction="LT").result])
    body = op.regions[1].blocks.append(*types)
    with ir.InsertionPoint(body):
        args = list(body.arguments)
        i = args[0]
        at = 2
        slots = args[at:at + n_slots]
        at += n_slots
        held = args[at:at + n_arrays]
        at += n_arrays
        carried_shared = args[at:at + n_shared]
        at += n_shared
        flag_args = args[at:at + n_flags]
        bufs = args[at + n_flags:]
        plain_args, pack_args = iter(carried_shared[:len(plain)]), carried_shared[len(plain):]
        shared = [next(plain_args) if e is None else pack_element(pack_args[e[0]], e[1]) for e in elements]
        z = _scalar(0)

        def starts(row, rank):
            return [row] + [z] * rank

        rows = {}

        def row_at(first, step):
            key = (first, step)
            if key not in rows:
                if (first, step) == (0, 1):
                    rows[key] = i
                else:
                    scaled = i if step == 1 else create("sub", _scalar(0), i).result
                    rows[key] = create("add", scaled, _scalar(first)).result
            return rows[key]

        per_copy = []
        for (array, first, step), values in zip(inputs, chain.stacked):
            shape = tuple(values[0][0].types[values[0][1]].shape)
            s = next(h for a, h in zip(arrays, held) if a == array)
            one = create("dynamic_slice", s, starts(row_at(first, step), len(shape)), sizes=(1,) + shape).result
            per_copy.append(create("reshape", one, shape=shape).result)
        local: dict[int, list] = {}
        sources = {"slot": slots, "stacked": per_copy, "shared": shared}

        def made(w):
            if w[0].is_leaf:
                what, index = chain.remat_leaf[(id(w[0]), w[1])]
                return sources[what][index]
            return local[id(w[0])][w[1]]

        for node in chain.remat:
            local[id(node)] = emit(node, [_operand(o, made) for o in node.operands])
        remade = [local[id(v[0])][v[1]] for v in chain.remade]
        copy0 = {id(n) for n in chain.copies[0]}
        sources["remat"] = remade
        for j, node in enumerate(chain.copies[0]):
            operands = []
            for o_, o in enumerate(node.operands):
                single = _single(o)
                group = [o] if single else list(o)
                vals = []
                for m, v in enumerate(group):
                    if id(v[0]) in copy0:
                        vals.append(local[id(v[0])][v[1]])
                    else:
                        what, index = chain.operand_kind[(j, o_, m)]
                        vals.append(sources[what][index])
                operands.append(vals[0] if single else vals)
            local[id(node)] = emit(node, operands)
        new_bufs = []
        new_held = list(held)
        n_out = len(own)
        for e, ((j, r), t) in enumerate(zip(chain.exported, out_types)):
            update = create("reshape", local[id(chain.copies[0][j])][r], shape=(1,) + tuple(t.shape)).result
            if e in in_place:
                n = in_place[e]
                new_held[n] = create("dynamic_update_slice", held[n], update, starts(i, len(t.shape))).result
            else:
                buf = bufs[own.index(e)]
                new_bufs.append(create("dynamic_update_slice", buf, update, starts(i, len(t.shape))).result)
        for c, at_c in enumerate(bufs[n_out:]):
            new_bufs.append(create("select", create("compare", i, _scalar(c), direction="EQ").result, i,
                                   at_c).result)
        new_flags = [create("dynamic_update_slice", flag_args[0],
                            _flag_row([local[id(chain.copies[0][j])][r] for j, r in in_body]), [i, z]).result
                     ] if in_body else []
        nxt = create("add", i, _scalar(1)).result
        new_slots = [local[id(chain.copies[0][j])][r] for j, r in chain.slots]
        ir.Operation.create("stablehlo.return", operands=[nxt, args[1]] + new_slots + new_held
                            + list(carried_shared) + new_flags + new_bufs)
    results = list(op.results)
    # each row leaves the stack at an index the loop computed (row c's, c),
    # which XLA cannot fold: the row copies are then one kernel per stack
    # shape, not one per row (a static slice's offsets make each distinct)
    index = results[len(results) - k:] if out_types else []
    flag_results = results[2 + n_slots + n_arrays + n_shared:2 + n_slots + n_arrays + n_shared + n_flags]
    own_results = results[2 + n_slots + n_arrays + n_shared + n_flags:]
    if chain.flags:
        flag_array = _flag_columns([ahead[q] if q in ahead else in_body.index(f) for q, f in enumerate(chain.flags)],
                                   flag_results[0] if in_body else None, k)
    for q, (j, r) in enumerate(chain.flags):
        for c, copy in enumerate(chain.copies):
            stacks.flags[(id(copy[j]), r)] = (flag_array, c, q)
    z = _scalar(0) if out_types else None
    for e, ((j, r), t) in enumerate(zip(chain.exported, out_types)):
        if e in in_place:
            out = results[2 + n_slots + in_place[e]]
            stacks.updates.append((arrays[in_place[e]], out))
        else:
            out = own_results[own.index(e)]
        values = [(copy[j], r) for copy in chain.copies]
        stacks.add(out, values)
        for c, copy in enumerate(chain.copies):
            one = create("dynamic_slice", out, [index[c]] + [z] * len(t.shape),
                         sizes=(1,) + tuple(t.shape)).result
            env.setdefault(id(copy[j]), [None] * len(copy[j].types))[r] = create("reshape", one,
                                                                                 shape=tuple(t.shape)).result
    last = chain.copies[-1]
    for s, (j, r) in enumerate(chain.slots):
        env.setdefault(id(last[j]), [None] * len(last[j].types))[r] = results[2 + s]
