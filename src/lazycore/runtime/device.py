"""Devices: the CPU always, GPUs/TPUs when jaxlib sees them, and meshes of them.

A :class:`Device` names one PJRT device (``"cpu:0"``, ``"gpu:1"``) and owns
the registry of live lazy tensors placed on it. A :class:`Mesh` is a device
too: its values are laid out over its devices, and a barrier runs one
program for all of them. Values never move between devices implicitly: an
op whose operands live on two devices (or two meshes) is refused at the call
(:func:`check_same`).
"""

from __future__ import annotations

from lazycore.ir.tensor import Arena
from lazycore.runtime import pjrt


class Device:
    __slots__ = ("platform", "index", "pjrt", "arena", "running")

    def __init__(self, platform: str, index: int, pjrt_device=None):
        self.platform = platform
        self.index = index
        self.pjrt = pjrt_device
        """The jaxlib device; None for a device object that cannot run anything."""
        self.arena = Arena()
        """Live tensors on this device (the paper's DeviceContextArena)."""
        self.running = None
        """The last program a barrier started here and did not wait for (its
        completion handle), or None: at most one runs while Python traces."""

    def read(self, t):
        """``t``'s value on the host: a barrier here when it is pending."""
        from lazycore.runtime.reads import to_numpy  # reads run barriers, which run on devices

        return to_numpy(t)

    def wait(self) -> None:
        """Wait for the program still running here, if any."""
        running, self.running = self.running, None
        if running is not None:
            running.block_until_ready()

    @property
    def name(self) -> str:
        return f"{self.platform}:{self.index}"

    @property
    def kind(self) -> str:
        """What a compiled program depends on: the platform and the chip model."""
        model = getattr(self.pjrt, "device_kind", None) or "none"
        return f"{self.platform}/{model}"

    def __repr__(self) -> str:
        return f"Device({self.name})"

    def __str__(self) -> str:
        return self.name


_DEVICES: dict[tuple[str, int], Device] = {}


def devices() -> list[Device]:
    """Every device jaxlib sees, CPU first."""
    out, seen = [], {}
    for d in pjrt.devices():
        platform = "gpu" if d.platform in ("cuda", "rocm") else d.platform
        index = seen.get(platform, 0)
        seen[platform] = index + 1
        key = (platform, index)
        if key not in _DEVICES:
            _DEVICES[key] = Device(platform, index, d)
        out.append(_DEVICES[key])
    return out


_default: Device | None = None


def default_device() -> Device:
    """``cpu:0``: lazy values go there unless told otherwise."""
    global _default
    if _default is None:
        _default = get("cpu:0")
    return _default


def get(device=None) -> Device:
    """A :class:`Device`, from a Device, a name like ``"gpu:0"`` or None (default)."""
    if device is None:
        return default_device()
    if isinstance(device, Device):
        return device
    if isinstance(device, str):
        for d in devices():
            if d.name == device:
                return d
        names = ", ".join(d.name for d in devices())
        raise ValueError(f"no device '{device}' (available: {names})")
    raise TypeError(f"expected a lazycore Device or a name like 'cpu:0', got {device!r}")


def known_devices() -> list[Device]:
    """Devices that may hold live tensors: the ones made so far."""
    return list(_DEVICES.values())


def check_same(op: str, first: Device, other: Device, position) -> None:
    if other is not first and (isinstance(first, Mesh) or isinstance(other, Mesh)):
        raise ValueError(
            f"{op}: operand {position} is on {other.name} but the operands before it are on {first.name}; "
            f"values of two meshes, or of a mesh and a single device, never mix (lay a value out on a mesh "
            f"with lazycore.shard(value, mesh, spec))"
        )
    if other is not first:
        raise ValueError(
            f"{op}: operand {position} is on {other.name} but the operands before it are on {first.name}; "
            f"lazycore never moves values between devices implicitly "
            f"(copy one with lazycore.to_device(value, device))"
        )


