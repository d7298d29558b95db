"""Main demo: a lazy-dialect program, compiled and executed, its IR shown at each stage.

It builds `y = tanh(x * w + b) * 1` with the dialect's Python builders, runs the
default pipeline (printing the module after every pass), compiles the StableHLO
with XLA through PJRT and checks the result against NumPy.
"""

import numpy as np

from lazycore import compiler
from lazycore.dialect import TensorType, create, tensor_type
from lazycore.mlir import func, ir, new_context


def build():
    ctx = new_context()
    with ctx, ir.Location.unknown():
        t = tensor_type(TensorType((4, 8), "f32"))
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):

            @func.FuncOp.from_py_func(t, t, t, name="main")
            def main(x, w, b):
                one = create("constant", value=np.ones((4, 8), np.float32)).result
                xw = create("mul", x, w).result
                y = create("tanh", create("add", xw, b).result).result
                return create("mul", y, one).result

    return module


def main():
    module = build()
    print("=== lazy dialect (as built)\n", module, sep="")

    def show(stage, op):
        print(f"=== after {stage}\n{op}")

    exe = compiler.compile_module(module, after_each=show)
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal((4, 8), dtype=np.float32) for _ in range(3))
    (y,) = exe.run_numpy([x, w, b])
    ref = np.tanh(x * w + b)
    print("=== result (first row)\n", y[0], sep="")
    print(f"max |lazycore - numpy| = {np.abs(y - ref).max():.2e}")
    assert np.allclose(y, ref, atol=1e-6)


if __name__ == "__main__":
    main()
