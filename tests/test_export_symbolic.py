"""lazycore.export with symbolic dimensions (dynamic=): one StableHLO program
with ``?`` dimensions, run at several sizes against eager torch and NumPy, and
the functions it refuses, each naming why."""

import contextlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import lazycore
import lazycore.numpy as lnp
import lazycore.torch as ltorch
from lazycore.observe.export import ExportError


CONSUMER = Path(__file__).parent / "jaxlib_symbolic_consumer.py"


@pytest.fixture
def dev():
    return ltorch.device()


def _main_signature(exported) -> str:
    return next(line for line in exported.mlir_text.splitlines() if "func.func @main" in line)


def test_an_mlp_exported_once_runs_at_several_batch_sizes(dev):
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 10))
    lazy_mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 10)).to(dev)
    lazy_mlp.load_state_dict(mlp.state_dict())

    def classify(x):
        logits = lazy_mlp(x)
        return logits.log_softmax(-1), logits.argmax(-1)

    exported = lazycore.export(classify, torch.randn(4, 16).to(dev), dynamic={0: {0: "b"}})
    assert _main_signature(exported) == ("  func.func @main(%arg0: tensor<?x16xf32>) -> "
                                         "(tensor<?x10xf32>, tensor<?xi64>) {")
    assert exported.symbols == ("b",)
    assert exported.args[0].shape == ("b", 16)
    assert [r.shape for r in exported.results] == [("b", 10), ("b",)]
    assert exported.args[0].type.shape == (4, 16)  # the type at the example's size
    for b in (1, 3, 8, 33):
        x = torch.randn(b, 16)
        with torch.no_grad():
            want = [t.numpy() for t in (mlp(x).log_softmax(-1), mlp(x).argmax(-1))]
        got = exported.call(x.numpy())
        assert [g.shape for g in got] == [(b, 10), (b,)]
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(got[1], want[1])


def test_attention_with_a_dynamic_batch_and_sequence(dev):
    """Two symbols: products of them (b*s, from a flattening reshape) and a
    size as a value (the mean over the sequence divides by s)."""
    torch.manual_seed(1)
    proj = torch.nn.Linear(8, 8)
    lazy_proj = torch.nn.Linear(8, 8).to(dev)
    lazy_proj.load_state_dict(proj.state_dict())

    def attend(q, k, v):
        p = proj if q.device.type == "cpu" else lazy_proj
        scores = q @ k.transpose(-1, -2) / 8 ** 0.5
        out = scores.softmax(-1) @ v
        flat = p(out.reshape(-1, 8))  # (b*s, 8)
        return flat, out.mean(1), (out.sum(-1) + torch.arange(q.shape[1], device=q.device)).amax(0)

    ex = [torch.randn(2, 3, 8).to(dev) for _ in range(3)]
    spec = {name: {0: "b", 1: "s"} for name in ("q", "k", "v")}  # by parameter name
    exported = lazycore.export(attend, *ex, dynamic=spec)
    assert _main_signature(exported).count("tensor<?x?x8xf32>") == 3
    assert "dynamic_reshape" in exported.mlir_text and "get_dimension_size" in exported.mlir_text
    assert [r.shape for r in exported.results] == [("b*s", 8), ("b", 8), ("s",)]
    assert exported.calling_convention()["symbols"] == ["b", "s"]
    assert exported.calling_convention()["results"][0]["shape"] == ["b*s", 8]
    for b, s in ((1, 5), (3, 2), (4, 7)):
        q, k, v = (torch.randn(b, s, 8) for _ in range(3))
        with torch.no_grad():
            want = [t.numpy() for t in attend(q, k, v)]
        got = exported.call(q.numpy(), k.numpy(), v.numpy())
        for g, w in zip(got, want):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_sizes_as_values_sums_of_symbols_and_shape_ops(dev):
    """A size in a value (x / b, b added to ints), a constant of a symbolic
    shape (torch.full), a sum of two symbols (cat), views, padding, slices
    with steps, flips: each generalized and run against eager."""

    def shapes(x, y):
        b = x.shape[0]
        scaled = x * (1.0 / b) + torch.full((b, 4), 7.0, device=x.device)
        joined = torch.cat([x, y], 0)
        moved = x.view(b, 2, 2).expand(b, 2, 2).permute(2, 0, 1).reshape(2, -1)
        padded = torch.nn.functional.pad(x, (1, 1))
        counts = torch.zeros(b, dtype=torch.int64, device=x.device) + b
        return scaled, joined, moved, x[1:, ::2], padded, x.flip(0), counts

    exported = lazycore.export(shapes, torch.randn(2, 4).to(dev), torch.randn(3, 4).to(dev),
                               dynamic={0: {0: "b"}, 1: {0: "c"}})
    assert [r.type_text for r in exported.results] == [
        "tensor<bx4xf32>", "tensor<(b + c)x4xf32>", "tensor<2x(2*b)xf32>", "tensor<(b - 1)x2xf32>",
        "tensor<bx6xf32>", "tensor<bx4xf32>", "tensor<bxi64>"]
    for b, c in ((1, 1), (5, 2), (6, 9)):
        x, y = torch.randn(b, 4), torch.randn(c, 4)
        for got, want in zip(exported.call(x.numpy(), y.numpy()), shapes(x, y)):
            assert got.shape == tuple(want.shape) and got.dtype == want.numpy().dtype
            np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)