class Mesh(Device):
    """``Mesh(shape, axis_names, devices=None)``: devices in a logical array with named axes.

    Values placed on a mesh are laid out over its devices
    (``lazycore.shard(value, mesh, spec)``; uploads are replicated), and a
    barrier runs their pending work as one program that XLA's SPMD
    partitioner splits over the devices. ``devices`` (lazycore devices or
    their names, row-major) defaults to every device of the best platform
    there is (an accelerator, else the CPU), of every process when several
    run together (:mod:`lazycore.runtime.distributed`), and must fill the
    mesh exactly. Two meshes of the same shape, names and devices are one object.
    """

    __slots__ = ("shape", "axis_names", "devices", "_name")

    def __new__(cls, shape, axis_names, devices=None):
        shape, names, devs = _mesh_args(shape, axis_names, devices)
        key = ("mesh", shape, names, tuple(map(_pjrt_name, devs)))
        mesh = _DEVICES.get(key)
        if mesh is None:
            mesh = object.__new__(cls)
            Device.__init__(mesh, _platform(devs[0]), None, pjrt.MeshTarget(devs, shape, names))
            mesh.shape, mesh.axis_names = shape, names
            mesh.devices = devs
            """The PJRT devices, row-major (of every process the mesh spans)."""
            mesh._name = None
            _DEVICES[key] = mesh
        return mesh

    def __init__(self, shape, axis_names, devices=None):
        pass  # made whole by __new__ (one object per mesh)

    @property
    def name(self) -> str:
        if self._name is None:
            axes = ",".join(f"{n}={s}" for n, s in zip(self.axis_names, self.shape))
            self._name = f"mesh({axes} over {_device_names(self.devices)})"
        return self._name

    @property
    def size(self) -> int:
        return len(self.devices)

    def axis_size(self, name: str) -> int:
        return self.shape[self.axis_index(name)]

    def axis_index(self, name) -> int:
        if name not in self.axis_names:
            raise ValueError(f"{name!r} is not an axis of {self.name} (its axes: {', '.join(self.axis_names)})")
        return self.axis_names.index(name)

    def spec_axes(self, spec, shape, what: str = "spec", sizes: bool = True) -> tuple[int, ...]:
        """``spec`` for a value of ``shape`` as mesh axis indices per dimension
        (-1: not split): an axis name or None per dimension (fewer entries than
        dimensions leave the last ones whole, as jax's ``PartitionSpec``). Bad
        specs raise ValueError (TypeError for entries that are no names);
        ``sizes=False`` leaves the sizes of the dimensions unchecked."""
        if isinstance(spec, str) or not isinstance(spec, (tuple, list)):
            raise TypeError(f"{what} must be a tuple with an axis name or None per dimension, got {spec!r}")
        spec = tuple(spec)
        shape = tuple(shape)
        if len(spec) > len(shape):
            raise ValueError(f"{what} {spec} has {len(spec)} entries, more than the {len(shape)} dimensions "
                             f"of a value of shape {shape}")
        axes = []
        for d, entry in enumerate(spec):
            if entry is None:
                axes.append(-1)
                continue
            if not isinstance(entry, str):
                raise TypeError(f"{what} {spec}: entry {d} is {entry!r}; entries are mesh axis names or None")
            a = self.axis_index(entry)
            if a in axes:
                raise ValueError(f"{what} {spec}: mesh axis {entry!r} splits two dimensions")
            if sizes and shape[d] % self.shape[a]:
                raise ValueError(
                    f"{what} {spec}: dimension {d} of size {shape[d]} cannot be split evenly along mesh axis "
                    f"{entry!r} of size {self.shape[a]}"
                )
            axes.append(a)
        return tuple(axes) + (-1,) * (len(shape) - len(spec))

    def spec_names(self, axes) -> tuple:
        """Axis indices per dimension (-1: not split) as a spec of names."""
        return tuple(None if a < 0 else self.axis_names[a] for a in axes)

    def __repr__(self) -> str:
        return f"Mesh({self.shape}, {self.axis_names}, devices=[{_device_names(self.devices)}])"


def _platform(pjrt_device) -> str:
    return "gpu" if pjrt_device.platform in ("cuda", "rocm") else pjrt_device.platform


def _pjrt_name(pjrt_device) -> str:
    """A PJRT device by its global id (in one process, the lazycore name)."""
    return f"{_platform(pjrt_device)}:{pjrt_device.id}"


