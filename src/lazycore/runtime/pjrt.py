"""XLA through PJRT (jaxlib): compile StableHLO artifacts and run them.

This is the only module that talks to jaxlib. What crosses over is bytes (a
StableHLO portable artifact) and device buffers, never an ``ir`` object:
jaxlib carries its own private MLIR build.
"""

from __future__ import annotations

import atexit
import collections
import functools
import hashlib
import itertools
import os
from dataclasses import dataclass
from typing import NamedTuple, Sequence

import jax
import numpy as np
from jax._src import cache_key as _jax_cache_key
from jax._src.core import ShapedArray
from jax._src.dtypes import float0 as _FLOAT0
from jax._src.lib import xla_client as xc
from jax.sharding import SingleDeviceSharding
from jaxlib.mlir._mlir_libs import _stablehlo as _jaxlib_stablehlo

from lazycore.dialect.types import TensorType, to_numpy_dtype, type_of
from lazycore.ir.memo import Memo
from lazycore.runtime import hostmem, nativeout, peers


@functools.cache
def consumer_stablehlo_version() -> str:
    """The StableHLO version jaxlib reads: the target of serialization."""
    return _jaxlib_stablehlo.get_current_version()


def jaxlib_version() -> str:
    import jaxlib

    return jaxlib.__version__


def devices(platform: str | None = None) -> list:
    """PJRT devices this process drives (CPU always; GPU/TPU when present).
    With several processes (:mod:`lazycore.runtime.distributed`), only this
    process's own: a value of a single device lives here."""
    return _devices(jax.local_devices, platform)


def global_devices(platform: str | None = None) -> list:
    """The devices of every process (:func:`devices` in a single process): what a mesh spans."""
    return _devices(jax.devices, platform)


def _devices(which, platform):
    hostmem.keep_freed_buffers()  # before the first program allocates
    if platform is None:
        out = []
        for p in ("cpu", "gpu", "tpu"):
            try:
                out.extend(which(backend=p))
            except RuntimeError:
                pass
        return out
    return list(which(backend=platform))


@functools.cache
def default_device():
    hostmem.keep_freed_buffers()
    return jax.local_devices(backend="cpu")[0]


def process_index() -> int:
    return jax.process_index()


def process_count() -> int:
    return jax.process_count()


def backends_started() -> bool:
    """Whether jax made its clients already (after that, no process group can be joined)."""
    from jax._src import xla_bridge

    return xla_bridge.backends_are_initialized()


def join_processes(coordinator_address: str, num_processes: int, process_id: int, local_device_ids,
                   initialization_timeout: int, heartbeat_timeout: int) -> None:
    """Join a group of processes through jax.distributed's coordination service;
    CPU collectives between processes go through gloo."""
    import os

    from jax._src import distributed

    from lazycore.runtime import coordinator

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    service = None
    make_service = distributed._jax.get_distributed_runtime_service
    if process_id == 0:
        # the service in a process of its own, so that process 0 dying does not take it away (the
        # others' jax clients would abort): jax's initialize gets it instead of starting one here
        bind = os.environ.get("JAX_COORDINATOR_BIND_ADDRESS", "[::]:" + coordinator_address.rsplit(":", 1)[1])
        service = coordinator.Remote(coordinator.start(bind, num_processes, heartbeat_timeout, 300))
        distributed._jax.get_distributed_runtime_service = lambda *args, **kwargs: service
    try:
        jax.distributed.initialize(
            coordinator_address, num_processes, process_id, local_device_ids,
            initialization_timeout=initialization_timeout, heartbeat_timeout_seconds=heartbeat_timeout,
        )
    except BaseException:
        if service is not None:
            service.shutdown()
        raise
    finally:
        distributed._jax.get_distributed_runtime_service = make_service
    # a connection of lazycore's own to every other process: a dead one is named at once, and the
    # survivors exit without jax's fatal shutdown (lazycore.runtime.peers)
    peers.start(distributed.global_state.client, process_id, num_processes, coordinator_address,
                initialization_timeout, heartbeat_timeout, service)


