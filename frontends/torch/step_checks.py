"""Validation that raises: checked with the step, not by cutting it.

torch.distributions validates its arguments and samples (``validate_args``,
on by default) as::

    if not torch._is_all_true(valid):
        raise ValueError(f"Expected parameter {param} ... but found invalid values:\\n{value}")

``bool()`` of a lazy tensor is a barrier, so each such check used to cut
the step (a PPO step with a Normal policy ran 3-12 programs instead of 1).
Here the truth of such a test is *speculated*: ``bool()`` answers that the
check passed, at once, and records a step check
(:func:`lazycore.trace.stepchecks.step_check`): when the step's program finds
it failed, the barrier raises the same exception with the same message,
computed then from the values the step had at the check (every live handle
is kept as it was there: parameters and optimizer state are not updated by
the failed step; the attributes of the objects among the checking frame's
locals are put back as they were while the message is made, as a
distribution's repr prints them), naming the user's line.

The rule (:func:`speculate`): ``bool()`` of a 0-d bool lazy tensor is
speculated only when the Python statement taking it is, in its source,

* an ``if`` whose test is ``torch._is_all_true(...)`` or
  ``torch._is_any_true(...)`` (any spelling of the callee ending in those
  names), ``x.all()``/``x.any()`` or ``torch.all(x)``/``torch.any(x)``
  (transformers' DETR box checks), or ``not`` of one;
* whose body is one ``raise E(...)`` and which has no ``else``;
* where ``E`` is an exception type eager raises and lazycore can raise too
  (a subclass of one of ``lazycore.ir.failure.EAGER_ERRORS``);

and the bytecode instruction taking the truth is that ``if``'s conditional
jump (found by its source position, not by counting frames). The answer is
then the one that skips the ``raise``. Anything else, such as a user's
``if torch._is_all_true(x): a() else: b()``, reads the value (a barrier)
and gets it exactly. While :func:`lazycore.torch.capture` records a step
nothing is speculated (a replay runs no Python, so it could not re-check).

``torch.linalg``'s ``cholesky``, ``inv``, ``solve`` (... with their
``check_errors``) check LAPACK's ``info`` after the factorization with
``aten._linalg_check_errors``, which returns nothing: :func:`linalg_check_errors`
makes it a step check whose error is what eager's kernel raises for the
``info`` the program computed (``torch.linalg.LinAlgError``, its message
naming the minor or the diagonal element).

What cannot be taken back: Python state the step changed after the check
(a list appended to, an optimizer's first step creating its state, a
host-side step counter); values made after the check fail with the error.
"""

from __future__ import annotations

import ast
import dis
import itertools
import linecache
import types

import torch

from lazycore.ir.failure import EAGER_ERRORS
from lazycore.ir.memo import Memo
from lazycore.ir.sourceloc import caller
from lazycore.trace import core
from lazycore.trace import factorizations as fz
from lazycore.trace.stepchecks import step_check

from .tensor import ENTRY, MADE, Tensor, read, to_host

_TESTS = frozenset(("_is_all_true", "_is_any_true"))
"""The callees whose results' truth may be speculated."""

_REDUCTIONS = frozenset(("all", "any"))
"""Reductions whose 0-d result's truth may be speculated, called as an
attribute: ``x.all()``, ``torch.any(x)`` (DETR's ``generalized_box_iou``:
``if not (boxes1[:, 2:] >= boxes1[:, :2]).all(): raise ValueError(...)``);
Python's own ``all(...)`` is not one."""

_JUMPS = {"POP_JUMP_FORWARD_IF_TRUE": True, "POP_JUMP_IF_TRUE": True,
          "POP_JUMP_FORWARD_IF_FALSE": False, "POP_JUMP_IF_FALSE": False}
"""Conditional jumps that take a value's truth: the truth that jumps."""

_SITES = Memo("torch.step_check_sites", 1024)
"""``(code, offset)`` of a ``bool()`` -> None (read it) or ``(answer, exception
type's code, exception's code, the names it reads)``."""

def speculate(x):
    """The speculated truth of ``x`` (a lazy tensor ``bool()`` is asked of),
    with its step check recorded; None where the rule above does not hold."""
    frame = ENTRY.frame
    if frame is None or MADE.refs is not None or x.dtype is not torch.bool or x.shape != ():
        return None
    code = frame.f_code
    key = (code, frame.f_lasti)
    site = _SITES.get(key)
    if site is None:
        if key in _SITES:
            return None
        site = _SITES.put(key, _site(code, frame.f_lasti))
        if site is None:
            return None
    answer, type_code, exc_code, used = site
    # (only the names the raise reads: every tensor kept is an output of the step)
    where, names = frame.f_globals, {k: v for k, v in frame.f_locals.items() if k in used}
    try:
        cls = eval(type_code, where, names)  # noqa: S307 - the callee of the raise in the source, as Python reads it
    except Exception:  # noqa: BLE001 - the raise would fail on its own: let eager's path run
        return None
    if not (isinstance(cls, type) and issubclass(cls, tuple(EAGER_ERRORS.values()))):
        return None
    h = read(x)
    if not h.pending:
        return None  # computed already: reading it is no barrier
    failed = h if not answer else core.apply("not", h)
    # the attributes of the objects the message may print (a distribution's
    # repr), as they are now: the step may add some (a lazy property) later
    kept = [(o, dict(o.__dict__)) for o in names.values() if _plain_object(o)]

    def raiser():
        now = [(o, dict(o.__dict__)) for o, _ in kept]
        try:
            for o, then in kept:
                o.__dict__.clear()
                o.__dict__.update(then)
            return eval(exc_code, where, names)  # noqa: S307 - the raise's own expression, with the check's values
        finally:
            for o, d in now:
                o.__dict__.clear()
                o.__dict__.update(d)

    step_check(failed, raiser, caller(start=frame))
    return answer