def _mesh_args(shape, axis_names, chosen) -> tuple[tuple[int, ...], tuple[str, ...], tuple]:
    """The checked arguments of :class:`Mesh` (ValueError / TypeError for bad ones)."""
    if isinstance(shape, int):
        shape = (shape,)
    shape = tuple(shape)
    if not shape or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in shape):
        raise ValueError(f"a mesh shape is one or more positive integers, got {shape}")
    if isinstance(axis_names, str):
        axis_names = (axis_names,)
    names = tuple(axis_names)
    if not all(isinstance(n, str) and n for n in names):
        raise TypeError(f"mesh axis names are non-empty strings, got {names}")
    if len(names) != len(shape):
        raise ValueError(f"a mesh of shape {shape} needs {len(shape)} axis names, got {len(names)}: {names}")
    if len(set(names)) != len(names):
        raise ValueError(f"mesh axis names must differ, got {names}")
    size = 1
    for n in shape:
        size *= n
    if chosen is None:
        every = pjrt.global_devices()
        best = next((_platform(d) for d in every if _platform(d) != "cpu"), "cpu")
        devs = tuple(d for d in every if _platform(d) == best)
        if len(devs) != size:
            raise ValueError(
                f"a mesh of shape {shape} needs {size} devices; there are {len(devs)} {best} devices "
                f"(pass devices=[...] for part of them; on the CPU, XLA_FLAGS=--xla_force_host_platform_device_count=N "
                f"set before jax is imported makes N)"
            )
        return shape, names, devs
    chosen = tuple(chosen)
    if chosen and all(hasattr(d, "process_index") for d in chosen):  # PJRT devices, of any process
        if len(chosen) != size or len(set(chosen)) != len(chosen):
            raise ValueError(f"a mesh of shape {shape} needs {size} distinct devices, got {len(chosen)}")
        return shape, names, chosen
    devs = tuple(d if isinstance(d, Mesh) else get(d) for d in chosen)
    if any(isinstance(d, Mesh) for d in devs):
        raise TypeError("a mesh is made of single devices, not of meshes")
    if len(devs) != size:
        raise ValueError(f"a mesh of shape {shape} needs {size} devices, got {len(devs)}")
    if len(set(devs)) != len(devs):
        raise ValueError(f"a mesh holds each device once, got {_device_names(devs)}")
    if len({d.platform for d in devs}) > 1:
        raise ValueError(f"a mesh holds devices of one platform, got {_device_names(devs)}")
    if any(d.pjrt is None for d in devs):
        raise ValueError("a mesh is made of devices that can run programs")
    return shape, names, tuple(d.pjrt for d in devs)


def process_mesh(device: Device, axis: str = "processes") -> Mesh:
    """A one-axis mesh with, for every process running together
    (:mod:`lazycore.runtime.distributed`), its device at ``device``'s place
    among its own devices of that platform: what a collective between the
    processes' single-device values runs on (every process makes the same
    mesh from its own device)."""
    if isinstance(device, Mesh):
        raise TypeError("process_mesh takes a single device, not a mesh")
    local = sorted((d for d in pjrt.devices() if _platform(d) == device.platform), key=lambda d: d.id)
    k = local.index(device.pjrt)
    per_process: dict[int, list] = {}
    for d in pjrt.global_devices():
        if _platform(d) == device.platform:
            per_process.setdefault(d.process_index, []).append(d)
    chosen = [sorted(devs, key=lambda d: d.id)[k] for _, devs in sorted(per_process.items())]
    return Mesh((len(chosen),), (axis,), devices=chosen)


def _device_names(devs) -> str:
    """The devices as their processes name them (:func:`local_names`): ``cpu:0-3``
    for consecutive ones, else every name; with several processes, per process
    (``process 0 cpu:0-1, process 1 cpu:0-1``): jax's global ids (``cpu:2048``)
    mean nothing to a user."""
    local = local_names()
    runs = []  # [process, platform, first index, last index]
    for d in devs:
        process, platform, index = local[d]
        last = runs[-1] if runs else None
        if last is not None and last[:2] == [process, platform] and last[3] + 1 == index:
            last[3] = index
        else:
            runs.append([process, platform, index, index])
    if pjrt.process_count() == 1:
        if len(runs) == 1 and len(devs) > 1:
            return "{1}:{2}-{3}".format(*runs[0])
        return ",".join(f"{platform}:{i}" for _, platform, first, end in runs for i in range(first, end + 1))
    named, previous = [], None
    for process, platform, first, end in runs:
        run = f"{platform}:{first}" if first == end else f"{platform}:{first}-{end}"
        named.append(run if process == previous else f"process {process} {run}")
        previous = process
    return ", ".join(named)


def local_names() -> dict:
    """PJRT device (of any process) -> ``(process, platform, index)``: its place
    among its own process's devices of that platform, sorted by id (the name
    ``platform:index`` that process's lazycore gives it)."""
    by_process: dict[tuple, list] = {}
    for d in pjrt.global_devices():
        by_process.setdefault((d.process_index, _platform(d)), []).append(d)
    out = {}
    for (process, platform), group in by_process.items():
        for i, d in enumerate(sorted(group, key=lambda d: d.id)):
            out[d] = (process, platform, i)
    return out