def memory_stats(device) -> dict:
    """The allocator's counters a PJRT device reports (bytes in use, peak,
    limit on GPUs and TPUs); empty where it reports none (the CPU) and for
    another process's device (a mesh over processes: its allocator is that
    process's to report, and PJRT refuses to ask it)."""
    if device is None or device.process_index != jax.process_index():
        return {}
    stats = device.memory_stats()
    return dict(stats) if stats else {}


def memory_info(device) -> tuple[int, int]:
    """``(free, total)`` bytes of the memory a PJRT device's buffers come
    from: its allocator's limit and what is left of it where it reports them
    (GPUs, TPUs); on the CPU, whose buffers are this process's ``malloc``,
    the host's available and total RAM (as ``/proc/meminfo`` says them)."""
    stats = memory_stats(device)
    if "bytes_limit" in stats:
        limit = int(stats["bytes_limit"])
        return limit - int(stats.get("bytes_in_use", 0)), limit
    return _host_memory()


def _host_memory() -> tuple[int, int]:
    try:
        with open("/proc/meminfo") as f:
            info = {k: int(v.split()[0]) * 1024 for k, v in (line.split(":", 1) for line in f if ":" in line)}
        return info["MemAvailable"], info["MemTotal"]
    except (OSError, KeyError, ValueError):
        import os

        page = os.sysconf("SC_PAGE_SIZE")
        return os.sysconf("SC_AVPHYS_PAGES") * page, os.sysconf("SC_PHYS_PAGES") * page


class Launches:
    """Which executable each device (a PJRT device or a :class:`MeshTarget`)
    started last, with its argument buffers, until the memory account of
    the barrier that started it takes them (:mod:`lazycore.observe.memory`;
    a program run outside a barrier keeps them until the device's next
    barrier begins);
    and, while a kernel profile records (:class:`KernelSession`), every launch
    in order, to tell whose kernels the profiler saw; and the completion
    tokens of each device's latest :data:`RUNNING_KEPT` launches, which the
    process waits for at exit (:func:`wait_at_exit`). Two dict look-ups and a
    bounded append per launch."""

    def __init__(self):
        self.last: dict = {}
        self.log: list | None = None
        self.running: dict = {}
        """Per device, a deque of its latest launches' ``done`` tokens (bounded:
        a program older than that many launches on its device is finished in
        every loop lazycore runs, whose steps read the previous step's results)."""


LAUNCHES = Launches()

RUNNING_KEPT = 8


def wait_at_exit() -> None:
    """Wait for every program still running on XLA's CPU threads before the
    interpreter and the native libraries are torn down (jax waits for its own
    runtime tokens at exit the same way; it knows nothing of lazycore's
    launches). A loop that ends without reading its last step (a training loop
    ended by an exception after ``mark_step()``) leaves that step's program
    running, and the process's teardown then runs beside it: two replay-on
    MaxViT-T runs ended so died at exit with an XLA worker thread jumping into
    unmapped code (``tf_XLAEigen ... segfault at X ip X error 14``, issue 40;
    not reproduced on demand). Registered at
    import, after jax's exit handlers, so it runs before them. Programs over
    several processes are not recorded (a collective waiting for a dead
    process would never end; :mod:`lazycore.runtime.peers` ends those)."""
    running, LAUNCHES.running = LAUNCHES.running, {}
    for tokens in running.values():
        for done in tokens:
            try:
                done.block_until_ready()
            except Exception:  # noqa: BLE001 - a failed run is over too; its reader was told
                pass


atexit.register(wait_at_exit)
# a forked child has none of its parent's XLA threads: waiting for their tokens would never end
os.register_at_fork(after_in_child=lambda: LAUNCHES.running.clear())

_numbers = itertools.count(1)


class KernelEvent(NamedTuple):
    """One kernel XLA ran, as its profiler saw it."""

    module: str
    """The HLO module's name (``main`` for lazycore's programs)."""
    name: str
    """The instruction of the optimized HLO it ran (a fusion, a custom call, a copy)."""
    run: int
    """The execution it belongs to (PJRT's run id)."""
    device: int
    """The device's ordinal on its host."""
    start: float
    """When it began, ``time.perf_counter()`` seconds."""
    duration: float
    """Seconds."""


