"""``lazy-aliasing``: buffer donation from a donation plan.

A plan maps argument indices of one function (``entry``; by default the
module's only function) to its result indices: "argument i may be donated to
result j". For each pair the pass sets
``tf.aliasing_output = j`` on argument i, which XLA turns into an
input/output alias, so the result is written into the argument's buffer.

A program split over a mesh has its results laid out as XLA's partitioner
decides, after this pass: an argument and a result of one type may get
blocks of different sizes, and an alias between them fails to compile. There
the plan names donors only (``donors=0,2``): ``jax.buffer_donor`` on those
arguments lets XLA alias each to a result whose blocks match, as jax does for
a ``jit`` whose outputs' layouts it leaves to XLA.

Deciding *whether* donation is safe for the program's users (the LazyTensor
paper's conditions) is the runtime's job; this pass refuses plans that cannot
be right for the function itself: an argument or a result used twice, indices
out of range, or an argument whose type differs from its result's.
"""

from __future__ import annotations

from lazycore.dialect.mlir import ir

from .catalog import PassError, register_pass

ALIAS_ATTR = "tf.aliasing_output"
DONOR_ATTR = "jax.buffer_donor"


def parse_plan(text: str) -> dict[int, int]:
    """``"0:1,2:0"`` -> {0: 1, 2: 0}; an argument given twice is refused."""
    plan: dict[int, int] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        try:
            a, r = (int(x) for x in item.split(":"))
        except ValueError:
            raise PassError(f"lazy-aliasing: bad plan entry '{item}' (expected ARG:RESULT)") from None
        if a in plan:
            raise PassError(f"lazy-aliasing: argument {a} is donated twice")
        plan[a] = r
    return plan


def _functions(module_op: ir.Operation) -> list:
    return [op for op in module_op.regions[0].blocks[0].operations if op.operation.name == "func.func"]


def _symbol(fn) -> str:
    return ir.StringAttr(fn.attributes["sym_name"]).value


def entry_function(module_op: ir.Operation, name: str | None = None):
    """The function ``@name``; without a name, the module's only function.

    A plan's indices mean something only for one function, so a module of
    several functions needs the plan to name it (the runtime's names @main).
    """
    functions = _functions(module_op)
    if name is not None:
        for fn in functions:
            if _symbol(fn) == name:
                return fn
        raise PassError(f"lazy-aliasing: no entry function @{name}", module_op.location)
    if len(functions) == 1:
        return functions[0]
    if not functions:
        raise PassError("lazy-aliasing: the module has no function to donate arguments of", module_op.location)
    names = ", ".join(f"@{_symbol(fn)}" for fn in functions)
    raise PassError(
        f"lazy-aliasing: the module has {len(functions)} functions ({names}); say which one the plan is for with entry=NAME",
        module_op.location,
    )


def parse_donors(text: str) -> list[int]:
    """``"0,2"`` -> [0, 2]; an argument given twice is refused."""
    donors = []
    for item in filter(None, (p.strip() for p in text.split(","))):
        try:
            donors.append(int(item))
        except ValueError:
            raise PassError(f"lazy-aliasing: bad donor '{item}' (expected an argument index)") from None
        if donors.count(donors[-1]) > 1:
            raise PassError(f"lazy-aliasing: argument {donors[-1]} is donated twice")
    return donors


def mark_donors(module_op: ir.Operation, donors, entry: str | None = None) -> None:
    """``jax.buffer_donor`` on arguments ``donors`` of ``@entry``: XLA picks the results they alias."""
    if not donors:
        return
    fn = entry_function(module_op, entry)
    ftype = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
    n = len(ftype.inputs)
    for a in donors:
        if not 0 <= a < n:
            raise PassError(f"lazy-aliasing: argument {a} out of range (@{_symbol(fn)} has {n})", fn.location)
    _set_arg_attrs(fn, n, {a: ir.BoolAttr.get(True) for a in donors}, DONOR_ATTR)


def _set_arg_attrs(fn, n: int, values: dict, name: str) -> None:
    """Argument ``i`` gets attribute ``name`` = ``values[i]``; the others lose it."""
    arg_attrs = list(ir.ArrayAttr(fn.attributes["arg_attrs"])) if "arg_attrs" in fn.attributes else [ir.DictAttr.get({})] * n
    new_attrs = []
    for i, d in enumerate(arg_attrs):
        entries = {a.name: a.attr for a in ir.DictAttr(d)}
        entries.pop(name, None)
        if i in values:
            entries[name] = values[i]
        new_attrs.append(ir.DictAttr.get(entries))
    fn.attributes["arg_attrs"] = ir.ArrayAttr.get(new_attrs)


def apply_plan(module_op: ir.Operation, plan: dict[int, int], entry: str | None = None) -> None:
    """Donate per ``plan`` in function ``@entry`` (default: the only function).

    An empty plan changes nothing and needs no function, so a pipeline with
    ``lazy-aliasing`` runs on any module.
    """
    if not plan:
        return
    fn = entry_function(module_op, entry)
    name, where = _symbol(fn), fn.location
    ftype = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
    args, results = list(ftype.inputs), list(ftype.results)
    seen_results: dict[int, int] = {}
    for a, r in plan.items():
        if not 0 <= a < len(args):
            raise PassError(f"lazy-aliasing: argument {a} out of range (@{name} has {len(args)})", where)
        if not 0 <= r < len(results):
            raise PassError(f"lazy-aliasing: result {r} out of range (@{name} has {len(results)})", where)
        if r in seen_results:
            raise PassError(f"lazy-aliasing: result {r} is the target of arguments {seen_results[r]} and {a}", where)
        seen_results[r] = a
        if args[a] != results[r]:
            raise PassError(
                f"lazy-aliasing: cannot donate argument {a} ({args[a]}) to result {r} ({results[r]}): types differ",
                where,
            )
    i32 = ir.IntegerType.get_signless(32)
    _set_arg_attrs(fn, len(args), {a: ir.IntegerAttr.get(i32, r) for a, r in plan.items()}, ALIAS_ATTR)


@register_pass(
    "lazy-aliasing",
    "Donate entry arguments to results (tf.aliasing_output) from a donation plan",
    options={
        "donate": "comma-separated ARG:RESULT pairs, e.g. donate=0:0,2:1",
        "donors": "comma-separated ARG indices whose results XLA picks (jax.buffer_donor), e.g. donors=0,2",
        "entry": "the function the plan is for (default: the module's only function)",
    },
)
def _factory(donate="", donors="", entry=None):
    plan = donate if isinstance(donate, dict) else parse_plan(donate)
    donor_list = list(donors) if isinstance(donors, (list, tuple)) else parse_donors(donors)

    def run(module_op):
        apply_plan(module_op, plan, entry)
        mark_donors(module_op, donor_list, entry)

    return run
