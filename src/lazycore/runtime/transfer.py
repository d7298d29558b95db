"""Values in and out of the graph: device data from the host or a buffer, and
reads that run a barrier.

Uploads and reads are announced as events (``transfer``, ``implicit_barrier``)
before they happen, so a guard in :mod:`lazycore.observe` can stop them.
"""

from __future__ import annotations


import numpy as np

from lazycore.dialect.types import TensorType, from_numpy_dtype, to_numpy_dtype, type_of
from lazycore.ir import events
from lazycore.ir.context import TRACE, locked
from lazycore.ir.graph import Data, Value
from lazycore.ir.tensor import LazyTensor
from lazycore.runtime import barrier, closures, hostreads, pjrt
from lazycore.runtime import autostep  # noqa: F401  (gives TRACE its cutter)
from lazycore.runtime import device as _device
from lazycore.runtime.reads import _materialize, to_buffer, to_numpy  # noqa: F401  (reads are transfers too)


# a value enters the graph, or a read's barrier and copy are one step that no other
# thread's barrier splits (it could donate the buffer being read): docs/threads.md
_locked = locked


@_locked
def from_numpy(array, device=None) -> LazyTensor:
    """Copy host data to ``device`` (default ``cpu:0``) as a lazy value."""
    dev, host, t = _target(array, device)
    events.emit("transfer", "host-to-device", t, host.nbytes)
    with events.timed("transfer"):
        buf = pjrt.to_device(host, dev.pjrt)
    return _uploaded(buf, t, host.nbytes, dev, kept=hostreads.keep(host))


from_host = from_numpy


class Upload:
    """Host data copied to a device from any thread (an input pipeline's), and
    made a lazy value by the thread that traces (:meth:`claim`): the copy
    overlaps the step; the upload is announced and counted where the value
    enters the graph."""

    __slots__ = ("device", "type", "nbytes", "buffer", "kept")

    def __init__(self, array, device=None):
        self.device, host, self.type = _target(array, device)
        self.nbytes = host.nbytes
        self.buffer = pjrt.to_device(host, self.device.pjrt)
        self.kept = hostreads.keep(host)

    def claim(self) -> LazyTensor:
        events.emit("transfer", "host-to-device", self.type, self.nbytes)
        return _uploaded(self.buffer, self.type, self.nbytes, self.device, kept=self.kept)


def _target(array, device):
    dev = _device.get(device)
    host = np.asarray(array)
    t = type_of(host)  # ShapeError for dtypes the dialect has no name for
    if dev.pjrt is None:
        raise RuntimeError(f"device {dev.name} cannot hold data (no PJRT device behind it)")
    return dev, host, t


@_locked
def _uploaded(buf, t, nbytes: int, dev, sharding=None, kept=None) -> LazyTensor:
    """A handle of the uploaded buffer; ``kept``: the host copy its leaf keeps
    (a small upload to one device: :mod:`lazycore.runtime.hostreads`)."""
    events.bump("transfers_to_device")
    events.bump("bytes_to_device", nbytes)
    if sharding is None and isinstance(dev.pjrt, pjrt.MeshTarget):
        sharding = dev.pjrt.sharding((), t.rank)  # an upload to a mesh is on every device
    handle = LazyTensor(Value(leaf := Data(buf, t, owned=True, sharding=sharding), 0), dev)
    if sharding is None:
        leaf.host = kept
    handle._held = id(leaf)  # its new value may take this buffer (barrier.plan_donation)
    return handle


@_locked
def shard_data(source, mesh, spec: tuple) -> LazyTensor:
    """Device data on ``mesh`` laid out as ``spec`` (a mesh axis name or None
    per dimension, checked by the caller): from a host array, or from a
    handle holding device data of the mesh (XLA moves the blocks between its
    devices; nothing passes through the host)."""
    target = mesh.pjrt
    if isinstance(source, LazyTensor):
        leaf = _materialize(source)
        t = leaf.types[0]
        sharding = target.sharding(spec, t.rank)
        if leaf.sharding == sharding:
            return source
        buf = target.put(leaf.buffer, sharding)
        # jax may hand back the buffer itself for an equivalent layout: then
        # it is the source's, and never donated through this handle
        return LazyTensor(Value(Data(buf, t, owned=buf is not leaf.buffer, sharding=sharding), 0), mesh)
    dev, host, t = _target(source, mesh)
    sharding = target.sharding(spec, t.rank)
    events.emit("transfer", "host-to-device", t, host.nbytes)
    with events.timed("transfer"):
        buf = target.put(host, sharding)
    return _uploaded(buf, t, host.nbytes, dev, sharding)


