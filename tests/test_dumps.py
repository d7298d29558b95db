"""IR dumps (LAZYCORE_DUMP_DIR), graph pictures, ir_text and lazycore.testing.

Everything runs the real stack: torch and NumPy programs on the lazy device,
compiled through the pass pipeline and XLA.
"""

import os
import re
import shutil
import subprocess

import numpy as np
import pytest
import torch

import lazycore as lc
import lazycore.numpy as lnp
import lazycore.observe.testing
import lazycore.torch as ltorch
from lazycore.observe import inspect_graph, metrics
from lazycore.ir.config import override
from lazycore.frontends.torch.tensor import read
from lazycore.passes.pipeline import default_for, split_elements

HERE = os.path.basename(__file__)


# --- a small DOT parser (the subset of the DOT grammar Graphviz files use) ----------

_TOKEN = re.compile(
    r"""\s+|//[^\n]*|/\*.*?\*/|^\#[^\n]*
      |(?P<str>"(?:[^"\\]|\\.)*")
      |(?P<id>[A-Za-z_\x80-\uffff][A-Za-z_0-9\x80-\uffff]*|-?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?))
      |(?P<op>->|--|[{}\[\];,=:])
      |(?P<bad>.)""",
    re.S | re.M | re.X,
)


def parse_dot(text: str):
    """DOT text -> (directed, name, nodes {id: attrs}, edges [(a, b, attrs)]); SyntaxError if malformed."""
    toks = []
    for m in _TOKEN.finditer(text):
        if m.group("bad"):
            raise SyntaxError(f"bad character {m.group('bad')!r} at {m.start()}")
        for kind in ("str", "id", "op"):
            if m.group(kind):
                value = m.group(kind)
                if kind == "str":
                    value = re.sub(r"\\(.)", lambda e: "\n" if e.group(1) == "n" else e.group(1), value[1:-1])
                    kind = "id"
                toks.append((kind, value))
    toks.append(("eof", None))
    pos = 0

    def peek(k=0):
        return toks[pos + k]

    def take(kind=None, value=None):
        nonlocal pos
        tk = toks[pos]
        if (kind and tk[0] != kind) or (value and tk[1] != value):
            raise SyntaxError(f"expected {value or kind}, got {tk[1]!r} (token {pos})")
        pos += 1
        return tk[1]

    def attr_list():
        attrs = {}
        while peek() == ("op", "["):
            take("op", "[")
            while peek() != ("op", "]"):
                k = take("id")
                take("op", "=")
                attrs[k] = take("id")
                if peek() in (("op", ","), ("op", ";")):
                    take()
            take("op", "]")
        return attrs

    if peek() == ("id", "strict"):
        take()
    kind = take("id")
    if kind not in ("digraph", "graph"):
        raise SyntaxError(f"expected graph or digraph, got {kind!r}")
    name = take("id") if peek()[0] == "id" else None
    take("op", "{")
    nodes, edges, arrow = {}, [], "->" if kind == "digraph" else "--"
    while peek() != ("op", "}"):
        if peek()[0] != "id":
            raise SyntaxError(f"unexpected {peek()[1]!r}")
        if peek(1) == ("op", "="):
            take(), take(), take("id")
        elif peek()[1] in ("graph", "node", "edge") and peek(1) == ("op", "["):
            take(), attr_list()
        else:
            chain = [take("id")]
            while peek() == ("op", arrow):
                take()
                chain.append(take("id"))
            attrs = attr_list()
            if len(chain) == 1:
                nodes.setdefault(chain[0], {}).update(attrs)
            else:
                edges.extend((a, b, attrs) for a, b in zip(chain, chain[1:]))
        if peek() == ("op", ";"):
            take()
    take("op", "}")
    take("eof")
    return kind == "digraph", name, nodes, edges


def check_dot(text: str):
    directed, _, nodes, edges = parse_dot(text)
    assert directed
    for a, b, _ in edges:
        assert a in nodes and b in nodes, f"edge {a} -> {b} to an undeclared node"
    if shutil.which("dot"):  # Graphviz itself, where installed
        subprocess.run(["dot", "-Tsvg"], input=text, text=True, check=True, capture_output=True)
    return nodes, edges


def test_dot_parser_rejects_malformed():
    parse_dot('digraph "g" {\n  a [label="x\\ny"];\n  a -> b [label="0"];\n}\n')
    for bad in ('digraph { a -> ; }', 'digraph { a [label="x" }', 'digraph { a -> b', 'digraph { a "b }'):
        with pytest.raises(SyntaxError):
            parse_dot(bad)