class KernelSession:
    """XLA's profiler (through jaxlib, as ``jax.profiler.trace``), recording
    the kernels programs run; :meth:`stop` gives them with the executables
    launched meanwhile, in launch order. One at a time per process, and not
    inside a ``jax.profiler`` trace (XLA has one profiler)."""

    def __init__(self):
        import time

        from jax._src import profiler

        state = profiler._profile_state
        with state.lock:
            if state.profile_session is not None:
                raise RuntimeError("a jax.profiler trace is running: XLA records one profile at a time")
        if LAUNCHES.log is not None:
            raise RuntimeError("a kernel profile is already recording (lazycore.profile.kernels() or trace(..., kernels=True)): "
                               "XLA records one profile at a time")
        options = profiler._profiler.ProfileOptions()
        options.python_tracer_level = 0  # the kernels, not every Python call
        # perf_counter seconds = (the profiler's epoch nanoseconds - offset) / 1e9
        self._offset = time.time_ns() - time.perf_counter_ns()
        self._session = profiler._profiler.ProfilerSession(options)
        self.launches: list = []
        LAUNCHES.log = self.launches

    def stop(self) -> tuple[list[KernelEvent], list]:
        """The kernels seen, oldest first, and each launch (``(executable, device)``), in order."""
        if LAUNCHES.log is self.launches:
            LAUNCHES.log = None
        data = self._session.stop_and_get_profile_data()
        start = 0
        for plane in data.planes:
            for k, v in plane.stats:
                if k == "profile_start_time":
                    start = int(v)
        base = start - self._offset
        out = []
        for plane in data.planes:
            for line in plane.lines:
                for e in line.events:
                    stats = dict(e.stats)
                    op = stats.get("hlo_op")
                    if op is None:
                        continue
                    out.append(KernelEvent(
                        str(stats.get("hlo_module", "")), str(op), int(stats.get("run_id", 0)),
                        int(stats.get("device_ordinal", 0)), (base + e.start_ns) / 1e9, e.duration_ns / 1e9,
                    ))
        out.sort(key=lambda e: e.start)
        return out, list(self.launches)


def to_device(array: np.ndarray, device=None):
    """Copy a host array to a device buffer, keeping 64-bit dtypes exact; on a
    mesh (:class:`MeshTarget`), a copy on every device of it.

    Always a copy: on the CPU, ``device_put`` may wrap the host memory itself
    (jax 0.10.2 does so for float16 even with ``may_alias=False``), and the
    user's later in-place update of their array would reach the device value.
    The private copy made here is what the buffer may wrap.

    A NumPy array bound for one device goes straight to jaxlib's
    ``batched_device_put``, the call ``jax.device_put`` ends in: about 6 us
    against 40 (its dispatch and the ``enable_x64`` switch cost the rest),
    which a barrier pays for every scalar pack that is new (a decoding
    token's valid sizes are new at every token)."""
    if type(array) is np.ndarray and isinstance(device, xc.Device) and array.dtype != _FLOAT0:
        return xc.batched_device_put(ShapedArray(array.shape, array.dtype), SingleDeviceSharding(device),
                                     [np.array(array, copy=True)], [device], True, enable_x64=True)
    if isinstance(device, MeshTarget):
        if device.spans_processes:
            # jax checks that every process put the same value: a gather over the
            # processes, which fails at once (the pairs are connected) when one is gone
            peers.check()
            try:
                with jax.enable_x64(True):
                    return jax.device_put(np.array(array, copy=True), device.replicated_sharding)
            except Exception as e:
                peers.failed(e)  # raises PeerLost naming the process when one is gone
                raise
        device = device.replicated_sharding
    with jax.enable_x64(True):
        return jax.device_put(np.array(array, copy=True), device or default_device())


# --- meshes: one program over many devices ----------------------------------------------


class Sharding(NamedTuple):
    """How a buffer is laid out over a mesh.

    ``text`` is XLA's sharding as jax prints it (canonical: one layout, one
    text); it enters the graph's digests (``str``). The entry arguments
    carry it in Shardy's spelling (:meth:`MeshTarget.axes`). ``spec`` is the layout as a mesh axis name (or None) per
    dimension, or None when XLA chose one no such spec describes."""

    text: str
    spec: tuple | None
    jax: object
    """The jax sharding (result handlers, resharding)."""
    target: "MeshTarget | None" = None
    """The mesh it lays a value out over (:meth:`MeshTarget.axes`)."""

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"Sharding({self.text})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Sharding) and self.text == other.text

    def __hash__(self) -> int:
        return hash(self.text)


