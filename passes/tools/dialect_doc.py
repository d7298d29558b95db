"""The ``lazy`` dialect's reference page, generated from the op table.

``python -m lazycore.passes.tools.dialect_doc -o docs/dialect.md`` (or
``lazy-opt --dialect-doc``) writes it. Everything on the page comes from the
table (:data:`lazycore.dialect.OPS`, the rows the dialect's modules define): operands, attributes and their kinds,
results, traits, the shape/dtype rule's docstring, the element-type classes
the rules name; each op's example is built from
:data:`lazycore.dialect.examples.EXAMPLES` by the dialect's builder and
printed by MLIR, so it parses and verifies (``tests/test_dialect_doc.py``
checks that, and that the page in the repository is current).
"""

from __future__ import annotations

import argparse
import inspect
import sys

import numpy as np

from lazycore.dialect import OPS, OpSpec, ShapeError, create, tensor_type
from lazycore.dialect.build import attr_to_mlir
from lazycore.dialect.examples import EXAMPLES
from lazycore.dialect.rules import DTYPE_CLASSES
from lazycore.dialect.spec import ATTR_KINDS
from lazycore.dialect.types import DTYPES
from lazycore.dialect.mlir import func, ir
from lazycore.dialect.build import new_context

PAGE = "docs/dialect.md"

# Python side of each attribute kind (the MLIR side is printed by MLIR).
_KIND_VALUES = {
    "i64": ("int", 2),
    "i64[]": ("tuple of int", (0, 1)),
    "f64": ("float", 0.5),
    "bool": ("bool", True),
    "str": ("str", "LT"),
    "dense": ("numpy.ndarray", None),
}


def dialect_ops() -> list[OpSpec]:
    """The ops the dialect's own modules define: the table is open to rows
    added at run time (tests, users' ops), which are not the dialect's."""
    return [spec for spec in OPS.values() if spec.rule.__module__.startswith("lazycore.dialect.")]


def _flat(operands) -> list:
    out = []
    for o in operands:
        out.extend(o if isinstance(o, list) else [o])
    return out


def example(spec: OpSpec) -> str:
    """The op's example as MLIR: a function applying it to its arguments."""
    ex = EXAMPLES[spec.name]
    results = spec.infer(*ex.operands, **ex.kwargs)
    with new_context(), ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            ftype = ir.FunctionType.get(
                [tensor_type(o) for o in _flat(ex.operands)], [tensor_type(r) for r in results]
            )
            fn = func.FuncOp(spec.name, ftype)
            block = fn.add_entry_block()
            args = iter(block.arguments)
            grouped = [[next(args) for _ in o] if isinstance(o, list) else next(args) for o in ex.operands]
            with ir.InsertionPoint(block):
                op = create(spec.name, *grouped, **ex.kwargs)
                func.ReturnOp(list(op.results))
        module.operation.verify()
        text = str(module)
    # The function without the module around it, as one writes it in a test.
    lines = text.strip().splitlines()[1:-1]
    return "\n".join(line[2:] for line in lines)


def _accepts(spec: OpSpec, operands, kwargs) -> bool:
    try:
        spec.infer(*operands, **kwargs)
    except ShapeError:
        return False
    return True


def _class_name(dtypes: list[str]) -> str:
    for klass, accepts in DTYPE_CLASSES.items():
        if dtypes == [d for d in DTYPES if accepts(d)]:
            return klass
    return ", ".join(f"`{d}`" for d in dtypes) if dtypes else "none"


def element_types(spec: OpSpec) -> list[str]:
    """What the rule accepts, found by running it: for each group of operands
    sharing an element type in the example, every type in turn (for the
    example's shapes and attributes), and likewise for a result's type
    parameter ``dtype``."""
    ex = EXAMPLES[spec.name]
    names = list(spec.operand_names)
    groups: dict[str, list[str]] = {}
    for name, o in zip(names, ex.operands):
        dtype = o[0].dtype if isinstance(o, list) else o.dtype
        groups.setdefault(dtype, []).append(f"`{name}`")
    out = []
    for dtype, members in groups.items():
        def swap(o, d):
            if isinstance(o, list):
                return [t._replace(dtype=d) if t.dtype == dtype else t for t in o]
            return o._replace(dtype=d) if o.dtype == dtype else o

        ok = [d for d in DTYPES if _accepts(spec, [swap(o, d) for o in ex.operands], ex.kwargs)]
        out.append(f"{', '.join(members)}: {_class_name(ok)}")
    if "dtype" in spec.result_params:
        carrier = spec.params_from or spec.results[0]
        ok = [d for d in DTYPES if _accepts(spec, ex.operands, {**ex.kwargs, "dtype": d})]
        out.append(f"`{carrier}`: {_class_name(ok)}")
    return out


def _mlir_form(kind: str) -> str:
    value = _KIND_VALUES[kind][1]
    if kind == "dense":
        value = np.array([1.0, 2.0], np.float32)
    with new_context(), ir.Location.unknown():
        return str(attr_to_mlir(kind, value))


def _code(names) -> str:
    return ", ".join(f"`{n}`" for n in names) if names else "none"


def _family(spec: OpSpec) -> str:
    return spec.rule.__module__


