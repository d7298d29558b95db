"""``torch.lazy``: the device module PyTorch asks about the ``lazy`` device.

``torch.get_device_module("lazy")``, ``torch.random.fork_rng(device_type="lazy")``
and ``torch.utils.checkpoint`` find the functions a device type's module has
(``torch.cuda``'s names and meanings): the device count and the current
device, synchronization, each device's random generator
(:class:`~.ops.random.Generator`: its seed and state), and memory figures;
and ``torch.Generator(device="lazy")``, a private stream (:class:`LazyGenerator`).
:mod:`.hooks` registers this module with ``torch._register_device_module``.
"""

from __future__ import annotations

import random as _random

import torch

from lazycore.observe import memory as _memory
from lazycore.runtime import pjrt
from lazycore.runtime import transfer as _transfer

from . import tensor as _tensor
from .ops.random import GENERATORS

_initialized = True
"""``torch.utils.checkpoint`` stashes a device's RNG state only when its module
says it is initialized; lazycore's devices start on first use, so always."""


def is_available() -> bool:
    """Always: the lazy device runs wherever jaxlib does (at least on the CPU)."""
    return True


def is_initialized() -> bool:
    return True


def device_count() -> int:
    """The number of ``lazy:N`` devices (one per device jaxlib sees)."""
    return _tensor.device_count()


def current_device() -> int:
    """The index ``lazy`` without one names in this thread."""
    return _tensor.CURRENT.index


def _index(device, optional: bool = True) -> int:
    """A device index from an int, ``"lazy:N"``, a torch device or None (the current one)."""
    if device is None:
        if not optional:
            raise ValueError("Expected a lazy device with a specified index or an integer, but got: None")
        return current_device()
    if isinstance(device, int) and not isinstance(device, bool):
        index = device
    else:
        d = torch.device(device)
        if d.type != "lazy":
            raise ValueError(f"Expected a lazy device, but got: {d}")
        index = current_device() if d.index is None else d.index
    if not 0 <= index < device_count():
        raise RuntimeError(f"Invalid device ordinal {index}: there are {device_count()} lazy devices")
    return index


def _lc(device):
    return _tensor.lc_device(torch.device("lazy", _index(device)))


def set_device(device) -> None:
    """Make ``device`` the current lazy device of this thread."""
    _tensor.CURRENT.index = _index(device)


class device:
    """Context manager: ``device`` is the current lazy device inside (as ``torch.cuda.device``)."""

    def __init__(self, device):
        self.idx = -1 if device is None else _index(device)
        self.prev_idx = -1

    def __enter__(self):
        if self.idx != -1:
            self.prev_idx = current_device()
            set_device(self.idx)
        return self

    def __exit__(self, *exc):
        if self.idx != -1:
            set_device(self.prev_idx)
        return False


def get_device_name(device=None) -> str:
    """The lazycore device behind ``lazy:N`` (``cpu:0``, ``gpu:0``, ...) and its chip."""
    d = _lc(device)
    return f"{d.name} ({d.kind})"


def synchronize(device=None) -> None:
    """Run everything pending on the device and wait for it to finish: as
    ``torch.cuda.synchronize`` waits for the kernels already issued, with a
    lazy device's issued work being its pending graph."""
    _transfer.mark_step(wait=True, devices=[_lc(device)])


# --- random numbers ------------------------------------------------------------------


def manual_seed(seed) -> None:
    """Seed the current lazy device's generator."""
    GENERATORS.of(_lc(None)).reseed(_seed_value(seed))


def manual_seed_all(seed) -> None:
    """Seed every lazy device's generator."""
    seed = _seed_value(seed)
    for i in range(device_count()):
        GENERATORS.of(_lc(i)).reseed(seed)


def seed() -> None:
    """Seed the current lazy device's generator with a non-deterministic number."""
    GENERATORS.of(_lc(None)).reseed(_random.getrandbits(64))


def seed_all() -> None:
    """Seed every lazy device's generator with one non-deterministic number."""
    manual_seed_all(_random.getrandbits(64))


def initial_seed() -> int:
    """The current lazy device's seed."""
    return GENERATORS.of(_lc(None)).seed


def get_rng_state(device="lazy") -> torch.Tensor:
    """The device's generator state, a CPU uint8 tensor for :func:`set_rng_state`
    (a barrier when draws have advanced it: the state is on the device)."""
    return GENERATORS.of(_lc(device)).get_state()


def set_rng_state(new_state, device="lazy") -> None:
    GENERATORS.of(_lc(device)).set_state(new_state)


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states) -> None:
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


_TorchGenerator = torch._C.Generator
_TorchGeneratorType = type(_TorchGenerator)  # (torch's opaque-object class: a fake one passes too)


