"""The eager debug mode for torch (lazycore.runtime.eager): while it is on,
``Tensor.__torch_dispatch__`` is wrapped so every aten op on lazy tensors
runs its results as a program of its own before it returns."""

from __future__ import annotations

from lazycore.ir import config
from lazycore.runtime import eager

from .tensor import Tensor

SWAPS = eager.Swaps(lambda: [(Tensor, "__torch_dispatch__")])
config.watch("eager", SWAPS)