# --- dumps -------------------------------------------------------------------------


def _folders(root):
    return sorted(e for e in os.listdir(root) if os.path.isdir(os.path.join(root, e)))


def _check_dump_folder(folder, lazy_ops, hlo_ops):
    passes = split_elements(default_for("cpu"))  # a CPU barrier's pipeline
    expected = {"00-input.mlir", "stablehlo.mlir", "graph.dot", "info.txt"}
    expected |= {f"{i:02d}-{p}.mlir" for i, p in enumerate(passes, 1)}
    assert set(os.listdir(folder)) == expected

    def read(name):
        with open(os.path.join(folder, name)) as f:
            return f.read()

    lazy = read("00-input.mlir")
    assert "func.func @main" in lazy and "stablehlo." not in lazy
    for op in lazy_ops:
        assert f'"lazy.{op}"' in lazy, op
    # Every stage is a module; the lazy ops go away at lazy-to-stablehlo.
    for i, p in enumerate(passes, 1):
        text = read(f"{i:02d}-{p}.mlir")
        assert text.lstrip().startswith(("module", "#loc")), p
        converted = i >= passes.index("lazy-to-stablehlo") + 1
        assert ('"lazy.' in text) != converted, p
    hlo = read("stablehlo.mlir")
    assert '"lazy.' not in hlo
    for op in hlo_ops:
        assert f"stablehlo.{op}" in hlo, op
    assert hlo == read(f"{len(passes):02d}-{passes[-1]}.mlir")
    nodes, edges = check_dot(read("graph.dot"))
    labels = [a.get("label", "") for a in nodes.values()]
    for op in lazy_ops:
        assert any(lb.startswith(f"lazy.{op}\n") for lb in labels), op
    assert any(lb.startswith("output 0") for lb in labels)
    info = read("info.txt")
    assert os.path.basename(folder).split("-", 1)[1] in info  # the short key is the key's start
    return nodes, edges


def test_dump_dir_torch_program(tmp_path, clean_runtime):
    dev = ltorch.device()
    x = torch.randn(4, 5)
    w = torch.randn(5, 3)
    with override(dump_dir=str(tmp_path)):
        y = torch.relu(x.to(dev) @ w.to(dev)) * 0.5
        got = y.cpu()
    torch.testing.assert_close(got, torch.relu(x @ w) * 0.5)
    (folder,) = _folders(tmp_path)
    assert re.fullmatch(r"0001-[0-9a-f]{12}", folder)
    nodes, edges = _check_dump_folder(tmp_path / folder, ["dot_general", "select", "mul"], ["dot_general", "select"])
    labels = [a["label"] for a in nodes.values()]
    assert labels.count("device data\nf32[4,5]") == 1 and labels.count("device data\nf32[5,3]") == 1
    assert "scalar parameter\nf32 = 0.5" in labels
    # Ops name the user's line that recorded them.
    assert any(lb.endswith(f"\n{HERE}:{_line_of('y = torch.relu(x.to(dev) @ w.to(dev)) * 0.5')}") for lb in labels)


def _line_of(snippet):
    with open(__file__) as f:
        for i, line in enumerate(f, 1):
            if snippet in line and "_line_of" not in line:
                return i
    raise AssertionError(snippet)


def test_dump_dir_numpy_program(tmp_path, clean_runtime):
    u0 = np.random.default_rng(0).random((16, 16), dtype=np.float32)
    with override(dump_dir=str(tmp_path)):
        u = lnp.asarray(u0)
        for _ in range(3):
            lap = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * u[1:-1, 1:-1]
            u[1:-1, 1:-1] += 0.2 * lap
            lc.mark_step()
        got = np.asarray(u)
    ref = u0.copy()
    for _ in range(3):
        lap = ref[:-2, 1:-1] + ref[2:, 1:-1] + ref[1:-1, :-2] + ref[1:-1, 2:] - 4 * ref[1:-1, 1:-1]
        ref[1:-1, 1:-1] += np.float32(0.2) * lap
    np.testing.assert_allclose(got, ref, rtol=1e-5)
    folders = _folders(tmp_path)
    # One folder per compile, numbered in order; the repeated steps were cache hits.
    assert len(folders) == metrics.counters()["compiles"] >= 1
    assert [int(f.split("-")[0]) for f in folders] == list(range(1, len(folders) + 1))
    step = [f for f in folders if '"lazy.slice"' in open(tmp_path / f / "00-input.mlir").read()]
    assert step
    _check_dump_folder(tmp_path / step[0], ["slice", "add", "sub", "mul"], ["slice", "add", "subtract"])