def linalg_check_errors(func, args, kwargs):
    """``aten._linalg_check_errors(info, api_name, *, is_matrix)`` as a step check."""
    info = args[0]
    if type(info) is not Tensor or info.dtype is not torch.int32:
        return func(*[to_host(a) if type(a) is Tensor else a for a in args], **kwargs)
    info_check(read(info), args[1], **kwargs)


def info_check(info, api_name: str, is_matrix: bool) -> None:
    """LAPACK's ``info`` (an int32 lazy value) checked at the barrier: where it
    is not 0 there, the error eager's ``aten._linalg_check_errors`` raises for
    it (``torch.linalg.LinAlgError``, its message naming the minor, the
    diagonal element or the batch element)."""

    def raiser():  # eager's own check of the values
        torch.ops.aten._linalg_check_errors(torch.from_numpy(info.numpy()), api_name, is_matrix=is_matrix)
        return RuntimeError(f"{api_name}: LAPACK's info was not 0 on the device")

    step_check(fz.failed(info), raiser, caller(start=ENTRY.frame))


def _site(code, offset: int):
    """``(answer, type code, exception code, names)`` of a ``bool()`` taken at
    ``offset`` of ``code``, or None (see the module's docstring)."""
    op = dis.opname[code.co_code[offset]]
    answer = _JUMPS.get(op)
    if answer is None:
        return None
    pos = next(itertools.islice(code.co_positions(), offset // 2, None), None)
    if pos is None or None in pos:
        return None
    node = _if_at(code.co_filename, tuple(pos))
    if node is None or node.orelse or len(node.body) != 1:
        return None
    test, negated = node.test, False
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, negated = test.operand, True
    if negated != answer or not _is_test_call(test):
        return None
    body = node.body[0]
    if not isinstance(body, ast.Raise) or body.cause is not None or not isinstance(body.exc, ast.Call):
        return None
    filename = code.co_filename
    try:
        type_code = compile(ast.Expression(body.exc.func), filename, "eval")
        exc_code = compile(ast.Expression(body.exc), filename, "eval")
    except (SyntaxError, ValueError, TypeError):
        return None
    used = frozenset(n.id for n in ast.walk(body.exc) if isinstance(n, ast.Name))
    return answer, type_code, exc_code, used


def _plain_object(o) -> bool:
    """An instance of a Python class keeping its attributes in a dict (no tensor, module, class or function)."""
    d = getattr(type(o), "__dictoffset__", 0)
    return bool(d) and not isinstance(o, (torch.Tensor, type, types.ModuleType, types.FunctionType)) and \
        type(getattr(o, "__dict__", None)) is dict


def _is_test_call(node) -> bool:
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    if isinstance(f, ast.Attribute) and f.attr in _REDUCTIONS:
        return True  # (its result is a 0-d bool where speculated: speculate() checks)
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
    return name in _TESTS


def _if_at(filename: str, span: tuple):
    """The ``if`` (or ``elif``) statement of ``filename`` whose source span
    (line, end line, column, end column: the conditional jump's position) is
    ``span``, parsed from its own lines (None: no such statement, no source).
    The bool() of a lazy tensor in generate()'s ``if ... and (mask == 1).all():``
    parsed all 4,500 lines of transformers' generation/utils.py in every new
    process (0.1-0.3 s of its first token) to find no ``if`` there."""
    line, end, col, _ = span
    lines = linecache.getlines(filename)
    if not lines or not 0 < line <= end <= len(lines):
        return None
    head = lines[line - 1]
    if len(head) - len(head.lstrip(" \t\f")) != col:
        return None  # not a statement's span (an ``if`` begins its line): an operand of ``and``/``or``
    text = lines[line - 1:end]
    if head[col:col + 4] == "elif" and not (head[col + 4:col + 5].isalnum() or head[col + 4:col + 5] == "_"):
        text[0] = head[:col] + "if  " + head[col + 4:]  # (an ``elif`` parses as an ``if`` of the same columns)
    wrapped = col > 0  # (an indented statement parses as the body of an ``if 1:``)
    try:
        tree = ast.parse(("if 1:\n" if wrapped else "") + "".join(text))
    except (SyntaxError, ValueError):  # (a span that begins its line but no statement: a wrapped condition)
        return None
    block = tree.body[0].body if wrapped else tree.body
    if len(tree.body) != 1 or len(block) != 1 or not isinstance(block[0], ast.If):
        return None
    node = block[0]
    ast.increment_lineno(node, line - 1 - wrapped)
    return node if (node.lineno, node.end_lineno, node.col_offset, node.end_col_offset) == span else None
