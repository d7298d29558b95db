"""Main demo: a lazy-dialect program compiled and executed, its IR shown at each stage.

The program is the forward pass of a small MLP with a softmax head,
``softmax(relu(x @ w1 + b1) @ w2 + b2)``, built with the dialect's Python
builders (``lazycore.dialect.create``: result types come from each op's
shape rule). It then runs the default pipeline, printing the module after
every pass, compiles the StableHLO with XLA through PJRT on the CPU, and
checks the numbers against NumPy.
"""

import numpy as np

from lazycore.runtime import compiler
from lazycore.dialect import TensorType, create, from_mlir_type, tensor_type
from lazycore.dialect.mlir import func, ir
from lazycore.dialect.build import new_context

BATCH, IN, HIDDEN, OUT = 4, 8, 16, 3


def splat(value, like):
    t = from_mlir_type(like.type)
    return create("constant", value=np.full(t.shape, value, dtype=np.float32)).result


def bias_add(x, b):
    t = from_mlir_type(x.type)
    return create("add", x, create("broadcast_in_dim", b, dims=(1,), shape=t.shape).result).result


def matmul(a, b):
    return create("dot_general", a, b, lhs_batch=(), rhs_batch=(), lhs_contract=(1,), rhs_contract=(0,)).result


def softmax(x):
    t = from_mlir_type(x.type)
    m = create("broadcast_in_dim", create("reduce_max", x, dims=(1,)).result, dims=(0,), shape=t.shape).result
    e = create("exp", create("sub", x, m).result).result
    s = create("broadcast_in_dim", create("reduce_sum", e, dims=(1,)).result, dims=(0,), shape=t.shape).result
    return create("div", e, s).result


def build() -> ir.Module:
    f32 = lambda *shape: tensor_type(TensorType(shape, "f32"))  # noqa: E731
    with new_context(), ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):

            @func.FuncOp.from_py_func(f32(BATCH, IN), f32(IN, HIDDEN), f32(HIDDEN), f32(HIDDEN, OUT), f32(OUT), name="main")
            def main(x, w1, b1, w2, b2):
                h = bias_add(matmul(x, w1), b1)
                h = create("maximum", h, splat(0.0, h)).result  # relu
                h = create("mul", h, splat(1.0, h)).result  # x * 1: lazy-canonicalize removes it
                return softmax(bias_add(matmul(h, w2), b2))

    return module


def reference(x, w1, b1, w2, b2):
    h = np.maximum(x @ w1 + b1, 0)
    z = h @ w2 + b2
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def main():
    module = build()
    print("=== lazy dialect, as built\n", module, sep="")
    exe = compiler.compile_module(module, after_each=lambda stage, op: print(f"=== after {stage}\n{op}"))

    rng = np.random.default_rng(0)
    shapes = [(BATCH, IN), (IN, HIDDEN), (HIDDEN,), (HIDDEN, OUT), (OUT,)]
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    (probs,) = exe.run_numpy(args)
    ref = reference(*args)
    print("=== result: class probabilities per row (XLA via PJRT, CPU)")
    print(np.array2string(probs, precision=4))
    print(f"max |lazycore - numpy| = {np.abs(probs - ref).max():.2e}")
    assert np.allclose(probs, ref, atol=1e-5), "demo result differs from NumPy"


if __name__ == "__main__":
    main()
