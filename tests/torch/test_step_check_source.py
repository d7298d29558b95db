"""A step check's ``if`` is parsed from its own lines, not from its whole file.

``bool()`` of a lazy 0-d bool asks :func:`lazycore.frontends.torch.step_checks.speculate`
whether the statement taking it is an ``if`` whose body is one ``raise``.
It parsed the whole source file to find that statement: in a new process,
transformers' ``generate()`` (``if ... and (attention_mask == 1).all():``,
generation/utils.py, 3,900 lines, whose body is no raise) cost 0.1-0.3 s of
the first token for that parse. These tests count the lines parsed, never time.
"""

from __future__ import annotations

import ast
import importlib.util

import pytest
import torch

import lazycore
from lazycore.frontends.torch import step_checks
from lazycore.observe import metrics

FILLER = "".join(f"def filler_{i}(x):\n    return x + {i}\n\n\n" for i in range(1500))

SOURCE = FILLER + '''
def pick(x, y):
    if x.shape[0] > 1 and (y == 1).all():  # a read: no raise in the body
        z = 1
    else:
        z = 2
    return z


class Checker:
    def validate(self, v):
        if not (v > 0).all():
            raise ValueError("v must be positive")
        return v * 2

    def validate_elif(self, v, flag):
        if flag:
            pass
        elif not (v > 0).all():
            raise ValueError("v must be positive (elif)")
        return v * 3
'''


@pytest.fixture
def module(tmp_path):
    path = tmp_path / "big_user_module.py"
    path.write_text(SOURCE)
    spec = importlib.util.spec_from_file_location("big_user_module", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def parsed(monkeypatch):
    """The line counts of every source text ``ast.parse`` is given, with no
    ``bool()`` site remembered from earlier tests (each is parsed here again)."""
    step_checks._SITES.clear()
    sizes = []
    parse = ast.parse

    def counting(source, *args, **kwargs):
        if isinstance(source, str):
            sizes.append(len(source.splitlines()))
        return parse(source, *args, **kwargs)

    monkeypatch.setattr(ast, "parse", counting)
    return sizes


def test_an_if_without_raise_parses_its_own_lines(dev, module, parsed):
    # before: the file's 6,000 lines were parsed
    x, y = torch.ones(3).to(dev), torch.tensor([1, 1, 2]).to(dev)
    lazycore.mark_step(wait=True)
    assert module.pick(x * 2, y + 0) == module.pick(torch.ones(3), torch.tensor([1, 1, 2])) == 2
    assert module.pick(x * 2, y * 0 + 1) == 1
    # (the read is an operand of ``and``: no statement's span, so nothing of the file is parsed)
    assert max(parsed, default=0) <= 6


def test_a_check_in_a_method_is_speculated_from_its_own_lines(dev, module, parsed):
    v = torch.tensor([1.0, -1.0]).to(dev)
    lazycore.mark_step(wait=True)
    before = metrics.counters()["executions"]
    out = module.Checker().validate(v * 2)  # speculated: no program, the check goes with the step
    assert metrics.counters()["executions"] == before
    with pytest.raises(ValueError, match="v must be positive"):
        lazycore.mark_step()
    assert module.Checker().validate(torch.tensor([1.0, 2.0]).to(dev) + 1).tolist() == [4.0, 6.0]
    assert parsed and max(parsed) <= 4
    del out


def test_an_elif_check_is_speculated_from_its_own_lines(dev, module, parsed):
    # an ``elif`` does not parse alone: it parses as an ``if`` of the same columns
    v = torch.tensor([1.0, -1.0]).to(dev)
    lazycore.mark_step(wait=True)
    before = metrics.counters()["executions"]
    module.Checker().validate_elif(v * 2, False)
    assert metrics.counters()["executions"] == before
    with pytest.raises(ValueError, match=r"v must be positive \(elif\)"):
        lazycore.mark_step()
    assert parsed and max(parsed) <= 4
