"""Where eager's CPU has no complex32 (chalf) kernel, the lazy device raises eager's exception (issue 43).

Eager's CPU computes chalf in few kernels. For every OpInfo that does not list
complex32 among its CPU dtypes, the first chalf samples run eagerly; where
eager raises, the same call on the lazy device must raise the same exception
type with the same message, at the call (not at the barrier, and never a
value). Before :mod:`lazycore.frontends.torch.chalf_kernels`, 85 of them
computed a value (44: pooling, padding, norms, losses, ``addbmm``, ``vdot``,
``cross``, ``isin``, draws, ...) or raised another exception type (21: a
ShapeError for eager's RuntimeError on sorts) or another message (20). The
last two to match were ``max_pool1d`` and ``dropout``, whose composites hand
the lazy device another ATen op than the one eager's CPU runs.
"""

import gc
import warnings

import pytest

pytest.importorskip("expecttest")  # torch.testing._internal imports it

import torch  # noqa: E402

import lazycore  # noqa: E402
from lazycore.frontends.torch import opinfo  # noqa: E402
from lazycore.ir.heap import collector_paused  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")

CHALF = torch.complex32
SAMPLES = 4


def _no_cpu_chalf():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch.testing._internal.common_methods_invocations import op_db
    return [op for op in op_db if CHALF not in op.supported_dtypes("cpu")]


OPS = {opinfo.op_name(op): op for op in _no_cpu_chalf()}

# OpInfo -> why the lazy device's exception is not eager's (none now: max_pool1d's
# kernel choice is eager CPU's, ops/max_pool1d.py, and native_dropout is asked as the
# dropout eager's CPU runs, chalf_kernels._CPUS).
KNOWN: dict[str, str] = {}


def _outcome(op, dev):
    """None: every sample eager refuses is refused alike on the lazy device; else what differs."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            samples = opinfo.samples_of(op, SAMPLES, CHALF)
        except Exception:
            return None  # (OpInfo makes no chalf samples for it: nothing to ask eager)
        for s in samples:
            inp, args, kwargs = s.input, s.args, s.kwargs
            try:
                op(*opinfo._clone((inp, *args)), **opinfo._clone(kwargs))
                continue  # eager takes this sample: values are the OpInfo sweep's matter
            except Exception as e:
                eager = (type(e), str(e))
            largs = opinfo._retarget((opinfo._to_lazy(inp, dev), *opinfo._to_lazy(args, dev)), dev)
            lkwargs = opinfo._retarget(opinfo._to_lazy(kwargs, dev), dev)
            try:
                result = op(*largs, **lkwargs)
            except Exception as e:
                if (type(e), str(e)) != eager:
                    return f"eager: {eager[0].__name__}: {eager[1]}; lazy: {type(e).__name__}: {e}"
                continue
            try:
                opinfo._to_host(result)
                return f"eager: {eager[0].__name__}: {eager[1]}; lazy: computed a value"
            except Exception as e:
                return f"eager: {eager[0].__name__}: {eager[1]}; lazy: {type(e).__name__} at the barrier: {e}"
    return None


@pytest.fixture(scope="module")
def outcomes(request):
    names = {i.callspec.params["name"] for i in request.session.items
             if i.module is request.module and hasattr(i, "callspec")}
    dev = torch.device("lazy")
    got = {}
    # An op's refusal leaves its tensors in reference cycles (tracebacks, frames) that the next
    # op's barrier must not carry. With automatic collection off, everything an op made is in the
    # youngest generation, so a young collection after each op finds those cycles at the cost of
    # what the op made; a full one per op walked the whole heap of a worker that had run many
    # files before (95 s for this fixture, 8 s in a fresh one).
    with collector_paused():
        for name in sorted(names):
            got[name] = _outcome(OPS[name], dev)
            gc.collect(0)
            try:
                lazycore.mark_step()
            except Exception:
                pass  # (a refused op's graph is dropped with its tensors)
    return got


def test_known_are_opinfos_without_cpu_chalf():
    assert set(KNOWN) <= set(OPS)
    assert len(OPS) > 500  # (579 in torch 2.13)


@pytest.mark.parametrize("name", sorted(OPS))
def test_eagers_chalf_refusal_is_the_lazy_devices(outcomes, name):
    why = outcomes[name]
    if name in KNOWN:
        assert why is not None, f"{name} now matches eager: drop it from KNOWN"
        pytest.xfail(KNOWN[name])
    assert why is None, f"{name}: {why}"