class _GeneratorType(_TorchGeneratorType):
    """``torch.Generator``'s class as lazycore installs it (:func:`install_generator`):
    calling it makes a :class:`LazyGenerator` for a ``lazy`` device and torch's
    own generator for any other, and every torch generator is an instance of it."""

    def __call__(cls, device=None):
        if cls is Generator:
            if device is not None and torch.device(device).type == "lazy":
                return LazyGenerator(device)
            return _TorchGenerator() if device is None else _TorchGenerator(device)
        return super().__call__(device)

    def __instancecheck__(cls, obj):
        return _TorchGeneratorType.__instancecheck__(_TorchGenerator if cls is Generator else cls, obj)

    def __subclasscheck__(cls, sub):
        return _TorchGeneratorType.__subclasscheck__(_TorchGenerator if cls is Generator else cls, sub)


class Generator(_TorchGenerator, metaclass=_GeneratorType):
    """``torch.Generator``: torch's class, which also makes generators for the
    ``lazy`` device (:class:`LazyGenerator`). PyTorch makes a device's
    generator through the device type's accelerator hooks, which a Python
    backend of the ``lazy`` type cannot register, and refused
    ``torch.Generator(device="lazy")`` ("lazy device type not an
    accelerator"): timm's ``ModelEmaV3`` makes one for its model's device."""


class LazyGenerator(Generator):
    """A random generator of a ``lazy`` device: a CPU generator's stream
    (seeding, ``initial_seed``, ``get_state``/``set_state`` are the CPU
    generator's) whose :attr:`device` is the lazy device. A random op given
    it draws with eager's CPU kernel, as one given a CPU generator does
    (:mod:`.ops.random`), so its numbers are the ones a CPU generator of the
    same seed and state draws: a private stream (timm's stochastic rounding)
    makes eager's values, and moves neither the device's generator nor the
    CPU's default one."""

    def __new__(cls, device="lazy"):
        self = _TorchGenerator.__new__(cls, "cpu")
        self._device = torch.device("lazy", _index(device))
        return self

    @property
    def device(self) -> torch.device:
        return self._device

    def __reduce__(self):
        # (torch's own names the CPU generator's class and device: a copy would leave the lazy device)
        _, _, state = super().__reduce__()
        return LazyGenerator, (self._device,), state

    def __repr__(self) -> str:
        return f"<lazycore generator of {self._device}>"


def install_generator() -> None:
    """Make ``torch.Generator`` the class :class:`Generator` (idempotent)."""
    torch.Generator = Generator


def _seed_value(seed) -> int:
    # torch's range and wrapping (torch.manual_seed(-1) seeds 2**64 - 1)
    seed = int(seed)
    if not -(1 << 63) <= seed < (1 << 64):
        raise ValueError("Overflow when unpacking long long")
    return seed & 0xFFFFFFFFFFFFFFFF


# --- memory ----------------------------------------------------------------------------


def memory_allocated(device=None) -> int:
    """Bytes of device data that live lazy values hold on the device."""
    return _memory.current(_lc(device))[1]


def max_memory_allocated(device=None) -> int:
    """The most bytes held on the device at once since the last
    :func:`reset_peak_memory_stats` (or the start): the device allocator's peak
    where it keeps one (GPUs, TPUs), else lazycore's account of its live values
    at each barrier, with what the barrier's program added (its results and
    scratch buffer, :mod:`lazycore.observe.memory`)."""
    return _memory.max_allocated(_lc(device))


def reset_peak_memory_stats(device=None) -> None:
    """Start the peaks over from what the device holds now."""
    _memory.reset_peak(_lc(device))


def reset_max_memory_allocated(device=None) -> None:
    """``torch.cuda``'s older name of :func:`reset_peak_memory_stats`."""
    reset_peak_memory_stats(device)


def memory_stats(device=None) -> dict:
    """``torch.cuda.memory_stats``' names for the buffers live lazy values
    hold: ``allocated_bytes.all.current`` and ``.peak``, ``allocation.all.current``
    and ``.peak`` (buffers), and under ``device.`` what the device's own
    allocator reports (GPUs and TPUs: ``bytes_in_use``, ``peak_bytes_in_use``,
    ``bytes_limit``; nothing on the CPU)."""
    d = _lc(device)
    buffers, nbytes = _memory.current(d)
    peak_buffers, _ = _memory.peak(d)
    stats = {
        "allocated_bytes.all.current": nbytes,
        "allocated_bytes.all.peak": _memory.max_allocated(d),
        "allocation.all.current": buffers,
        "allocation.all.peak": peak_buffers,
    }
    for k, v in pjrt.memory_stats(d.pjrt).items():
        stats[f"device.{k}"] = v
    return stats