class MeshTarget:
    """A mesh's devices as jaxlib sees them, in row-major mesh order: where
    its programs run (that order is their device assignment) and its values
    live."""

    def __init__(self, devices: Sequence, shape: tuple[int, ...], axis_names: tuple[str, ...]):
        from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

        self.devices = tuple(devices)
        self.shape = tuple(shape)
        self.axis_names = tuple(axis_names)
        self.jax_mesh = Mesh(
            np.array(self.devices, dtype=object).reshape(self.shape), self.axis_names,
            axis_types=(AxisType.Auto,) * len(self.shape),
        )
        self.device_list = xc.DeviceList(self.devices)
        self.client = self.devices[0].client
        self.platform = self.devices[0].platform
        self.device_kind = self.devices[0].device_kind
        self._named = NamedSharding
        self._spec = PartitionSpec
        self.replicated_sharding = NamedSharding(self.jax_mesh, PartitionSpec())

    def sharding(self, spec: tuple, ndim: int) -> Sharding:
        """The layout ``spec`` (an axis name or None per dimension) of a rank-``ndim`` value."""
        key = (self, spec, ndim)
        found = _SHARDINGS.get(key)
        if found is None:
            named = self._named(self.jax_mesh, self._spec(*spec))
            text = str(named._to_xla_hlo_sharding(ndim))
            found = _SHARDINGS.put(key, Sharding(text, _padded(spec, ndim), named, self))
        return found

    def from_jax(self, sharding, ndim: int) -> Sharding:
        """The :class:`Sharding` of a jax sharding over this mesh's devices."""
        return self._from_hlo(sharding._to_xla_hlo_sharding(ndim), ndim, sharding)

    def _from_hlo(self, hlo, ndim: int, jax_sharding) -> Sharding:
        text = str(hlo)
        key = (self, text, ndim)
        found = _SHARDINGS.get(key)
        if found is None:
            found = _SHARDINGS.put(key, Sharding(text, self._spec_of(hlo, ndim), jax_sharding, self))
        return found

    def _spec_of(self, hlo, ndim: int) -> tuple | None:
        """The spec that gives exactly ``hlo``, if one does (one axis or none per dimension)."""
        from jax._src.sharding_impls import parse_flatten_op_sharding

        try:
            (spec,) = parse_flatten_op_sharding(hlo, self.jax_mesh)
        except Exception:  # noqa: BLE001 - a layout jax cannot name has no spec
            return None
        names = []
        for entry in tuple(spec) + (None,) * (ndim - len(spec)):
            if isinstance(entry, tuple):
                if len(entry) > 1:
                    return None
                entry = entry[0] if entry else None
            if entry is not None and not isinstance(entry, str):
                return None
            names.append(entry)
        names = tuple(names)
        return names if str(self.sharding(names, ndim).text) == str(hlo) else None

    def axes(self, sharding: Sharding, ndim: int) -> tuple | None:
        """``sharding`` as Shardy spells a layout: per dimension, the mesh axes
        that split it, major first, each ``(axis, pre, size)`` (the sub-axis
        of mesh axis ``axis`` of ``size`` positions, every ``pre``-th: the
        whole axis is ``(axis, 1, n)``); None when no axes of this mesh give
        it (a device order other than the mesh's)."""
        if sharding.spec is not None:
            return tuple(() if a is None else ((self.axis_names.index(a), 1, self.shape[self.axis_names.index(a)]),)
                         for a in sharding.spec)
        hlo = sharding.jax._to_xla_hlo_sharding(ndim)
        if hlo.is_replicated():
            return ((),) * ndim
        return self._named_axes(hlo, ndim) or self._sub_axes(hlo, ndim)

    def _named_axes(self, hlo, ndim: int) -> tuple | None:
        """Whole mesh axes, several on a dimension where need be."""
        from jax._src.sharding_impls import parse_flatten_op_sharding

        try:
            (spec,) = parse_flatten_op_sharding(hlo, self.jax_mesh)
        except Exception:  # noqa: BLE001 - no spec of this mesh gives it
            return None
        if str(self._named(self.jax_mesh, spec)._to_xla_hlo_sharding(ndim)) != str(hlo):
            return None
        out = []
        for entry in tuple(spec) + (None,) * (ndim - len(spec)):
            names = () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)
            out.append(tuple((self.axis_names.index(n), 1, self.shape[self.axis_names.index(n)]) for n in names))
        return tuple(out)

    def _sub_axes(self, hlo, ndim: int) -> tuple | None:
        """Parts of mesh axes (Shardy's sub-axes), as XLA's partitioner splits
        a mesh axis over two dimensions (a reshape's result): an iota layout
        whose axes each lie inside one mesh axis."""
        from jax._src.mesh import AbstractMesh
        from jax._src.sharding_impls import _gspmd_to_named_sharding_via_mesh, GSPMDSharding

        if not hlo.is_tiled() or not hlo.is_tile_assignment_iota() or hlo.tuple_elements():
            return None
        sizes = tuple(hlo.get_axis_sizes())
        names = tuple(f"_axis_{i}" for i in range(len(sizes)))
        try:
            spec = _gspmd_to_named_sharding_via_mesh(
                GSPMDSharding(self.device_list, hlo), AbstractMesh(sizes, names)).spec
        except Exception:  # noqa: BLE001 - jax has no named form of it
            return None
        # each part, in mesh order, inside the mesh axis it falls in
        parts, axis, pre = {}, 0, 1
        for name, size in zip(names, sizes):
            while axis < len(self.shape) and pre == self.shape[axis]:
                axis, pre = axis + 1, 1
            if axis == len(self.shape) or self.shape[axis] % (pre * size):
                return None
            parts[name] = (axis, pre, size)
            pre *= size
        out = []
        for entry in tuple(spec) + (None,) * (ndim - len(spec)):
            entry = () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)
            out.append(tuple(parts[n] for n in entry))
        return tuple(out)

    def put(self, array, sharding: Sharding):
        """A host array (copied) or a buffer of this mesh, laid out as
        ``sharding``. A mesh over several processes takes the same global array
        in each (each process keeps its devices' blocks)."""
        if isinstance(array, np.ndarray):
            array = np.array(array, copy=True)
        with jax.enable_x64(True):
            return jax.device_put(array, sharding.jax)

    def put_local(self, array: np.ndarray, sharding: Sharding, global_shape: tuple):
        """A buffer of ``global_shape`` laid out as ``sharding`` from this
        process's part of it (``array``: the blocks of its devices, together)."""
        with jax.enable_x64(True):
            return jax.make_array_from_process_local_data(sharding.jax, np.array(array, copy=True), global_shape)

    def assemble(self, buffers: Sequence, sharding: Sharding, global_shape: tuple):
        """A buffer of ``global_shape`` laid out as ``sharding`` from the
        blocks this process's devices hold (single-device buffers, no copy)."""
        with jax.enable_x64(True):
            return jax.make_array_from_single_device_arrays(tuple(global_shape), sharding.jax, list(buffers))

    def global_shape(self, spec: tuple, local_shape: tuple) -> tuple:
        """The shape of the value whose part in this process has ``local_shape``, laid out as ``spec``."""
        from jax._src.sharding_impls import local_to_global_shape

        shape = local_to_global_shape(self.sharding(spec, len(local_shape)).jax, tuple(local_shape))
        if any(n is None for n in shape):
            raise ValueError(f"the global shape of a part of shape {tuple(local_shape)} laid out as {spec} "
                             f"is ambiguous on this mesh")
        return tuple(shape)

    @property
    def spans_processes(self) -> bool:
        return any(d.process_index != self.devices[0].client.process_index() for d in self.devices)

    def output_shardings(self, loaded, types: Sequence[TensorType]) -> list[Sharding]:
        """The layouts XLA chose for the results (of ``types``) of a compiled program."""
        from jax._src.sharding_impls import GSPMDSharding

        ops = loaded.get_output_shardings()
        if not ops:  # one device: the partitioner did not run
            return [self.sharding((), t.rank) for t in types]
        if len(ops) == 1 and len(types) > 1:  # XLA put one sharding on the whole tuple
            ops = list(ops) * len(types)
        return [self._from_hlo(xc.HloSharding.from_proto(op), t.rank, GSPMDSharding(self.device_list, op))
                for op, t in zip(ops, types)]

    def compile_options(self) -> xc.CompileOptions:
        """One program for all devices, split by XLA's SPMD partitioner, Shardy
        (as jax 0.10 compiles a ``jit`` with shardings:
        ``pxla.create_compile_options``). GSPMD's is no fallback: every
        layout a buffer of the mesh has is whole mesh axes or parts of them
        (:meth:`axes`), which Shardy spells, since lazycore lays buffers out
        by specs and XLA's Shardy lays results out over the mesh's axes."""
        options = xc.CompileOptions()
        options.num_replicas = 1
        options.num_partitions = len(self.devices)
        build = options.executable_build_options
        build.use_spmd_partitioning = True
        # lazycore writes Shardy's annotations (runtime.compiler,
        # passes.lowering.collectives), as jax does: GSPMD's partitioner is
        # deprecated (XLA logs so at every compile)
        build.use_shardy_partitioner = True
        build.device_assignment = xc.DeviceAssignment.create(np.array([[d.id for d in self.devices]]))
        # inputs are laid out as their buffers are; outputs as XLA sees fit
        build.allow_spmd_sharding_propagation_to_output = [True]
        return options

    def __repr__(self) -> str:
        return f"MeshTarget({dict(zip(self.axis_names, self.shape))})"