def test_dump_numbering_continues_and_no_dump_when_off(tmp_path, clean_runtime):
    os.mkdir(tmp_path / "0007-earlier")
    dev = ltorch.device()
    x = torch.ones(3).to(dev)
    with override(dump_dir=str(tmp_path)):
        (x + 2).cpu()
        (x - 2).cpu()
    (x * 2).cpu()  # dumps off again
    assert [f.split("-")[0] for f in _folders(tmp_path)] == ["0007", "0008", "0009"]


# --- ir_text and to_dot of pending tensors ------------------------------------------


def _not_recordings(counters: dict) -> dict:
    return {k: v for k, v in counters.items() if k not in ("recordings", "recordings_loaded")}


def test_ir_text_and_to_dot_of_pending_torch_tensors(clean_runtime):
    dev = ltorch.device()
    x = torch.randn(2, 3).to(dev)
    y = torch.tanh(x) + x.sum(0)
    z = y.t()
    before = metrics.counters()
    text = inspect_graph.ir_text(z)
    for op in ("tanh", "column_sum", "add", "permute"):  # (torch's x.sum(0): eager's kernel's column sums)
        assert f'"lazy.{op}"' in text, op
    assert "-> tensor<3x2xf32>" in text
    nodes, edges = check_dot(inspect_graph.to_dot([y, z]))
    outs = [a["label"] for a in nodes.values() if a["label"].startswith("output")]
    assert outs == ["output 0", "output 1"]
    # nothing compiled, ran or moved; the view's read is recorded for replay
    # (trace/views.py, a trace-time memo the recordings counters count since 6cd3e07)
    assert _not_recordings(metrics.counters()) == _not_recordings(before)
    assert read(y).pending
    torch.testing.assert_close(z.cpu(), (torch.tanh(x.cpu()) + x.cpu().sum(0)).t())


def test_ir_text_and_to_dot_of_numpy_arrays_and_handles(clean_runtime):
    a = lnp.arange(12, dtype=lnp.float32).reshape(3, 4)
    b = lnp.exp(a[1:]) * 2.5
    text = inspect_graph.ir_text(b)
    assert '"lazy.exp"' in text and '"lazy.mul"' in text and '"lazy.slice"' in text
    nodes, _ = check_dot(inspect_graph.to_dot(b))
    assert "scalar parameter\nf32 = 2.5" in [n["label"] for n in nodes.values()]
    h = lc.apply("add", lc.from_numpy(np.ones(4, np.float32)), lc.from_numpy(np.ones(4, np.float32)))
    nodes, edges = check_dot(inspect_graph.to_dot(h))
    labels = sorted(n["label"] for n in nodes.values())
    assert labels.count("device data\nf32[4]") == 2 and len(edges) == 3  # two operands, one output
    assert '"lazy.add"(%arg0, %arg1)' in inspect_graph.ir_text([h])
    with pytest.raises(TypeError, match="lazycore handle"):
        inspect_graph.to_dot(np.ones(3))


def test_dot_escapes_quotes_and_backslashes():
    from lazycore.runtime.barrier import Walk

    h = lc.apply("add", lc.from_numpy(np.ones(2, np.float32)), lc.from_numpy(np.ones(2, np.float32)))
    text = inspect_graph.walk_to_dot(Walk([h.value]), name='we"ird\\name')
    _, name, _, _ = parse_dot(text)
    assert name == 'we"ird\\name'


# --- lazycore.testing ------------------------------------------------------------------


def test_capture_checks_pass_and_fail():
    dev = ltorch.device()
    x = torch.randn(3, 4)
    with lazycore.testing.capture() as cap:
        (x.to(dev) * 2.5).cpu()
    assert len(cap.graphs) == 1 and cap.graphs[0].complete
    cap.check("CHECK: lazy.mul", stage="lazy")
    cap.check("CHECK: stablehlo.multiply", stage="stablehlo")
    cap.check("CHECK-LABEL: func.func @main\nCHECK-NOT: stablehlo.\nCHECK: lazy.mul\nCHECK: return", stage="lazy")
    cap.check("CHECK: lazy.mul\nCHECK: stablehlo\nCHECK: stablehlo.multiply", stage="both")
    cap.check("CHECK: stablehlo.multiply\nCHECK-NOT: lazy.", stage="lazy-to-stablehlo")
    cap.check("CHECK: lazy.mul", stage="lazy-canonicalize")
    with pytest.raises(AssertionError, match=r"(?s)Couldn't match \"stablehlo.divide\".*checked text"):
        cap.check("CHECK: stablehlo.divide", stage="stablehlo")
    with pytest.raises(AssertionError, match="CHECK-NOT"):
        cap.check("CHECK-NOT: lazy.mul", stage="lazy")
    with pytest.raises(KeyError, match="no stage 'nope'"):
        cap.check("CHECK: x", stage="nope")