def memory_reserved(device=None) -> int:
    """Bytes the device's allocator holds (``bytes_in_use`` where it reports
    it: GPUs, TPUs); on the CPU, whose buffers are freed when dropped (no
    caching allocator of lazycore's in between), :func:`memory_allocated`."""
    d = _lc(device)
    stats = pjrt.memory_stats(d.pjrt)
    return int(stats["bytes_in_use"]) if "bytes_in_use" in stats else memory_allocated(device)


def max_memory_reserved(device=None) -> int:
    """The most :func:`memory_reserved` since the last reset (the allocator's
    peak where it keeps one, else :func:`max_memory_allocated`)."""
    return max_memory_allocated(device)


def mem_get_info(device=None) -> tuple[int, int]:
    """``(free, total)`` bytes of the memory the device's buffers come from:
    its allocator's limit and what is left of it (GPUs, TPUs), or on the CPU
    the host's available and total RAM."""
    return pjrt.memory_info(_lc(device).pjrt)


def empty_cache() -> None:
    """Nothing to release: lazycore keeps no caching allocator of its own (a
    buffer no live value holds is freed when dropped), and PJRT's allocator
    (GPUs, TPUs) offers no call to shrink its pool. Here so device-agnostic
    code (``torch.get_device_module(dev).empty_cache()``) runs unchanged."""


def memory_stats_as_nested_dict(device=None) -> dict:
    """:func:`memory_stats` nested at its dots (``torch.cuda``'s form)."""
    nested: dict = {}
    for key, value in memory_stats(device).items():
        *path, leaf = key.split(".")
        node = nested
        for part in path:
            node = node.setdefault(part, {})
        node[leaf] = value
    return nested


def reset_accumulated_memory_stats(device=None) -> None:
    """Nothing to reset: lazycore counts no allocations or frees over time
    (``torch.cuda``'s ``.allocated`` and ``.freed`` figures), only what is held
    now and the peak, which :func:`reset_peak_memory_stats` resets. The device
    index is still checked, as ``torch.cuda`` does."""
    _lc(device)


def memory_cached(device=None) -> int:
    """``torch.cuda``'s deprecated name of :func:`memory_reserved`."""
    return memory_reserved(device)


def max_memory_cached(device=None) -> int:
    """``torch.cuda``'s deprecated name of :func:`max_memory_reserved`."""
    return max_memory_reserved(device)


def reset_max_memory_cached(device=None) -> None:
    """``torch.cuda``'s deprecated name: resets the peaks (:func:`reset_peak_memory_stats`)."""
    reset_peak_memory_stats(device)


def _size(n: int) -> str:
    for unit in ("B  ", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:7.0f} {unit}" if unit == "B  " else f"{n:7.2f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def memory_summary(device=None, abbreviated: bool = False) -> str:
    """A printable table of :func:`memory_stats` (``torch.cuda.memory_summary``'s
    use: print it when memory runs short): bytes and buffers live lazy values
    hold, now and at the peak, then the device allocator's own figures where
    it keeps them. ``abbreviated`` is accepted for ``torch.cuda``'s signature;
    the table is short either way."""
    index = _index(device)
    stats = memory_stats(index)
    free, total = mem_get_info(index)
    rows = [
        ("Allocated memory", _size(stats["allocated_bytes.all.current"]), _size(stats["allocated_bytes.all.peak"])),
        ("Buffers", f"{stats['allocation.all.current']:11d}", f"{stats['allocation.all.peak']:11d}"),
        ("Reserved memory", _size(memory_reserved(index)), _size(max_memory_reserved(index))),
    ]
    rows += [(f"device.{k[len('device.'):]}", f"{v:11d}" if not k.endswith("bytes") else _size(v), "")
             for k, v in stats.items() if k.startswith("device.")]
    rule = "|" + "=" * 62 + "|"
    lines = [rule, f"| {'lazycore memory summary, device lazy:' + str(index) + ' (' + _lc(index).name + ')':<60} |",
             f"| {'free ' + _size(free).strip() + ' of ' + _size(total).strip():<60} |", rule,
             f"| {'Metric':<32}| {'Cur Usage':>12} | {'Peak Usage':>12} |", "|" + "-" * 62 + "|"]
    lines += [f"| {name:<32}| {cur:>12} | {peak:>12} |" for name, cur, peak in rows]
    lines.append(rule)
    return "\n".join(lines) + "\n"


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Every lazy device computes in bfloat16 (XLA lowers it on every platform),
    so code that picks bfloat16 only where ``is_bf16_supported()`` says so takes it."""
    return True