def test_numpy_reductions_and_slices_over_a_dynamic_axis(rng):
    def stats(x, w):
        centered = x - x.mean(axis=0)
        return (centered.var(axis=0), x.max(axis=0), (x * w[:, None]).sum(axis=0), x[1:] - x[:-1],
                np.exp(x[:, 0]), x.sum())

    exported = lazycore.export(stats, lnp.zeros((5, 3), np.float32), lnp.zeros((5,), np.float32),
                               dynamic={0: ("n", None), 1: ("n",)})
    assert _main_signature(exported).startswith("  func.func @main(%arg0: tensor<?x3xf32>, %arg1: tensor<?xf32>)")
    assert "real_dynamic_slice" in exported.mlir_text
    assert [r.shape for r in exported.results] == [(3,), (3,), (3,), ("n - 1", 3), ("n",), ()]
    for n in (2, 6, 11):
        x, w = rng.standard_normal((n, 3)).astype(np.float32), rng.standard_normal(n).astype(np.float32)
        for g, want in zip(exported.call(x, w), stats(x, w)):
            assert g.shape == np.shape(want)
            np.testing.assert_allclose(g, want, rtol=2e-5, atol=2e-5)


def test_loops_and_branches_carry_symbolic_shapes(rng):
    """Region bodies (fori_loop, cond, while_loop) take and give values of
    symbolic shapes; a size as a value inside a body (the mean's divisor)."""

    def looped(x, n):
        y = lazycore.fori_loop(0, 5, lambda i, v: np.tanh(v) * 1.5 + v.mean(), x)
        z = lazycore.cond(n > 0, lambda a: a * 2, lambda a: a[::-1], y)
        return lazycore.while_loop(lambda c: c[1] < 3, lambda c: (c[0] + 1.0, c[1] + 1),
                                   (z, lnp.asarray(np.int32(0))))[0]

    def eager(x, n):
        for _ in range(5):
            x = np.tanh(x) * 1.5 + x.mean()
        return (x * 2 if n > 0 else x[::-1]) + 3.0

    exported = lazycore.export(looped, lnp.zeros((4, 3), np.float32), lnp.asarray(np.float32(1.0)),
                               dynamic={0: ("b", None)})
    assert "stablehlo.while" in exported.mlir_text and "tensor<?x3xf32>" in exported.mlir_text
    for b in (1, 6, 13):
        x = rng.random((b, 3), dtype=np.float32)
        for n in (1.0, -1.0):
            np.testing.assert_allclose(exported.call(x, np.float32(n))[0], eager(x, n), rtol=1e-5, atol=1e-5)


def test_one_name_is_one_size_in_every_argument(dev):
    def add(x, y):
        return x + y

    exported = lazycore.export(add, torch.ones(3, 2).to(dev), torch.ones(3, 2).to(dev),
                               dynamic={0: {0: "b"}, 1: {0: "b"}})
    np.testing.assert_array_equal(exported.call(np.ones((5, 2)), np.full((5, 2), 2.0))[0], np.full((5, 2), 3.0))
    with pytest.raises(ValueError, match="b is 5 and 4"):
        exported.call(np.ones((5, 2)), np.ones((4, 2)))
    with pytest.raises(ValueError, match=re.escape("takes tensor<bx2xf32>")):
        exported.call(np.ones((5, 3)), np.ones((5, 3)))
    # examples that disagree about one name's size
    with pytest.raises(ValueError, match="sizes of 'b' differ"):
        lazycore.export(add, torch.ones(3, 2).to(dev), torch.ones(4, 2).to(dev), dynamic={0: {0: "b"}, 1: {0: "b"}})