_SHARDINGS = Memo("runtime.mesh_shardings", 1024)
"""(mesh target, spec or XLA's text, rank) -> :class:`Sharding`."""


def _padded(spec: tuple, ndim: int) -> tuple:
    return tuple(spec) + (None,) * (ndim - len(spec))


def to_host(buffer) -> np.ndarray:
    """The whole value; of a buffer spread over several processes, gathered
    from all of them (a collective: every process reads it, as jax's
    ``process_allgather``)."""
    if not buffer.is_fully_addressable:
        from jax.experimental import multihost_utils

        peers.check()  # a process of the group is gone: this would fail or hang
        try:
            # waited for beside the watch: a read that waits for a dead process raises PeerLost
            with nativeout.filtered():  # its first gather over these devices connects them (gloo prints)
                return peers.collective(lambda: np.asarray(multihost_utils.process_allgather(buffer, tiled=True)))
        except peers.PeerLost:
            raise
        except Exception as e:
            peers.failed(e)  # raises PeerLost naming the process when one is gone
            raise
    return np.asarray(buffer)


def _identity(x):
    return x


def connect_processes() -> None:
    """Connect every pair of processes' k-th devices now: the collective jax
    runs when a value is put on a mesh over several processes (its check that
    every process gave the same value) uses them, and reads only one device
    of its result, so the others may connect after it returned, when no
    filter of stdout is on (gloo prints: lazycore.runtime.nativeout)."""
    from jax.sharding import Mesh as JaxMesh
    from jax.sharding import NamedSharding, PartitionSpec

    if jax.devices()[0].platform != "cpu":  # collectives between processes go through gloo on the CPU only
        return
    pairs = JaxMesh(np.array(jax.devices()).reshape(jax.process_count(), jax.local_device_count()),
                    ("processes", "local"))
    part = jax.make_array_from_process_local_data(NamedSharding(pairs, PartitionSpec("processes")),
                                                  np.zeros(1, np.int32), (jax.process_count(),))
    with nativeout.filtered():
        jax.jit(_identity, out_shardings=NamedSharding(pairs, PartitionSpec()))(part).block_until_ready()


