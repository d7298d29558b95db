"""lazycore.export: a traced function as a StableHLO portable artifact and its
calling convention, run by jaxlib alone in a process that never imports
lazycore (tests/jaxlib_consumer.py), against eager torch and NumPy."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

import lazycore
import lazycore.numpy as lnp
import lazycore.torch as ltorch
from lazycore.observe.export import Exported, ExportError

CONSUMER = Path(__file__).parent / "jaxlib_consumer.py"


@pytest.fixture
def dev():
    return ltorch.device()


def run_with_jaxlib(exported: Exported, arrays, tmp_path) -> list[np.ndarray]:
    """The artifact's results for host ``arrays``, computed in a fresh process by jaxlib."""
    (tmp_path / "artifact.mlirbc").write_bytes(exported.artifact)
    (tmp_path / "convention.json").write_text(json.dumps(exported.calling_convention()))
    for i, a in enumerate(arrays):
        np.save(tmp_path / f"arg{i}.npy", np.asarray(a))
    done = subprocess.run([sys.executable, str(CONSUMER), str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"ran {len(exported.results)} results"
    return [np.load(tmp_path / f"result{j}.npy") for j in range(len(exported.results))]


# --- the artifact, run by jaxlib alone, against eager ------------------------------


def test_a_torch_function_runs_in_jaxlib_with_eagers_results(dev, tmp_path):
    torch.manual_seed(0)
    layer = torch.nn.Linear(5, 3)
    lazy_layer = torch.nn.Linear(5, 3).to(dev)
    lazy_layer.load_state_dict(layer.state_dict())

    def step(x, total, scale):
        h = torch.nn.functional.gelu(lazy_layer(x) if x.device == dev else layer(x)) * 0.75
        total.add_(h.sum(0) * scale)  # updated in place: a result of its own
        return h.softmax(-1), h.mean()

    examples = (torch.randn(4, 5).to(dev), torch.zeros(3).to(dev), torch.tensor(2.0).to(dev))
    exported = lazycore.export(step, *examples, donate_argnums=(1,))

    x, total, scale = torch.randn(4, 5), torch.randn(3), torch.tensor(-1.5)
    eager_total = total.clone()
    with torch.no_grad():
        want = [t.numpy() for t in step(x, eager_total, scale)] + [eager_total.numpy()]
    got = run_with_jaxlib(exported, [x.numpy(), total.numpy(), scale.numpy()], tmp_path)
    assert [g.dtype for g in got] == [np.float32] * 3
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-6)
    # lazycore's own client runs the same bytes to the same values
    for g, w in zip(exported.call(x.numpy(), total.numpy(), scale.numpy()), got):
        np.testing.assert_array_equal(g, w)


def test_a_numpy_function_runs_in_jaxlib_with_numpys_results(tmp_path, rng):
    def stencil(u, k):
        u[1:-1] = 0.25 * (u[:-2] + u[2:]) + 0.5 * u[1:-1]  # a write through a view
        return np.where(u > 0, np.sqrt(np.abs(u)), u * k).sum(axis=1), (u @ u.T).astype(np.float64)

    exported = lazycore.export(stencil, lnp.zeros((6, 4), np.float32), lnp.asarray(np.float32(3.0)))
    u, k = rng.standard_normal((6, 4)).astype(np.float32), np.float32(-2.0)
    want_u = u.copy()
    want = list(stencil(want_u, k)) + [want_u]
    got = run_with_jaxlib(exported, [u, k], tmp_path)
    assert [g.dtype for g in got] == [w.dtype for w in want] == [np.float32, np.float64, np.float32]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_a_core_api_function_runs_in_jaxlib(tmp_path, rng):
    def affine(x, y):
        prod = lazycore.apply("mul", x, y)
        return lazycore.apply("add", prod, lazycore.broadcast_to(lazycore.scalar(0.5, "f64"), prod.shape))

    a = lazycore.from_numpy(np.ones((2, 3)))
    exported = lazycore.export(affine, a, a)
    x, y = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    (got,) = run_with_jaxlib(exported, [x, y], tmp_path)
    np.testing.assert_allclose(got, x * y + 0.5, rtol=1e-15)  # XLA may fuse a multiply-add


def test_an_integer_division_exports_its_check_as_a_result(dev, tmp_path):
    exported = lazycore.export(lambda a, b: a // b, torch.tensor([7, 8]).to(dev), torch.tensor([2, 3]).to(dev))
    quotient, check = exported.results
    assert (quotient.kind, check.kind, check.type.dtype, check.error) == ("result", "check", "i1", "RuntimeError")
    assert check.message == "ZeroDivisionError"
    got = run_with_jaxlib(exported, [np.array([7, -8]), np.array([2, 3])], tmp_path)
    np.testing.assert_array_equal(got[0], torch.tensor([7, -8]) // torch.tensor([2, 3]))
    assert not got[1]
    assert exported.call(np.array([7, 8]), np.array([2, 0]))[1]  # eager would raise


# --- the calling convention and the texts ----------------------------------------


def test_the_calling_convention_names_order_shapes_dtypes_and_donations(dev):
    def f(x, unused, counter):
        counter.add_(1)
        return x.sum(0).to(torch.float64), x > 0

    exported = lazycore.export(f, torch.ones(2, 3).to(dev), torch.ones(5, dtype=torch.int32).to(dev),
                               torch.zeros((), dtype=torch.int64).to(dev), donate_argnums=[-1])
    assert [(a.index, a.shape, a.dtype, a.donated_to) for a in exported.args] == [
        (0, (2, 3), np.float32, None), (1, (5,), np.int32, None), (2, (), np.int64, 2)]
    assert [(r.index, r.shape, r.dtype, r.kind, r.arg) for r in exported.results] == [
        (0, (3,), np.float64, "result", None), (1, (2, 3), np.bool_, "result", None), (2, (), np.int64, "update", 2)]
    assert exported.donations == {2: 2}
    assert json.loads(json.dumps(exported.calling_convention()))["args"][2] == {
        "index": 2, "shape": [], "dtype": "int64", "donated_to": 2}
    # every argument is a parameter, in fn's order, used or not; donation is XLA's alias
    assert "func.func @main(%arg0: tensor<2x3xf32>, %arg1: tensor<5xi32>, %arg2: tensor<i64> " \
           "{tf.aliasing_output = 2 : i32})" in exported.mlir_text
    assert "lazy." not in exported.mlir_text and '"lazy.column_sum"' in exported.lazy_text
    assert str(exported).splitlines() == [
        f"lazycore.export of f: StableHLO {exported.stablehlo_version}, {len(exported.artifact)} bytes",
        "  arg 0: tensor<2x3xf32>",
        "  arg 1: tensor<5xi32>",
        "  arg 2: tensor<i64>, donated to result 2",
        "  result 0: tensor<3xf64>, returned by f",
        "  result 1: tensor<2x3xi1>, returned by f",
        "  result 2: tensor<i64>, the new value of arg 2",
    ]
    got = exported.call(np.arange(6, dtype=np.float32).reshape(2, 3) - 2, np.zeros(5, np.int32), np.int64(41))
    np.testing.assert_array_equal(got[0], [-1.0, 1.0, 3.0])
    np.testing.assert_array_equal(got[1], [[False, False, False], [True, True, True]])
    assert got[2] == 42


def test_captured_values_and_python_numbers_are_constants_of_the_export(dev, rng):
    w = torch.from_numpy(rng.standard_normal((3, 3)).astype(np.float32))
    lazy_w = w.to(dev) * 2  # pending: its value at the export is baked in
    exported = lazycore.export(lambda x: x @ lazy_w + 0.125, torch.ones(2, 3).to(dev))
    assert len(exported.args) == 1
    x = rng.standard_normal((2, 3)).astype(np.float32)
    (got,) = exported.call(x)
    np.testing.assert_allclose(got, x @ (w.numpy() * 2) + 0.125, rtol=1e-5, atol=1e-6)


def test_a_donated_argument_takes_the_first_free_result_of_its_type(dev):
    exported = lazycore.export(lambda a, b: (a + b, a * b), torch.ones(3).to(dev), torch.ones(3).to(dev),
                               donate_argnums=(0, 1))
    assert exported.donations == {0: 0, 1: 1}
    with pytest.raises(ValueError, match="argument 1 of <lambda> is donated, but no result of <lambda> has its type"):
        lazycore.export(lambda a, b: a.sum(), torch.ones(3).to(dev), torch.ones(3).to(dev), donate_argnums=1)
    with pytest.raises(ValueError, match="donate_argnums names argument 2; <lambda> takes 1"):
        lazycore.export(lambda a: a, torch.ones(3).to(dev), donate_argnums=2)


# --- what cannot be exported, and what exporting leaves alone ---------------------


def test_reading_a_value_while_traced_is_an_error_at_the_line(dev):
    def branches(x):
        if (x.sum() > 0).item():
            return x
        return -x

    def prints(x):
        print(x)
        return x

    def steps(x):
        y = x + 1
        lazycore.mark_step()
        return y

    with pytest.raises(ExportError, match=rf"branches read the value of a lazy tensor<i1> at {__file__}:\d+"):
        lazycore.export(branches, torch.ones(3).to(dev))
    line = prints.__code__.co_firstlineno + 1
    with pytest.raises(ExportError, match=rf"prints read argument 0, which has no value .* \(at {__file__}:{line}\)"):
        lazycore.export(prints, torch.ones(3).to(dev))
    with pytest.raises(ExportError, match="steps ran a barrier"):
        lazycore.export(steps, torch.ones(3).to(dev))
    with pytest.raises(ExportError, match="read argument 0"):
        lazycore.export(lambda a: np.asarray(a).sum(), lnp.ones(3))


def test_updating_a_value_that_is_not_an_argument_is_refused_and_undone(dev):
    bn = torch.nn.BatchNorm1d(3).to(dev)
    mean = bn.running_mean.cpu().clone()
    with pytest.raises(ExportError, match=r"BatchNorm1d updated 3 value\(s\) in place that it was not given"):
        lazycore.export(bn, torch.randn(4, 3).to(dev))
    assert torch.equal(bn.running_mean.cpu(), mean) and bn.num_batches_tracked.item() == 0
    bn.eval()
    assert lazycore.export(bn, torch.randn(4, 3).to(dev)).results[0].shape == (4, 3)


def test_random_draws_need_their_generator_state_as_an_argument(dev):
    ltorch.manual_seed(0)
    torch.rand(2, device=dev)  # the generator's state exists before the export, and keeps its value
    with pytest.raises(ExportError, match=rf"<lambda> draws random numbers \(at {__file__}:\d+\) from a generator "
                       "that is not an argument"):
        lazycore.export(lambda x: x + torch.rand(3, device=dev), torch.ones(3, device=dev))
    with pytest.raises(ExportError, match="draws random numbers"):
        lazycore.export(lambda a: a + lnp.random.default_rng(0).random(3), lnp.ones(3))
    # the lazy stream goes on as if nothing had been exported
    ltorch.manual_seed(0)
    want = torch.rand(2, device=dev).cpu(), torch.rand(3, device=dev).cpu()
    ltorch.manual_seed(0)
    torch.rand(2, device=dev)
    with pytest.raises(ExportError):
        lazycore.export(lambda x: x + torch.rand(3, device=dev), torch.ones(3, device=dev))
    assert torch.equal(torch.rand(3, device=dev).cpu(), want[1])

    def draw(state):  # a generator state given as an argument is the program's to thread
        new, bits = lazycore.apply("rng_bit_generator", state, algorithm="three_fry", shape=(4,), dtype="ui32")
        return bits, new

    exported = lazycore.export(draw, lazycore.from_numpy(np.array([1, 2], np.uint64)))
    bits, new = exported.call(np.array([1, 2], np.uint64))
    again, _ = exported.call(new)
    assert bits.dtype == np.uint32 and not np.array_equal(bits, again)
    np.testing.assert_array_equal(exported.call(np.array([1, 2], np.uint64))[0], bits)


def test_the_examples_are_never_read_and_the_trace_leaves_nothing_behind(dev):
    x = torch.ones(3).to(dev) * 5  # pending
    before = dict(lazycore.metrics.counters())
    kept = []

    def keeps(a):
        kept.append(a * 2)
        return a + 1

    lazycore.export(keeps, x)
    after = lazycore.metrics.counters()
    assert [after[k] - before[k] for k in ("executions", "compiles", "transfers_to_host")] == [0, 0, 0]
    with pytest.raises(lazycore.BarrierError, match="argument 0 of lazycore.export's trace of keeps"):
        kept[0].cpu()
    assert x.cpu().tolist() == [5.0, 5.0, 5.0]


def test_examples_and_results_must_be_lazy(dev):
    with pytest.raises(TypeError, match=r"argument 1 of <lambda> is a ndarray; examples are lazy values"):
        lazycore.export(lambda a, b: a, torch.ones(2).to(dev), np.ones(2))
    with pytest.raises(TypeError, match="result 1 of <lambda> is a float, not a lazy value"):
        lazycore.export(lambda a: (a, 1.0), torch.ones(2).to(dev))


def test_export_is_a_facade_name_and_loads_no_mlir_until_it_builds():
    code = textwrap.dedent("""
        import sys
        import numpy as np
        import lazycore
        from lazycore.observe.export import export
        print(lazycore.export is export, "torch_mlir" in sys.modules)
        e = lazycore.export(lambda a: lazycore.apply("neg", a), lazycore.from_numpy(np.ones(2, np.float32)))
        print("torch_mlir" in sys.modules, e.call(np.array([1.0, -2.0], np.float32))[0].tolist())
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["True False", "True [-1.0, 2.0]"]