# How shape-bucket padding treats an op, by its row's padding trait.
_PADDING = {"elementwise": "padded elementwise", "reduction": "padded with its identity",
            "own": "padded by a rule of its own", "refused": "never padded"}


def _op_section(spec: OpSpec) -> list[str]:
    out = [f"### `{spec.full_name}`", ""]
    if spec.summary:
        out += [spec.summary[0].upper() + spec.summary[1:] + ".", ""]
    operands = [f"`{o[:-1]}...` (variadic)" if o.endswith("*") else f"`{o}`" for o in spec.operands]
    attrs = [f"`{name}` (`{kind}`)" for name, kind in spec.attrs.items()]
    results = _code(spec.results) if not spec.results[-1:] or not spec.results[-1].endswith("*") else (
        f"`{spec.results[-1][:-1]}...` (variadic)")
    if spec.result_params:
        carrier = spec.params_from or spec.results[0]
        results += f"; the type of `{carrier}` gives the rule its {' and '.join(spec.result_params)}"
    dtypes = element_types(spec)
    traits = ["pure (no side effects)" if spec.pure else "has side effects"]
    if spec.commutative:
        traits.append("commutative")
    if spec.elementwise:
        traits.append("elementwise")
    if spec.fold is not None:
        traits.append("constant-folded")
    if spec.identity is not None:
        traits.append(f"reduction with identity {spec.identity}")
    traits.append(_PADDING.get(spec.padding, "padding undecided"))
    out += [
        f"- **Operands:** {', '.join(operands) if operands else 'none'}",
        f"- **Attributes:** {', '.join(attrs) if attrs else 'none'}",
        f"- **Results:** {results}",
        *([f"- **Element types:** {'; '.join(dtypes)}"] if dtypes else []),
        f"- **Traits:** {', '.join(traits)}",
        "",
    ]
    rule = inspect.getdoc(spec.rule) or ""
    if rule:
        out += ["**Shape and dtype rule.** " + rule, ""]
    out += ["```mlir", example(spec), "```", ""]
    return out


def render() -> str:
    """The whole page."""
    families: dict[str, list[OpSpec]] = {}
    for spec in dialect_ops():
        families.setdefault(_family(spec), []).append(spec)

    out = [
        "# The `lazy` dialect",
        "",
        "<!-- Generated from the op table by `python -m lazycore.passes.tools.dialect_doc -o docs/dialect.md`"
        " (or `lazy-opt --dialect-doc`); do not edit by hand. tests/test_dialect_doc.py checks it is"
        " current and that every example parses and verifies. -->",
        "",
        "Every op is one row of the op table (`dialect/spec.py`): its operands, attributes, results and",
        "a shape/dtype rule in plain Python. The MLIR op and its verifier are generated from the row, and",
        "the runtime runs the same rule on each recorded op, so a rule broken in IR is reported by the",
        "verifier as `'lazy.<op>' op <what the rule says>`, and the same call from a frontend raises",
        "`ShapeError` at the user's line.",
        "",
        "The ops have only the generic assembly form, `%r = \"lazy.op\"(%operands) {attributes} :",
        "(operand types) -> result types`. Like StableHLO, elementwise ops take operands of one type:",
        "frontends insert `broadcast_in_dim` and `convert`. A variadic operand group is given with an",
        "`operandSegmentSizes` attribute (the builder sets it). Some rules need a value only the result",
        "type carries (reshape's shape, convert's element type): the verifier reads it from there.",
        "",
        "*Element types* lists, per group of operands that share an element type in the op's example,",
        "the types the rule accepts there (found by running the rule on the example with each type,",
        "so for the example's attributes); the classes are named below.",
        "",
        "## Attribute kinds",
        "",
        "| kind | Python value | MLIR attribute |",
        "|---|---|---|",
    ]
    for kind in ATTR_KINDS:
        out.append(f"| `{kind}` | {_KIND_VALUES[kind][0]} | `{_mlir_form(kind)}` |")
    out += [
        "",
        "## Element-type classes",
        "",
        "Rules name the element types they accept by class:",
        "",
        "| class | element types |",
        "|---|---|",
    ]
    for klass, accepts in DTYPE_CLASSES.items():
        out.append(f"| {klass} | {', '.join(f'`{d}`' for d in DTYPES if accepts(d))} |")
    out += ["", "## Ops", ""]
    for module, specs in families.items():
        title = module.rsplit(".", 1)[-1]
        out.append(f"- {title}: " + ", ".join(f"[`{s.name}`](#{s.full_name.replace('.', '')})" for s in specs))
    out.append("")
    for module, specs in families.items():
        doc = inspect.getdoc(sys.modules[module]) or ""
        title, _, rest = doc.partition("\n")
        out += [f"## {title.strip().rstrip('.')}", ""]
        if rest.strip():
            out += [rest.strip(), ""]
        for spec in specs:
            out += _op_section(spec)
    return "\n".join(out).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lazycore.passes.tools.dialect_doc", description=__doc__.split("\n\n")[0])
    p.add_argument("-o", dest="output", default="-", help=f"output file (default: stdout; the repository's is {PAGE})")
    args = p.parse_args(argv)
    text = render()
    if args.output == "-":
        sys.stdout.write(text)
    else:
        with open(args.output, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
