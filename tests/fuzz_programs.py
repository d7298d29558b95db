"""Seeded random straight-line array programs, run on eager and on lazycore side by side.

A program is a list of statements over a pool of named arrays: elementwise
ops, reductions, views (and writes through them), in-place updates, matmuls,
concatenation, gathers, barriers. The same statement runs on the reference
(eager torch on the CPU, or NumPy) and on lazycore; after every statement the
two must agree on whether it raised and with what exception type, and (at
the checkpoints the program chooses, and at the end) on every array's dtype,
shape and values. A statement that raised changed nothing on either side.

``python -m tests.fuzz_programs torch 2000`` (or ``numpy``) runs a large
budget by hand and prints the figures; the test suite runs a small one.
"""

from __future__ import annotations

import random
import sys
import traceback

import numpy as np

FLOATS = ("float32",)
INTS = ("int64", "int32")


class Program:
    """One random program: ``statements`` are ``(text, fn)`` with ``fn(xp, env)``."""

    def __init__(self, seed: int, length: int = 24):
        self.rng = random.Random(seed)
        self.seed = seed
        self.length = length

    def shapes(self):
        r = self.rng
        return r.choice([(3,), (2, 3), (4, 1), (1, 3), (2, 3, 2), (3, 3), ()])

    def statements(self):
        """A list of (text, kind, args); executed by a frontend adapter."""
        r = self.rng
        names = []
        out = []
        for i in range(3):
            dtype = r.choice(FLOATS + INTS)
            shape = r.choice([(2, 3), (3, 3), (3,), (2, 3, 2)])
            values = np.array([r.randint(-4, 5) for _ in range(int(np.prod(shape)))], dtype=dtype).reshape(shape)
            if dtype in FLOATS:
                values = values + np.array([r.choice([0.0, 0.25, 0.5, -0.75]) for _ in range(values.size)],
                                           dtype=dtype).reshape(shape)
            name = f"a{i}"
            names.append(name)
            out.append((f"{name} = array({values.tolist()}, {dtype})", "make", (name, values)))
        for k in range(self.length):
            choice = r.random()
            a = r.choice(names)
            b = r.choice(names)
            new = f"v{k}"
            if choice < 0.25:
                op = r.choice(["add", "sub", "mul", "div", "maximum", "minimum", "floor_divide", "remainder",
                               "less", "equal", "where"])
                out.append((f"{new} = {op}({a}, {b})", "binary", (new, op, a, b)))
            elif choice < 0.40:
                op = r.choice(["neg", "abs", "exp", "sin", "tanh", "sqrt", "log", "sign", "floor", "square"])
                out.append((f"{new} = {op}({a})", "unary", (new, op, a)))
            elif choice < 0.50:
                op = r.choice(["sum", "max", "mean", "cumsum", "argmax"])
                axis = r.choice([None, 0, -1])
                out.append((f"{new} = {op}({a}, axis={axis})", "reduce", (new, op, a, axis)))
            elif choice < 0.62:
                view = r.choice(["T", "reshape", "slice", "index0", "expand", "unsqueeze"])
                out.append((f"{new} = {a}.{view}", "view", (new, view, a)))
            elif choice < 0.80:
                op = r.choice(["add_", "mul_", "fill_slice", "setitem0", "copy_slice"])
                scalar = r.choice([2, -1, 0.5, 3])
                out.append((f"{a}.{op}({b}, {scalar})", "inplace", (op, a, b, scalar)))
            elif choice < 0.86:
                out.append((f"{new} = matmul({a}, {b})", "matmul", (new, a, b)))
            elif choice < 0.91:
                out.append((f"{new} = concatenate([{a}, {b}])", "concat", (new, a, b)))
            elif choice < 0.95:
                out.append((f"{new} = take({a}, [..])", "take", (new, a, r.randint(0, 5))))
            else:
                out.append(("barrier", "barrier", ()))
                continue
            if out[-1][1] != "inplace":
                names.append(new)
        return out


class Mismatch(AssertionError):
    pass


def run(seed: int, ref, lazy, length: int = 24) -> str:
    """Run program ``seed`` on both adapters; returns "ok", or raises Mismatch
    describing the first disagreement."""
    program = Program(seed, length)
    env_r, env_l = {}, {}
    log = []
    for text, kind, args in program.statements():
        log.append(text)
        err_r = err_l = None
        try:
            ref.execute(env_r, kind, args)
        except Exception as e:  # noqa: BLE001  (any eager error is a valid outcome to match)
            err_r = e
        try:
            lazy.execute(env_l, kind, args)
            if err_r is not None:
                lazy.sync(env_l)  # an error only values show is raised at the barrier
        except Exception as e:  # noqa: BLE001
            err_l = e
        if (err_r is None) != (err_l is None) or (err_r is not None and not isinstance(err_l, type(err_r))):
            raise Mismatch(f"seed {seed}: `{text}`: eager raised {err_r!r}, lazycore raised {err_l!r}\n"
                           + "\n".join(log) + ("\n" + "".join(traceback.format_exception(err_l)) if err_l else ""))
        if err_r is not None:
            for k in list(env_l):
                if k not in env_r:  # what the failed statement would have named
                    del env_l[k]
            _compare(seed, log, ref, lazy, env_r, env_l, only=list(env_r))  # and nothing else changed
    _compare(seed, log, ref, lazy, env_r, env_l, only=list(env_r))
    return "ok"


def _compare(seed, log, ref, lazy, env_r, env_l, only):
    for k in only:
        want = ref.numpy(env_r[k])
        got = lazy.numpy(env_l[k])
        where = f"seed {seed}: array {k} after\n" + "\n".join(log)
        if want.dtype != got.dtype or want.shape != got.shape:
            raise Mismatch(f"{where}\n: dtype/shape {got.dtype}{got.shape} vs eager {want.dtype}{want.shape}")
        if want.dtype.kind == "f":
            ok = np.allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True)
        else:
            ok = np.array_equal(got, want)
        if not ok:
            raise Mismatch(f"{where}\n: values\n{got}\nvs eager\n{want}")


def main(argv) -> int:
    frontend, budget = argv[0], int(argv[1]) if len(argv) > 1 else 500
    from tests import fuzz_adapters

    ref, lazy = fuzz_adapters.pair(frontend)
    failures = []
    for seed in range(budget):
        try:
            run(seed, ref, lazy)
        except Mismatch as e:
            failures.append(str(e).splitlines()[0])
    print(f"{frontend}: {budget - len(failures)} of {budget} programs behave exactly as eager")
    for f in failures[:40]:
        print("  ", f)
    return 0 if not failures else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