def _result_handler(t: TensorType, sharding):
    from jax._src.core import ShapedArray

    aval = ShapedArray(tuple(t.shape), to_numpy_dtype(t.dtype))
    return xc.array_result_handler(aval, sharding, committed=True, _skip_checks=True)


@dataclass
class Executable:
    """A compiled program: call it with device buffers, get device buffers."""

    loaded: object
    device: object
    input_types: tuple[TensorType, ...]
    output_types: tuple[TensorType, ...]
    arguments: tuple | None = None
    """Per device-data argument, the index of the graph's parameter it
    takes, or the indices of the parameters it takes stacked
    (:mod:`lazycore.runtime.stacks`); None: argument k is parameter k."""
    rows: tuple | None = None
    """Per output of the graph it computes, ``(result, row)``: the outputs
    that are rows of a returned stack (row >= 0); None: result k is output k."""
    keeps: bool = False
    """It leaves the stacks it takes alone (donates none of them)."""
    from_disk: bool = False
    """Loaded from the disk cache (:mod:`lazycore.runtime.diskcache`): the source
    lines in its HLO are those of the process that compiled it."""

    def __post_init__(self):
        self.number = next(_numbers)
        """This process's number for the program (``program 3`` in reports and kernel profiles)."""
        self._memory = None
        # jaxlib's own result handlers wrap the outputs as arrays in C++, a
        # few times faster per output than disassembling them in Python
        if isinstance(self.device, MeshTarget):
            self.output_shardings = tuple(self.device.output_shardings(self.loaded, self.output_types))
            self._handlers = [_result_handler(t, s.jax) for t, s in zip(self.output_types, self.output_shardings)]
        else:
            self.output_shardings = (None,) * len(self.output_types)
            """Per result, its :class:`Sharding` on a mesh (None on one device)."""
            sharding = SingleDeviceSharding(self.device)
            self._handlers = [_result_handler(t, sharding) for t in self.output_types]
        # its first run may connect gloo's communicators between processes, which print a line
        # to stdout (lazycore.runtime.nativeout)
        self._connects = isinstance(self.device, MeshTarget) and self.device.spans_processes
        self._waited_at_exit = not self._connects

    def value_count(self, outputs: int) -> int:
        """How many results hold the values of a graph's ``outputs``
        outputs (its value checks' flags follow them)."""
        return outputs if self.rows is None else 1 + max(j for j, _ in self.rows)

    def __call__(self, buffers: Sequence) -> list:
        return self.launch(buffers)[0]

    def launch(self, buffers: Sequence) -> tuple[list, object]:
        """Start the program: its result buffers (filled asynchronously; reading
        one waits for it) and a handle whose ``block_until_ready()`` waits for
        the whole execution (results that get donated later cannot be waited
        on themselves)."""
        if len(buffers) != len(self.input_types):
            raise TypeError(f"executable takes {len(self.input_types)} inputs, got {len(buffers)}")
        if peers.broken() and isinstance(self.device, MeshTarget) and self.device.spans_processes:
            peers.check()
        if self._connects:
            self._connects = False
            with nativeout.filtered():  # until the run is over: its collectives connect in XLA's threads
                results, done = self.launch(buffers)
                try:
                    done.block_until_ready()
                except Exception:  # noqa: BLE001 - raised where the results are read, as for any run
                    pass
            return results, done
        res = self.loaded.execute_sharded(list(buffers), with_tokens=True)
        LAUNCHES.last[self.device] = (self, buffers)
        if LAUNCHES.log is not None:
            LAUNCHES.log.append((self, self.device))
        done = res.consume_token()
        if self._waited_at_exit:
            tokens = LAUNCHES.running.get(self.device)
            if tokens is None:
                tokens = LAUNCHES.running[self.device] = collections.deque(maxlen=RUNNING_KEPT)
            tokens.append(done)
        return res.consume_with_handlers(self._handlers), done

    def memory(self) -> dict[str, int]:
        """XLA's figures for the compiled program, per device: ``argument``,
        ``output``, ``alias`` (outputs written into donated arguments),
        ``temp`` (its scratch buffer) and ``generated_code`` bytes; empty
        where the backend gives none. Asked once per executable."""
        if self._memory is None:
            try:
                stats = self.loaded.get_compiled_memory_stats()
            except Exception:  # noqa: BLE001 - a backend without the figures reports none
                stats = None
            self._memory = {
                name: int(getattr(stats, f"{name}_size_in_bytes"))
                for name in ("argument", "output", "alias", "temp", "generated_code")
                if hasattr(stats, f"{name}_size_in_bytes")
            }
        return self._memory

    def hlo_text(self) -> str:
        """XLA's optimized HLO of the program, as text ("" when a loaded
        program did not keep it): its kernels are the entry computation's
        instructions."""
        try:
            return "\n".join(m.to_string() for m in self.loaded.hlo_modules())
        except Exception:  # noqa: BLE001 - a deserialized program may not keep its HLO
            return ""

    def module_name(self) -> str:
        """The HLO module's name (what XLA's profiler names the program by)."""
        try:
            return self.loaded.hlo_modules()[0].name
        except Exception:  # noqa: BLE001 - a deserialized program may not keep its HLO
            return ""

    def run_numpy(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Convenience for tests and tools: host arrays in, host arrays out."""
        for i, (a, t) in enumerate(zip(arrays, self.input_types)):
            if type_of(np.asarray(a)) != t:
                raise TypeError(f"input {i}: expected {t}, got {type_of(np.asarray(a))}")
        outs = self([to_device(a, self.device) for a in arrays])
        return [to_host(o) for o in outs]


def _compile_options(device) -> xc.CompileOptions:
    if isinstance(device, MeshTarget):
        return device.compile_options()
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
    *,
    fusion_emitters: bool = True,
) -> Executable:
    """``artifact`` compiled for ``device``. ``fusion_emitters=False``: on CPU,
    XLA emits its kernels with its elemental IR emitter instead of its MLIR
    fusion emitters (:data:`SMALL_PROGRAM_BYTES` says when the compiler asks)."""
    device = device or default_device()
    _lapack_before(artifact)
    options = _compile_options(device)
    if not fusion_emitters and device.client.platform == "cpu":
        options.env_option_overrides = [*options.env_option_overrides, ("xla_cpu_use_fusion_emitters", False)]
    loaded = device.client.compile_and_load(artifact, _device_list(device), options)
    hostmem.give_back_freed()
    return Executable(loaded, device, tuple(input_types), tuple(output_types))


SMALL_PROGRAM_BYTES = 24 << 10
"""A CPU program whose artifact is smaller than this is compiled with XLA's
elemental IR emitter, not its MLIR fusion emitters
(:func:`lazycore.runtime.compiler.compile_stablehlo`): those make MLIR contexts
for every compile and run an MLIR pipeline for every fusion, a fixed cost that
is most of a small program's compile (a 20-fusion Adam step of three small
parameters: 0.30 s with them, 0.15 s without; 250 programs of lazycore's tests,
up to 16 KiB: 0.61x the time in all). From about 30 KiB on (a training step of
a small model) neither is faster by much over a model's programs, and the
fusion emitters' programs run a few per cent faster. Both give eager's bits
(benchmarks/xla_cpu_options.py, the test suite), but where a program computes
with float8: the elemental emitter's float8 conversions round unlike eager's."""


_lapack_ready = False


def _lapack_before(program: bytes) -> None:
    """Initialize jaxlib's LAPACK handlers before the first program that calls
    one (a custom call ``lapack_*_ffi``: lazycore.passes.lowering.lapack) is
    compiled or loaded: until then they hold no routines (SciPy's, looked up
    by the initialization) and the program crashes at launch. Once a process;
    the name is searched in the program's bytes until then."""
    global _lapack_ready
    if not _lapack_ready and b"lapack_" in program:
        from jax._src.lax import linalg as jax_linalg

        jax_linalg.initialize_lapack()
        _lapack_ready = True


