"""Devices: the CPU always, GPUs/TPUs when jaxlib sees them.

A :class:`Device` names one PJRT device (``"cpu:0"``, ``"gpu:1"``) and owns
the registry of live lazy tensors placed on it. Values never move between
devices implicitly: an op whose operands live on two devices is refused at
the call (:func:`check_same`).
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
        from lazycore.runtime.transfer import to_numpy  # transfer builds on devices

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
    if other is not first:
        raise ValueError(
            f"{op}: operand {position} is on {other.name} but the operands before it are on {first.name}; "
            f"lazycore never moves values between devices implicitly "
            f"(copy one with lazycore.to_device(value, device))"
        )