def test_capture_sees_programs_compiled_before_and_keeps_the_cache(clean_runtime):
    dev = ltorch.device()
    x = torch.randn(5)
    (x.to(dev) - 1.5).cpu()
    assert lc.cache.size() == 1
    with lazycore.testing.capture() as cap:
        (x.to(dev) - 1.5).cpu()  # a cache hit outside the block; compiled (and captured) inside
    cap.check("CHECK: lazy.sub")
    assert metrics.counters()["compiles"] == 2
    with lazycore.testing.capture() as cap:
        (x.to(dev) * 1.5).cpu()
    assert lc.cache.size() == 2  # the program from before the blocks and the new one
    hits = metrics.counters()["cache_hits"]
    (x.to(dev) - 1.5).cpu()
    (x.to(dev) * 1.5).cpu()
    assert metrics.counters()["cache_hits"] == hits + 2 and metrics.counters()["compiles"] == 3
    with lazycore.testing.capture(fresh_cache=False) as cap:
        (x.to(dev) - 1.5).cpu()
    with pytest.raises(AssertionError, match="no graph was compiled"):
        cap.check("CHECK: lazy.sub")


def test_check_function_numpy_snippet_and_locations():
    a0 = np.arange(6, dtype=np.float32)

    def snippet():
        np.asarray(lnp.asarray(a0)[::2] + 3.5)

    cap = lazycore.testing.check(snippet, "CHECK: lazy.slice\nCHECK: lazy.add", stage="lazy")
    cap.check("CHECK: stablehlo.slice\nCHECK: stablehlo.add", stage="stablehlo", graph=-1)
    cap = lazycore.testing.check(snippet, "CHECK: loc(", stage="lazy", locations=True)
    assert "loc(" not in lazycore.testing.check(snippet, "CHECK: lazy.add").text()


def test_used_by_the_project_relu_lowering():
    """How lowering authors use lazycore.testing: torch.relu lowers to a select of zero where x < 0
    (a maximum would turn -0.0 into 0.0; eager keeps x on a tie)."""
    dev = ltorch.device()
    x = torch.randn(2, 8)
    with lazycore.testing.capture() as cap:
        got = torch.relu(x.to(dev)).cpu()
    torch.testing.assert_close(got, torch.relu(x))
    cap.check(
        """
        CHECK-LABEL: func.func @main(%arg0: tensor<2x8xf32>)
        CHECK-DAG:   %[[ZERO:.+]] = "lazy.constant"() {value = dense<0.000000e+00> : tensor<f32>}
        CHECK-DAG:   %[[B:.+]] = "lazy.broadcast_in_dim"(%[[ZERO]])
        CHECK:       %[[NEG:.+]] = "lazy.compare"(%arg0, %[[B]]) {direction = "LT"}
        CHECK:       %[[R:.+]] = "lazy.select"(%[[NEG]], %[[B]], %arg0)
        CHECK:       return %[[R]]
        """,
        stage="lazy",
    )
    cap.check(
        """
        CHECK-LABEL: func.func @main
        CHECK:       %[[NEG:.+]] = stablehlo.compare LT, %arg0, %{{.+}}
        CHECK:       %[[R:.+]] = stablehlo.select %[[NEG]], %{{.+}}, %arg0 : tensor<2x8xi1>, tensor<2x8xf32>
        CHECK:       return %[[R]]
        """,
        stage="stablehlo",
    )


def test_dump_dir_from_environment(tmp_path):
    import sys

    code = (
        "import numpy as np, lazycore as lc\n"
        "a = lc.from_numpy(np.arange(4, dtype=np.float32))\n"
        "print(lc.to_numpy(lc.apply('mul', a, a)).tolist())\n"
    )
    env = dict(os.environ, LAZYCORE_DUMP_DIR=str(tmp_path / "dumps"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[0.0, 1.0, 4.0, 9.0]"
    (folder,) = _folders(tmp_path / "dumps")
    _check_dump_folder(tmp_path / "dumps" / folder, ["mul"], ["multiply"])
