"""PyTorch's own entry points for the ``lazy`` device type answer for lazycore.

PyTorch reserves the ``lazy`` device type for its Lazy Tensor Core (LTC);
lazycore implements that type (its ``Lazy`` dispatch key kernels live in
:mod:`lazycore.frontends.torch`), so the places where PyTorch asks "the lazy
backend" are answered here, once, when ``lazycore.torch`` is imported:

- ``torch._lazy``'s functions are thin Python wrappers over bindings in
  ``torch._C._lazy`` that talk to LTC's backend registry (no backend is
  registered: "Lazy tensor backend not registered"). The bindings behind
  ``mark_step``, ``wait_device_ops``, ``sync_multi`` (``to_cpu``, ``save``)
  and ``torch._lazy.metrics`` are replaced by lazycore's, so torch's wrappers
  keep their own logic (step closures) and reach lazycore. ``torch._lazy`` is
  imported: PyTorch's test utilities call ``torch._lazy.mark_step()`` on lazy
  results without importing it.
- ``torch.lazy`` is registered as the device module
  (:mod:`.device_module`), what ``torch.get_device_module``,
  ``torch.random.fork_rng`` and ``torch.utils.checkpoint`` consult.
- ``torch.manual_seed`` and ``torch.seed`` reseed every lazy generator:
  both call ``torch.random._seed_custom_device(seed)``, the one place torch
  seeds devices beyond the built-in ones (meant for the PrivateUse1 backend),
  looked up at each call; it is wrapped to seed the lazy generators too.
- ``torch.Generator(device="lazy")`` makes a generator of the lazy device
  (torch's constructor asks the device type's accelerator hooks, which a
  Python backend cannot register): see :class:`.device_module.LazyGenerator`.
- ``torch.compile`` of a function given lazy tensors runs it as written,
  whatever the backend: see :func:`_dynamo_rules_on_compile`.
- ``torch.autocast("lazy", ...)``: see :mod:`.autocast`.
- ``Module._apply`` (``model.to(lazy)``, ``model.cpu()``) keeps parameter
  identity, so tied weights stay tied: see :mod:`.modules`.
- ``torch.cond``, ``torch._higher_order_ops.while_loop`` and ``scan`` on
  lazy tensors record loops and branches: see :mod:`.control`.
- ``torch.utils.checkpoint`` recomputes through an optimization barrier:
  see :mod:`.checkpoint`.
- ``torch.nn.utils``' gradient clipping takes ``foreach=True`` on the lazy
  device, as on the CPU: see :func:`_allow_foreach_clipping`.
- ``make_fx`` over real tensors (``torch.func.linearize`` traces its jvp so)
  records a lazy tensor's ops as it records a CPU tensor's: see
  :func:`_trace_as_plain_tensors`.
"""

from __future__ import annotations

import functools
import sys

import torch

from lazycore.observe import metrics
from lazycore.runtime import transfer

from . import autocast, checkpoint, control, device_module, modules
from .ops.random import GENERATORS
from .tensor import Tensor, lc_device

_U64 = 0xFFFFFFFFFFFFFFFF


# --- torch._lazy -----------------------------------------------------------------------


def _lc_devices(devices):
    """lazycore devices named by LTC's device strings; all of them for none."""
    if not devices:
        return None
    return [lc_device(torch.device(d)) for d in devices]


def _mark_step(device: str = "", devices=(), wait: bool = True) -> None:
    named = list(devices) + ([device] if device else [])
    transfer.mark_step(wait=wait, devices=_lc_devices(named))


def _wait_device_ops(devices=()) -> None:
    from lazycore.runtime import device as _device

    for d in _lc_devices(devices) or _device.known_devices():
        d.wait()


def _sync_multi(tensors, devices, wait: bool = True, sync_ltc_data: bool = True) -> None:
    # a barrier runs every pending live value of a device, the given ones included
    named = {t.device for t in tensors if isinstance(t, torch.Tensor) and t.device.type == "lazy"}
    named.update(torch.device(d) for d in devices)
    if named:
        transfer.mark_step(wait=wait, devices=[lc_device(d) for d in named])


def _counter_names() -> list[str]:
    return list(metrics.counters())


def _counter_value(name: str):
    return metrics.counters().get(name)


def _get_default_device_type() -> str:
    return "lazy"  # LTC's backend names its device type; step closures are kept per type


