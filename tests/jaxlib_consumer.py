"""Run a program lazycore.export wrote, with jaxlib alone (tests/test_export.py).

    python tests/jaxlib_consumer.py FOLDER [PLATFORM]

FOLDER holds ``artifact.mlirbc`` (the StableHLO portable artifact),
``convention.json`` (``Exported.calling_convention()``) and ``arg<i>.npy``;
the results are written as ``result<j>.npy``. PLATFORM (``cpu``, ``gpu``)
overrides the one the artifact was exported on (scripts/gpu_check.py runs a
CPU machine's exports on a GPU this way). This process must never import
lazycore: it is the consumer of an artifact made elsewhere. Donated
arguments are checked to be consumed (the program reused their buffers).
"""

import json
import sys
from pathlib import Path

sys.modules["lazycore"] = None  # any import of lazycore here fails

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax._src.lib import xla_client as xc  # noqa: E402


def load(folder: Path, platform: str | None = None) -> tuple:
    """``(convention, executable, arguments)``: the artifact in ``folder``
    compiled by XLA for the first device of ``platform`` (default: the
    exporter's), and its arguments on that device."""
    convention = json.loads((folder / "convention.json").read_text())
    artifact = (folder / "artifact.mlirbc").read_bytes()
    device = jax.devices(platform or convention["platform"])[0]
    options = xc.CompileOptions()
    options.executable_build_options.device_assignment = xc.DeviceAssignment.create(np.array([[device.id]]))
    executable = device.client.compile_and_load(artifact, xc.DeviceList((device,)), options)

    args = []
    with jax.enable_x64(True):  # 64-bit arguments stay 64-bit
        for spec in convention["args"]:
            host = np.load(folder / f"arg{spec['index']}.npy")
            assert host.dtype.name == spec["dtype"] and list(host.shape) == spec["shape"], (spec, host.dtype, host.shape)
            args.append(jax.device_put(host, device))
    return convention, executable, args


def main(folder: Path, platform: str | None = None) -> None:
    convention, executable, args = load(folder, platform)
    results = executable.execute_sharded(args).disassemble_into_single_device_arrays()
    assert len(results) == len(convention["results"])
    for spec, (value,) in zip(convention["results"], results):
        host = np.asarray(value)
        assert host.dtype.name == spec["dtype"] and list(host.shape) == spec["shape"], (spec, host.dtype, host.shape)
        np.save(folder / f"result{spec['index']}.npy", host)
    for spec, arg in zip(convention["args"], args):
        assert arg.is_deleted() == (spec["donated_to"] is not None), spec
    assert not [m for m, v in sys.modules.items() if m.startswith("lazycore") and v is not None]
    print("ran", len(results), "results")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else None)
