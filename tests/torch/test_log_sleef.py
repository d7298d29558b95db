"""SLEEF's float32 log (``logf_u10``) as one node: ``lazy.log_sleef``.

Eager's float32 ``log_softmax`` last-dim kernel (every ``F.cross_entropy``) takes
its log from SLEEF (``Vectorized<float>::log``, ``Sleef_logf16_u10`` on
AVX-512). The torch frontend recorded its steps as ~109 graph nodes; now one
node, whose fold (dialect/log_f32.py) and lowering build the same steps.
``torch.log`` itself is another function: MKL VML's ``vsLn`` (ATen's vml.h;
``vmsLn`` with VML_HA gives eager's bits, 0 of 999,998 off), which is not
modelled here (SLEEF's log is 16,771 of 1,050,032 values off it)."""

import ctypes
import glob
import os
import shutil
import subprocess

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import lazycore
from lazycore.dialect import folds, log_f32
from lazycore.observe import metrics
from lazycore.runtime import compiler

_SPECIAL = np.float32([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, -np.nan, 3.4028235e38, 2.6e38, 2.55e38,
                       1.3e38, 1e-45, -1e-45, 1.1754942e-38, 1.1754944e-38, 0.75, 1.5, 0.7499999, 1.4999999,
                       1.5000001, 2.0, 10.0, 128.0, 1e30, 1e-30, 3.0, 1000.0, 50257.0])