def test_the_symbolic_program_is_compiled_once_per_size(dev):
    exported = lazycore.export(lambda x: x * 2, torch.ones(3).to(dev), dynamic={0: ("n",)})
    for n in (2, 5, 2, 5, 2):
        np.testing.assert_array_equal(exported.call(np.ones(n, np.float32))[0], np.full(n, 2.0, np.float32))
    assert sorted(exported.__dict__["_executables"]) == [(("n", 2),), (("n", 5),)]


def test_a_function_that_branches_on_a_size_is_refused(dev):
    def branchy(x):
        return x * 2 if x.shape[0] > 16 else x + 1

    with pytest.raises(ExportError, match="branch on a size"):
        lazycore.export(branchy, torch.ones(4, 2).to(dev), dynamic={0: {0: "b"}})


def test_an_op_whose_lowering_depends_on_the_size_is_refused_naming_it():
    # an integer scan lowers to a number of steps that grows with the length (a float
    # scan is one loop, NumPy's order: it exports, tests/numpy/test_np_user_code.py)
    with pytest.raises(ExportError, match=r"program differs at different sizes .* ops\), first at .*stablehlo\.\w+ "
                                          r"\(from .*test_export_symbolic.py:\d+\)"):
        lazycore.export(lambda x: np.cumsum(x), lnp.zeros(4, np.int32), dynamic={0: ("n",)})


def test_a_size_baked_into_a_constants_values_is_refused(dev):
    def positions(x):
        table = torch.arange(x.shape[0]).float() ** 2  # computed on the host for this length
        return x + table.to(x.device)

    with pytest.raises(ExportError, match="stablehlo.constant.*a size baked into its values"):
        lazycore.export(positions, torch.ones(4).to(dev), dynamic={0: ("n",)})


