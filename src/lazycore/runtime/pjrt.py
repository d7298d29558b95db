"""XLA through PJRT (jaxlib): compile StableHLO artifacts and run them.

This is the only module that talks to jaxlib. What crosses over is bytes (a
StableHLO portable artifact) and device buffers, never an ``ir`` object:
jaxlib carries its own private MLIR build.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from typing import Sequence

import jax
import numpy as np
from jax._src import cache_key as _jax_cache_key
from jax._src.lib import xla_client as xc
from jaxlib.mlir._mlir_libs import _stablehlo as _jaxlib_stablehlo

from lazycore.dialect.types import TensorType, to_numpy_dtype, type_of


@functools.cache
def consumer_stablehlo_version() -> str:
    """The StableHLO version jaxlib reads: the target of serialization."""
    return _jaxlib_stablehlo.get_current_version()


def jaxlib_version() -> str:
    import jaxlib

    return jaxlib.__version__


def devices(platform: str | None = None) -> list:
    """PJRT devices jaxlib sees (CPU always; GPU/TPU when present)."""
    if platform is None:
        out = []
        for p in ("cpu", "gpu", "tpu"):
            try:
                out.extend(jax.devices(p))
            except RuntimeError:
                pass
        return out
    return list(jax.devices(platform))


@functools.cache
def default_device():
    return jax.devices("cpu")[0]


def memory_stats(device) -> dict:
    """The allocator's counters a PJRT device reports (bytes in use, peak,
    limit on GPUs and TPUs); empty where it reports none (the CPU)."""
    stats = device.memory_stats() if device is not None else None
    return dict(stats) if stats else {}


def to_device(array: np.ndarray, device=None):
    """Copy a host array to a device buffer, keeping 64-bit dtypes exact.

    Always a copy: on the CPU, ``device_put`` may wrap the host memory itself
    (jax 0.10.2 does so for float16 even with ``may_alias=False``), and the
    user's later in-place update of their array would reach the device value.
    The private copy made here is what the buffer may wrap."""
    with jax.enable_x64(True):
        return jax.device_put(np.array(array, copy=True), device or default_device())


def to_host(buffer) -> np.ndarray:
    return np.asarray(buffer)


def _result_handler(t: TensorType, device):
    from jax._src.core import ShapedArray
    from jax.sharding import SingleDeviceSharding

    aval = ShapedArray(tuple(t.shape), to_numpy_dtype(t.dtype))
    return xc.array_result_handler(aval, SingleDeviceSharding(device), committed=True, _skip_checks=True)


@dataclass
class Executable:
    """A compiled program: call it with device buffers, get device buffers."""

    loaded: object
    device: object
    input_types: tuple[TensorType, ...]
    output_types: tuple[TensorType, ...]

    def __post_init__(self):
        # jaxlib's own result handlers wrap the outputs as arrays in C++, a
        # few times faster per output than disassembling them in Python
        self._handlers = [_result_handler(t, self.device) for t in self.output_types]

    def __call__(self, buffers: Sequence) -> list:
        return self.launch(buffers)[0]

    def launch(self, buffers: Sequence) -> tuple[list, object]:
        """Start the program: its result buffers (filled asynchronously; reading
        one waits for it) and a handle whose ``block_until_ready()`` waits for
        the whole execution (results that get donated later cannot be waited
        on themselves)."""
        if len(buffers) != len(self.input_types):
            raise TypeError(f"executable takes {len(self.input_types)} inputs, got {len(buffers)}")
        res = self.loaded.execute_sharded(list(buffers), with_tokens=True)
        done = res.consume_token()
        return res.consume_with_handlers(self._handlers), done

    def run_numpy(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Convenience for tests and tools: host arrays in, host arrays out."""
        for i, (a, t) in enumerate(zip(arrays, self.input_types)):
            if type_of(np.asarray(a)) != t:
                raise TypeError(f"input {i}: expected {t}, got {type_of(np.asarray(a))}")
        outs = self([to_device(a, self.device) for a in arrays])
        return [to_host(o) for o in outs]


def _compile_options(device) -> xc.CompileOptions:
    options = xc.CompileOptions()
    # Without an explicit assignment XLA places the one replica on device 0 of
    # the client, and execution refuses buffers living on any other device.
    options.executable_build_options.device_assignment = xc.DeviceAssignment.create(np.array([[device.id]]))
    return options


def compile_artifact(
    artifact: bytes,
    input_types: Sequence[TensorType],
    output_types: Sequence[TensorType],
    device=None,
) -> Executable:
    device = device or default_device()
    loaded = device.client.compile_and_load(artifact, xc.DeviceList((device,)), _compile_options(device))
    return Executable(loaded, device, tuple(input_types), tuple(output_types))


# --- executables as bytes (the persistent compile cache) ------------------------------


@functools.cache
def fingerprint(device) -> bytes:
    """What on the XLA side decides the executable compiled for ``device``,
    as jax's persistent cache keys it (``jax._src.cache_key``, whose pieces are
    reused): jax, jaxlib and StableHLO versions, platform and its version, the
    XLA flags (``XLA_FLAGS``, ``--xla*`` arguments), the compile options, the
    accelerator topology (device kinds where there is none), plus the device
    count. Fixed for the process: XLA reads its flags once."""
    h = hashlib.blake2b(digest_size=16)
    h.update(repr((jax.__version__, jaxlib_version(), consumer_stablehlo_version())).encode())
    client = device.client
    _jax_cache_key._hash_platform(h, client)
    _jax_cache_key._hash_xla_flags(h, _jax_cache_key.get_flag_prefixes())
    # as jax does: a GPU executable is bound to its device when it is loaded
    _jax_cache_key._hash_serialized_compile_options(
        h, _compile_options(device), strip_device_assignment=client.platform == "gpu"
    )
    _jax_cache_key._hash_accelerator_config(h, np.array([device]))
    h.update(repr((device.platform, device.device_kind, len(client.devices()))).encode())
    return h.digest()


def serialize(exe: Executable) -> bytes:
    """The executable as bytes :func:`deserialize` loads in another process."""
    return exe.loaded.serialize()


def deserialize(
    blob: bytes, input_types: Sequence[TensorType], output_types: Sequence[TensorType], device=None
) -> Executable:
    """An executable from :func:`serialize`'s bytes, loaded onto ``device``.
    XLA checks little: bytes changed in the middle may load (callers check a digest)."""
    device = device or default_device()
    loaded = device.client.deserialize_executable(blob, xc.DeviceList((device,)), _compile_options(device))
    return Executable(loaded, device, tuple(input_types), tuple(output_types))