def _values(n=1_000_000, seed=0):
    """Every class of bits (negatives, NaNs, infinities, subnormals, huge), sums
    of exps' range, logs of normals, subnormals, the reduction's edges, specials:
    a multiple of 16 values (one AVX-512 vector)."""
    g = np.random.default_rng(seed)
    parts = [g.integers(-2**31, 2**31, 4 * n // 10, dtype=np.int64).astype(np.int32).view(np.float32),
             g.uniform(0.5, 3000, 3 * n // 10).astype(np.float32),
             np.exp(g.normal(0, 20, 2 * n // 10)).astype(np.float32),
             g.uniform(0, 2.0**-126, n // 20).astype(np.float32),
             g.uniform(0.7, 1.6, n // 10).astype(np.float32),
             _SPECIAL]
    x = np.concatenate(parts)
    return np.concatenate([x, np.ones(-len(x) % 16, np.float32)])


def _off(got, want) -> int:
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    return int((~((got.view(np.int32) == want.view(np.int32)) | (np.isnan(got) & np.isnan(want)))).sum())


def _run(x, dtype="f32"):
    t = f"tensor<{len(x)}x{dtype}>"
    text = (f'func.func @main(%a: {t}) -> {t} {{\n  %r = "lazy.log_sleef"(%a) : ({t}) -> {t}\n'
            f"  return %r : {t}\n}}")
    (got,) = compiler.run_module(text, [x])
    return got


_SHIM = r"""
#include <immintrin.h>
#include <dlfcn.h>
#include <stdio.h>
typedef __m512 (*fn)(__m512);
int main(int argc, char **argv) {
  void *h = dlopen(argv[1], RTLD_LAZY);
  fn f = h ? (fn)dlsym(h, "Sleef_logf16_u10") : 0;
  if (!f) return 2;
  FILE *in = fopen(argv[2], "rb"), *out = fopen(argv[3], "wb");
  float buf[16];
  while (fread(buf, 4, 16, in) == 16) { _mm512_storeu_ps(buf, f(_mm512_loadu_ps(buf))); fwrite(buf, 4, 16, out); }
  fclose(out);
  return 0;
}
"""


@pytest.fixture(scope="module")
def sleef(tmp_path_factory):
    """``Sleef_logf16_u10`` (libtorch_cpu's, eager's) on :func:`_values`, through a
    small C program (it takes and returns a ``__m512``, which ctypes cannot)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    libs = glob.glob(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
    flags = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
    if not cc or not libs or " avx512f" not in flags:
        pytest.skip("needs a C compiler, libtorch_cpu.so and AVX-512F")
    d = tmp_path_factory.mktemp("sleef")
    (d / "shim.c").write_text(_SHIM)
    if subprocess.run([cc, "-O1", "-mavx512f", "-o", str(d / "shim"), str(d / "shim.c"), "-ldl"]).returncode:
        pytest.skip("the shim did not compile")
    x = _values()
    x.tofile(d / "in.bin")
    if subprocess.run([str(d / "shim"), libs[0], str(d / "in.bin"), str(d / "out.bin")]).returncode:
        pytest.skip("libtorch_cpu.so has no Sleef_logf16_u10")
    return x, np.fromfile(d / "out.bin", np.float32)


def test_fold_is_sleefs_logf16_u10(sleef):
    """The fold's steps give SLEEF's bits over 1M values, subnormals, huge, negatives, NaN, +-0 and +-inf included."""
    x, want = sleef
    assert len(x) >= 1_000_000
    assert _off(log_f32.log(x), want) == 0


def test_lowering_is_sleefs_logf16_u10(sleef):
    """And the lowering's: subnormal operands too (read from the bits: XLA's CPU loops see them as zero)."""
    x, want = sleef
    assert _off(_run(x), want) == 0


def test_fold_is_eagers_log_softmax_log():
    """Without a compiler: eager's ``log_softmax`` of a row of ``k`` zeros (the rest ``-inf``) is ``-log(k)``, its
    SLEEF log of the exact sum ``k``, k = 1 .. 3000 (the reduction's every exponent and mantissa path there)."""
    n = 3000
    k = np.arange(1, n + 1)
    row = torch.where(torch.arange(n)[None, :] < torch.from_numpy(k)[:, None], 0.0, float("-inf"))
    eager = torch.log_softmax(row.float(), dim=1)[:, 0].numpy()
    assert _off(np.float32(0) - folds.log_sleef(k.astype(np.float32)), eager) == 0


def test_lowering_is_the_fold_bitwise():
    x = _values(200_000, seed=1)
    assert _off(_run(x), folds.log_sleef(x)) == 0


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_narrower_floats_in_float32(dtype):
    """float16 and bfloat16 compute in float32 and are rounded once (the fold and the lowering alike)."""
    np_dtype = {"f16": np.float16, "bf16": __import__("ml_dtypes").bfloat16}[dtype]
    x = _values(20_000, seed=2)
    with np.errstate(all="ignore"):
        x = x[np.isfinite(x.astype(np_dtype)) | np.isnan(x) | np.isinf(x)].astype(np_dtype)
        want = log_f32.log(x.astype(np.float32)).astype(np_dtype)
    assert _off(_run(x, dtype).astype(np.float32), want.astype(np.float32)) == 0
    assert _off(folds.log_sleef(x).astype(np.float32), want.astype(np.float32)) == 0


def test_float64_is_log():
    """float64 has no SLEEF steps here: XLA's log, NumPy's in the fold (within an ulp of each other)."""
    x = np.abs(np.random.default_rng(3).normal(0, 100, 4096))
    np.testing.assert_allclose(_run(x, "f64"), folds.log_sleef(x), rtol=4e-16)


def test_cross_entropy_records_one_log(dev):
    """F.cross_entropy 128x10, forward and backward: one lazy.log_sleef where SLEEF's
    steps were ~109 nodes (216 nodes at the barrier before, 107 with the op)."""
    torch.manual_seed(0)
    x = torch.randn(128, 10).to(dev).requires_grad_()
    target = torch.randint(0, 10, (128,)).to(dev)
    lazycore.mark_step()
    metrics.reset()

    def step():
        F.cross_entropy(x, target).backward()
        lazycore.mark_step()

    cap = lazycore.testing.check(step, "CHECK: lazy.log_sleef\nCHECK-NOT: lazy.log_sleef", stage="lazy")
    steps = [line for line in cap.text("lazy").splitlines()
             if '"lazy.log"' in line or ('"lazy.bitcast_convert"' in line and "f32>" in line)]
    assert not steps, steps  # (SLEEF's steps took the float32 bits apart)
    barriers, nodes, _ = metrics._graph_totals
    assert barriers == 1 and nodes <= 120, nodes


def test_cross_entropy_bits_unchanged(dev, no_fallback):
    """The loss and the gradient stay eager's bits (test_cross_entropy_bits has the rest)."""
    g = torch.Generator().manual_seed(1)
    for n, c in ((128, 10), (7, 1000), (3, 50257)):
        x = torch.randn(n, c, generator=g) * 4
        t = torch.randint(0, c, (n,), generator=g)
        out = []
        for d in ("cpu", dev):
            v = x.to(d).detach().requires_grad_()
            loss = F.cross_entropy(v, t.to(d))
            loss.backward()
            out.append((loss.detach().cpu(), v.grad.cpu()))
        assert torch.equal(out[0][0], out[1][0]) and torch.equal(out[0][1], out[1][1]), (n, c)


def test_torch_log_is_not_sleefs():
    """What eager's float32 ``torch.log`` is: MKL VML's ``vsLn`` (HA), not SLEEF's log (so not routed to it)."""
    lib = glob.glob(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
    vms_ln = getattr(ctypes.CDLL(lib[0]), "VMSLN_", None) if lib else None
    if vms_ln is None:
        pytest.skip("no MKL VML in this libtorch_cpu")
    x = _values(100_000, seed=4)
    x = x[(x > 0) & np.isfinite(x) & (x >= np.float32(2.0**-126))]
    eager = torch.log(torch.from_numpy(x)).numpy()
    out = np.empty_like(x)
    n, mode = ctypes.c_int(len(x)), ctypes.c_longlong(2)  # VML_HA
    vms_ln(ctypes.byref(n), x.ctypes.data_as(ctypes.c_void_p), out.ctypes.data_as(ctypes.c_void_p), ctypes.byref(mode))
    assert _off(out, eager) == 0
    assert _off(log_f32.log(x), eager) > 0