_LAZY_BINDINGS = {
    "_get_default_device_type": _get_default_device_type,
    "_mark_step": _mark_step,
    "_wait_device_ops": _wait_device_ops,
    "_sync_multi": _sync_multi,
    "_reset_metrics": metrics.reset,
    "_counter_names": _counter_names,
    "_counter_value": _counter_value,
    "_metrics_report": metrics.report,
}


def _route_torch_lazy() -> None:
    import torch._C._lazy as bindings
    import torch._lazy  # noqa: F401  (torch.testing calls torch._lazy.mark_step() unimported)
    import torch._lazy.metrics  # noqa: F401

    for name, fn in _LAZY_BINDINGS.items():
        setattr(bindings, name, fn)


# --- seeding -----------------------------------------------------------------------------


def _wrap_seeding() -> None:
    seed_devices = torch.random._seed_custom_device
    if getattr(seed_devices, "_lazycore", False):
        return

    def _seed_custom_device(seed) -> None:
        seed_devices(seed)
        seed = int(seed)
        # out of torch's range, default_generator.manual_seed raises right after
        if -(1 << 63) <= seed <= _U64:
            GENERATORS.reseed_all(seed & _U64)

    _seed_custom_device._lazycore = True
    _seed_custom_device.__doc__ = seed_devices.__doc__
    torch.random._seed_custom_device = _seed_custom_device


# --- make_fx ---------------------------------------------------------------------------------


def _trace_as_plain_tensors() -> None:
    """make_fx's proxy mode records an op only on the tensor types it knows
    (``HANDLED_TYPES``, read at each op); on any other subclass it hands the
    op to the subclass with the mode still on, so it recorded the meta and
    host tensors lazycore's dispatch makes inside, and each lazy result
    became a constant of the graph: ``torch.func.linearize``'s jvp function
    returned the values seen while tracing (zeros) for every tangent. A lazy
    tensor holds no Python-visible inner tensors for the mode to trace
    through, so it is a plain tensor to make_fx, as an XLA tensor is."""
    from torch.fx.experimental import proxy_tensor

    if Tensor not in proxy_tensor.HANDLED_TYPES:
        proxy_tensor.HANDLED_TYPES = (*proxy_tensor.HANDLED_TYPES, Tensor)


# --- foreach=True in gradient clipping ------------------------------------------------------


def _allow_foreach_clipping() -> None:
    """``clip_grad_norm_``, ``clip_grad_value_``, ``get_total_norm`` and
    ``clip_grads_with_norm_`` refuse ``foreach=True`` on a device type outside
    torch's list of devices with foreach kernels (which has the CPU): a user's
    ``foreach=True`` raised "can't use the foreach API on lazy tensors" where
    eager's CPU runs it. Every ``_foreach_*`` op runs on the lazy device
    (:mod:`.foreach`), so the check ``clip_grad`` reads says yes for it;
    ``foreach=None`` takes the per-tensor loop still (that goes through
    another check, as for every device outside the list)."""
    from torch.nn.utils import clip_grad

    check = clip_grad._device_has_foreach_support
    if getattr(check, "_lazycore", False):
        return

    def _device_has_foreach_support(device) -> bool:
        return device.type == "lazy" or check(device)

    _device_has_foreach_support._lazycore = True
    clip_grad._device_has_foreach_support = _device_has_foreach_support


# --- the device module -----------------------------------------------------------------------


def _register_device_module() -> None:
    if getattr(torch, "lazy", None) is not device_module:
        torch._register_device_module("lazy", device_module)
    device_module.install_generator()


def _dynamo_rules_on_compile() -> None:
    """Dynamo's rules for lazy tensors (:mod:`.dynamo`: a compiled function
    given lazy tensors runs as written, under any backend) are in place before
    ``torch.compile`` compiles anything: loaded now if dynamo is, else by the
    first ``torch.compile`` call (importing dynamo costs seconds)."""
    if "torch._dynamo" in sys.modules:
        from . import dynamo  # noqa: F401
        return
    inner = torch.compile
    if getattr(inner, "_lazycore", False):
        return

    @functools.wraps(inner)
    def compile(*args, **kwargs):
        from . import dynamo  # noqa: F401

        return inner(*args, **kwargs)

    compile._lazycore = True
    torch.compile = compile


def install() -> None:
    _route_torch_lazy()
    _dynamo_rules_on_compile()
    _wrap_seeding()
    _register_device_module()
    _trace_as_plain_tensors()
    _allow_foreach_clipping()
    autocast.install()
    checkpoint.install()
    control.install()
    modules.install()
