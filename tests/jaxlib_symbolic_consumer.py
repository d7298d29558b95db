"""Run a program with symbolic dimensions that lazycore.export wrote, with jax alone
(tests/test_export_symbolic.py), as jax.export runs its own: the entry's
arguments get the concrete types, jax's ``refine_polymorphic_shapes``
(StableHLO's shape refinement) makes every shape static, jaxlib compiles it.

    python tests/jaxlib_symbolic_consumer.py FOLDER

FOLDER holds ``artifact.mlirbc``, ``convention.json``
(``Exported.calling_convention()``) and, per run, ``run<k>/arg<i>.npy``; the
results are written as ``run<k>/result<j>.npy``. This process never imports
lazycore.
"""

import json
import sys
from pathlib import Path

sys.modules["lazycore"] = None  # any import of lazycore here fails

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax._src.interpreters import mlir as jax_mlir  # noqa: E402
from jax._src.lib import xla_client as xc  # noqa: E402
from jax._src.lib.mlir import ir  # noqa: E402
from jaxlib.mlir._mlir_libs import _stablehlo  # noqa: E402


def refined(artifact: bytes, shapes, dtypes) -> bytes:
    """The artifact's program at argument ``shapes``: static, as bytecode."""
    context = jax_mlir.make_ir_context()
    module = _stablehlo.deserialize_portable_artifact(context, artifact)
    with context, ir.Location.unknown():
        main = next(op for op in module.body.operations if ir.StringAttr(op.attributes["sym_name"]).value == "main")
        block = main.regions[0].blocks[0]
        types = [ir.RankedTensorType.get(list(s), jax_mlir.dtype_to_ir_type(np.dtype(d))) for s, d in zip(shapes, dtypes)]
        for arg, t in zip(block.arguments, types):
            arg.set_type(t)
        results = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value).results
        main.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(types, results))
        return jax_mlir.module_to_bytecode(jax_mlir.refine_polymorphic_shapes(module))


def sizes_of(convention, shapes) -> dict[str, int]:
    sizes = {}
    for spec, shape in zip(convention["args"], shapes):
        for want, n in zip(spec["shape"], shape):
            if isinstance(want, str):
                assert sizes.setdefault(want, n) == n, (want, sizes[want], n)
            else:
                assert want == n, (spec, shape)
    return sizes


def main(folder: Path) -> None:
    convention = json.loads((folder / "convention.json").read_text())
    artifact = (folder / "artifact.mlirbc").read_bytes()
    device = jax.devices(convention["platform"])[0]
    options = xc.CompileOptions()
    options.executable_build_options.device_assignment = xc.DeviceAssignment.create(np.array([[device.id]]))
    runs = sorted(folder.glob("run*"))
    for run in runs:
        hosts = [np.load(run / f"arg{spec['index']}.npy") for spec in convention["args"]]
        sizes = sizes_of(convention, [h.shape for h in hosts])
        program = refined(artifact, [h.shape for h in hosts], [spec["dtype"] for spec in convention["args"]])
        executable = device.client.compile_and_load(program, xc.DeviceList((device,)), options)
        with jax.enable_x64(True):
            args = [jax.device_put(h, device) for h in hosts]
        results = executable.execute_sharded(args).disassemble_into_single_device_arrays()
        for spec, (value,) in zip(convention["results"], results):
            host = np.asarray(value)
            # a symbolic result dimension is an expression of the symbols ("b*s", "n - 1")
            want = [d if isinstance(d, int) else eval(d, {}, dict(sizes)) for d in spec["shape"]]
            assert host.dtype.name == spec["dtype"] and list(host.shape) == want, (spec, sizes, host.shape)
            np.save(run / f"result{spec['index']}.npy", host)
    assert not [m for m, v in sys.modules.items() if m.startswith("lazycore") and v is not None]
    print("ran", len(runs), "sizes")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
