"""The dialect reference (docs/dialect.md) is generated from the op table, is
current, and every example in it parses and verifies."""

import re
from pathlib import Path

import pytest

from lazycore.dialect import OPS
from lazycore.dialect.examples import EXAMPLES
from lazycore.dialect.mlir import ir
from lazycore.dialect.build import new_context
from lazycore.passes.tools import dialect_doc

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / dialect_doc.PAGE


@pytest.fixture(scope="module")
def page() -> str:
    return PAGE.read_text()


def test_page_is_current(page):
    assert page == dialect_doc.render(), (
        f"{dialect_doc.PAGE} is stale: run `python -m lazycore.passes.tools.dialect_doc -o {dialect_doc.PAGE}`"
    )


def test_every_op_has_an_example_and_a_rule_text():
    ops = dialect_doc.dialect_ops()
    assert set(EXAMPLES) == {spec.name for spec in ops}
    assert [spec.name for spec in ops if not (spec.rule.__doc__ or "").strip()] == []


def test_the_page_is_the_dialects_ops():
    # every family module's row, and no row a test or a user added at run time
    ops = {spec.full_name for spec in dialect_doc.dialect_ops()}
    assert {"lazy.add", "lazy.gather", "lazy.rng_bit_generator"} <= ops
    assert ops == {name for name, spec in OPS.items() if not spec.rule.__module__.startswith("test")}


def _sections(page: str) -> dict[str, str]:
    parts = re.split(r"^### `(lazy\.\w+)`$", page, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def test_every_op_has_a_section_with_one_example_of_it(page):
    sections = _sections(page)
    assert list(sections) == [spec.full_name for spec in dialect_doc.dialect_ops()]
    for name, text in sections.items():
        blocks = re.findall(r"```mlir\n(.*?)```", text, flags=re.S)
        assert len(blocks) == 1, name
        assert f'"{name}"(' in blocks[0], name


def test_every_example_parses_and_verifies(page):
    blocks = re.findall(r"```mlir\n(.*?)```", page, flags=re.S)
    assert len(blocks) == len(dialect_doc.dialect_ops())
    with new_context():
        for block in blocks:
            module = ir.Module.parse(block)  # the parser verifies; say so anyway
            module.operation.verify()


def test_attribute_kinds_and_element_types_are_derived(page):
    # from the table's kinds and the rules' element-type classes, not typed in
    assert "| `i64[]` | tuple of int | `array<i64: 0, 1>` |" in page
    assert "| float | `f16`, `bf16`, `f32`, `f64`, `f8E4M3FN`, `f8E5M2`, `f8E4M3FNUZ`, `f8E5M2FNUZ` |" in page
    # found by running the rules: select's predicate is boolean, its branches anything
    select = _sections(page)["lazy.select"]
    assert "- **Element types:** `pred`: bool; `on_true`, `on_false`: any" in select
    argmax = _sections(page)["lazy.argmax"]
    assert "`result`: int" in argmax