def _device_list(device) -> xc.DeviceList:
    return device.device_list if isinstance(device, MeshTarget) else xc.DeviceList((device,))


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
    devices = device.devices if isinstance(device, MeshTarget) else (device,)
    _jax_cache_key._hash_accelerator_config(h, np.array(devices, dtype=object))
    h.update(repr((device.platform, device.device_kind, len(client.devices()), len(devices))).encode())
    h.update(repr(("elemental emitter below", SMALL_PROGRAM_BYTES)).encode())  # (compile_artifact's choice)
    return h.digest()


def serialize(exe: Executable) -> bytes:
    """The executable as bytes :func:`deserialize` loads in another process."""
    return exe.loaded.serialize()


def deserialize(
    blob: bytes, input_types: Sequence[TensorType], output_types: Sequence[TensorType], device=None,
    plan: tuple = (None, None, False),
) -> Executable:
    """An executable from :func:`serialize`'s bytes, loaded onto ``device``
    (``plan``: its ``arguments``, ``rows`` and ``keeps``). XLA checks little: bytes
    changed in the middle may load (callers check a digest)."""
    device = device or default_device()
    _lapack_before(blob)
    loaded = device.client.deserialize_executable(blob, _device_list(device), _compile_options(device))
    hostmem.give_back_freed()
    return Executable(loaded, device, tuple(input_types), tuple(output_types), *plan)