def test_a_size_that_is_no_polynomial_of_the_symbols_is_refused(dev):
    with pytest.raises(ExportError, match=r"no sum of products of the symbols.*n=12: 6, n=20: 10, n=28: 14"):
        lazycore.export(lambda x: x[::2] * 2, torch.ones(4).to(dev), dynamic={0: ("n",)})
    with pytest.raises(ExportError, match=r"no sum of products"):
        lazycore.export(lambda x: x.reshape(-1)[: x.shape[0] ** 2 // 8] * 2, torch.ones(4, 4).to(dev),
                        dynamic={0: ("n", "n")})


def test_an_op_that_makes_a_symbolic_shape_from_static_operands_is_refused():
    def noise(state, x):  # the draw's shape comes from x's, but the op sees only the static state
        _, bits = lazycore.apply("rng_bit_generator", state, algorithm="three_fry", shape=x.shape, dtype="ui32")
        return bits

    with pytest.raises(ExportError, match=r"stablehlo\.rng_bit_generator \(from .*test_export_symbolic.py:\d+\) "
                                          "makes a result of a symbolic shape from operands of static shapes"):
        lazycore.export(noise, lazycore.from_numpy(np.array([1, 2], np.uint64)), lnp.zeros(4, np.float32),
                        dynamic={1: ("n",)})


def test_the_dynamic_spec_is_checked(dev):
    x = torch.ones(3, 2).to(dev)
    with pytest.raises(ValueError, match="names argument 'y'"):
        lazycore.export(lambda x: x, x, dynamic={"y": {0: "b"}})
    with pytest.raises(ValueError, match="names dimension 2"):
        lazycore.export(lambda x: x, x, dynamic={0: {2: "b"}})
    with pytest.raises(ValueError, match="gives 1 dimensions"):
        lazycore.export(lambda x: x, x, dynamic={0: ("b",)})
    with pytest.raises(ValueError, match="identifier"):
        lazycore.export(lambda x: x, x, dynamic={0: {0: "2b"}})
    # no symbol at all: the static program
    static = lazycore.export(lambda x: x + 1, x, dynamic={0: (None, None)})
    assert static.symbols == () and "?" not in static.mlir_text


def test_the_guides_example_prints_what_the_guide_shows():
    guide = (Path(__file__).resolve().parent.parent / "docs" / "guides" / "export.md").read_text()
    section = guide[guide.index("## Symbolic dimensions"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    shown = re.search(r"```text\n(.*?)```", section, re.S).group(1)
    printed, namespace = io.StringIO(), {"__name__": "guide"}
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "docs/guides/export.md", "exec"), namespace)
    pattern = ".*".join(re.escape(part) for part in shown.split("..."))
    assert re.fullmatch(pattern, printed.getvalue(), re.S), printed.getvalue()
    signature = re.search(r"`(func\.func @main\(.*?)`", section).group(1)
    assert signature in namespace["exported"].mlir_text  # the text quotes the module the example makes


def test_jax_alone_refines_and_runs_the_artifact_at_several_sizes(dev, tmp_path):
    """A consumer that never imports lazycore runs the one artifact at three
    sizes, as jax.export runs its own (jax's refine_polymorphic_shapes)."""
    torch.manual_seed(2)
    norm = torch.nn.LayerNorm(6)
    lazy_norm = torch.nn.LayerNorm(6).to(dev)
    lazy_norm.load_state_dict(norm.state_dict())

    def block(x, mask):
        n = norm if x.device.type == "cpu" else lazy_norm
        h = n(x) * mask[..., None]
        return h.sum(1) / mask.sum(1, keepdim=True), h[:, 1:] - h[:, :-1]

    exported = lazycore.export(block, torch.ones(2, 3, 6).to(dev), torch.ones(2, 3).to(dev),
                               dynamic={0: ("b", "s", None), 1: ("b", "s")})
    (tmp_path / "artifact.mlirbc").write_bytes(exported.artifact)
    (tmp_path / "convention.json").write_text(json.dumps(exported.calling_convention()))
    inputs = []
    for k, (b, s) in enumerate(((1, 2), (4, 5), (3, 9))):
        x, mask = torch.randn(b, s, 6), (torch.rand(b, s) > 0.3).float()
        mask[:, 0] = 1
        inputs.append((x, mask))
        (tmp_path / f"run{k}").mkdir()
        np.save(tmp_path / f"run{k}" / "arg0.npy", x.numpy())
        np.save(tmp_path / f"run{k}" / "arg1.npy", mask.numpy())
    done = subprocess.run([sys.executable, str(CONSUMER), str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ran 3 sizes"
    for k, (x, mask) in enumerate(inputs):
        with torch.no_grad():
            want = [t.numpy() for t in block(x, mask)]
        got = [np.load(tmp_path / f"run{k}" / f"result{j}.npy") for j in range(2)]
        for g, w in zip(got, want):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
        # lazycore's own client, refining with the StableHLO passes of its bindings, agrees
        for g, mine in zip(got, exported.call(x.numpy(), mask.numpy())):
            np.testing.assert_allclose(mine, g, rtol=1e-6, atol=1e-6)


def test_kernels_modelled_per_length_take_a_size_free_form_under_a_symbol(dev):
    """Lowerings that follow eager's vector lanes, scalar tails or column chunks
    (softmax and log_softmax over the last dim and over a dim with elements
    after it, layer norm, cross-entropy, gelu, maximum's ties) build a graph
    per length; under a symbolic dim they take the form one program holds."""
    torch.manual_seed(2)

    def kernels(x, y):
        s = x.shape[1]
        return (x.softmax(-1), x.softmax(1), x.log_softmax(-1), x.log_softmax(1),
                torch.nn.functional.layer_norm(x, (s, 24)),
                torch.nn.functional.cross_entropy(x, torch.zeros(x.shape[0], 24, dtype=torch.long, device=x.device)),
                torch.nn.functional.gelu(x), torch.maximum(x, y))

    ex = [torch.randn(2, 40, 24).to(dev) for _ in range(2)]
    exported = lazycore.export(kernels, *ex, dynamic={0: {1: "s"}, 1: {1: "s"}})
    for s in (3, 17, 40, 100):
        x, y = torch.randn(2, s, 24), torch.randn(2, s, 24)
        want = kernels(x, y)
        got = exported.call(x.numpy(), y.numpy())
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-6)