def shard_local_data(local, mesh, spec: tuple, global_shape: tuple) -> LazyTensor:
    """Device data on ``mesh`` of ``global_shape``, laid out as ``spec``
    (both checked by the caller), from this process's part of it (its
    devices' blocks, together: the batch a process loaded); every process of
    the mesh makes it with its own part."""
    dev, host, part = _target(local, mesh)
    t = TensorType(tuple(global_shape), part.dtype)
    sharding = mesh.pjrt.sharding(spec, t.rank)
    events.emit("transfer", "host-to-device", part, host.nbytes)
    with events.timed("transfer"):
        buf = mesh.pjrt.put_local(host, sharding, t.shape)
    return _uploaded(buf, t, host.nbytes, dev, sharding)


@_locked
def from_blocks(t: LazyTensor, mesh, spec: tuple, global_shape: tuple) -> LazyTensor:
    """A value of ``mesh`` of ``global_shape`` laid out as ``spec``, whose
    block on this process's device of the mesh is ``t`` (a value of that
    single device, run first if pending); every process of the mesh makes it
    with its own block. No copy: the result shares ``t``'s buffer, so neither
    is donated afterwards."""
    sharding = mesh.pjrt.sharding(spec, len(global_shape))
    buf = mesh.pjrt.assemble([to_buffer(t)], sharding, global_shape)
    return LazyTensor(Value(Data(buf, TensorType(tuple(global_shape), t.dtype), owned=False, sharding=sharding), 0),
                      mesh)


def block_of(t: LazyTensor, device) -> LazyTensor:
    """The block of ``t`` (a value of a mesh, run first if pending) that
    ``device`` (a single device of the mesh, in this process) holds, as a
    value of ``device``; it shares the block's buffer, never donated."""
    for shard in to_buffer(t).addressable_shards:
        if shard.device == device.pjrt:
            return from_buffer(shard.data, device)
    raise ValueError(f"{device.name} holds no block of this value of {t.device.name}")


@_locked
def from_buffer(buffer, device=None) -> LazyTensor:
    """Wrap a PJRT buffer the caller owns; lazycore never donates it."""
    dev = _device.get(device) if device is not None else _device_of(buffer)
    t = TensorType(tuple(int(d) for d in buffer.shape), from_numpy_dtype(buffer.dtype))
    return LazyTensor(Value(Data(buffer, t, owned=False), 0), dev)


def _device_of(buffer):
    if len(buffer.devices()) != 1:
        raise ValueError(
            f"the buffer spans {len(buffer.devices())} devices; from_buffer takes a buffer of one device "
            f"(lay data out over a mesh with lazycore.shard)"
        )
    (pj,) = buffer.devices()
    for d in _device.devices():
        if d.pjrt == pj:
            return d
    raise ValueError(f"buffer lives on {pj}, which lazycore does not know")




@_locked
def mark_step(wait: bool = False, devices=None) -> None:
    """Run every pending live tensor, one program per device (cached).

    Returns once the program has started and the previous step's program has
    finished, so tracing the next step overlaps this step's execution (as
    PyTorch/XLA's ``mark_step``); ``wait=True`` waits for it to finish. Any
    read of a value (``to_numpy``, ``.item()``, printing) waits for the value."""
    TRACE.cutter.explicit_mark()
    # one step for all the devices: no thread records between their barriers (held: _locked)
    for d in devices if devices is not None else _device.known_devices():
        barrier.sync(_device.get(d), wait)
    if closures.PENDING or closures.ERRORS:  # the step's closures, after its programs (lazycore.runtime.closures)
        closures.run(closures.take())


def to_device(t: LazyTensor, device) -> LazyTensor:
    """An explicit copy of ``t`` to another device (through the host)."""
    return from_numpy(to_numpy(t), device)


def live_tensors(device=None) -> int:
    """How many handles the device's registry holds."""
    return len(_device.get(device).arena)


def live_bytes(device=None) -> tuple[int, int]:
    """``(buffers, bytes)`` of the device data the device's live handles hold
    (each buffer once; pending values hold none yet). A walk over the registry:
    for memory queries, never on the per-op path."""
    seen: set[int] = set()
    total = 0
    for handle in _device.get(device).arena.live():
        node = handle._value.node
        if type(node) is Data and id(node) not in seen:
            seen.add(id(node))
            t = node.types[0]
            total += t.size * to_numpy_dtype(t.dtype).itemsize
    return len(seen), total


def host_copies(device=None) -> tuple[int, int]:
    """``(copies, bytes)`` of the host copies that the device data of the
    device's live handles keep (small uploads and reads answered on the host:
    :mod:`lazycore.runtime.hostreads`), each once. A walk over the registry,
    for memory queries only."""
    seen: set[int] = set()
    total = 0
    for handle in _device.get(device).arena.live():
        node = handle._value.node
        if type(node) is Data and node.host is not None and id(node) not in seen:
            seen.add(id(node))
            total += node.host.nbytes
    return len(seen), total
