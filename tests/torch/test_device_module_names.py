"""``torch.lazy`` has the memory functions of ``torch.cuda`` that device-agnostic
code calls through ``torch.get_device_module(device)`` (issue 43 item 6, "what
a user coming from PyTorch/XLA or CUDA would expect"): ``empty_cache``,
``memory_summary``, ``memory_stats_as_nested_dict``, ``reset_accumulated_memory_stats``,
the deprecated ``*_cached`` names, and ``is_bf16_supported``; each raised
AttributeError before. Functions that control the CUDA caching allocator
itself (pools, pluggable allocators, per-process fractions) have no meaning
here and are not offered."""

from __future__ import annotations

import gc

import pytest
import torch

import lazycore.torch as ltorch

# torch.cuda.memory.__all__ less the caching allocator's own controls and the host (pinned) allocator's figures
NOT_OFFERED = {
    "caching_allocator_alloc", "caching_allocator_delete", "caching_allocator_disabled", "caching_allocator_enable",
    "get_per_process_memory_fraction", "set_per_process_memory_fraction", "CUDAPluggableAllocator",
    "change_current_allocator", "MemPool", "use_mem_pool", "get_allocator_backend", "memory_snapshot",
    "list_gpu_processes", "host_memory_stats", "host_memory_stats_as_nested_dict",
    "reset_accumulated_host_memory_stats", "reset_peak_host_memory_stats",
}


def test_torch_cudas_memory_figures_are_all_on_the_lazy_device_module(dev):
    module = torch.get_device_module(dev)
    wanted = sorted(set(torch.cuda.memory.__all__) - NOT_OFFERED)
    assert [name for name in wanted if not callable(getattr(module, name, None))] == []
    assert module.is_bf16_supported() is True


def test_the_new_names_give_the_figures_of_the_ones_they_stand_for(dev):
    gc.collect()
    module = torch.get_device_module(dev)
    keep = torch.ones(1 << 16).to(dev) * 2          # 256 KiB held
    big = torch.ones(1 << 20).to(dev) + 1           # 4 MiB, dropped after the barrier
    ltorch.mark_step()
    del big
    gc.collect()
    assert module.memory_cached() == module.memory_reserved() >= keep.nbytes
    assert module.max_memory_cached() == module.max_memory_reserved() >= 4 << 20
    flat = module.memory_stats()
    nested = module.memory_stats_as_nested_dict()
    assert nested["allocated_bytes"]["all"]["current"] == flat["allocated_bytes.all.current"]
    assert nested["allocation"]["all"]["peak"] == flat["allocation.all.peak"]
    module.reset_max_memory_cached()
    assert module.max_memory_allocated() == module.memory_allocated() < 4 << 20
    module.empty_cache()                             # nothing to release: the live value stays
    module.reset_accumulated_memory_stats()
    assert float(keep[0]) == 2.0 and module.memory_allocated() >= keep.nbytes


def test_memory_summary_prints_the_figures(dev):
    module = torch.get_device_module(dev)
    keep = torch.ones(3, 1000).to(dev)
    ltorch.mark_step()
    text = module.memory_summary()
    stats = module.memory_stats()
    assert "lazycore memory summary, device lazy:0" in text, text
    allocated = next(line for line in text.splitlines() if line.startswith("| Allocated memory"))
    assert f"{stats['allocated_bytes.all.current'] / 1024:.2f} KiB" in allocated, (allocated, stats)
    assert module.memory_summary(0, abbreviated=True) == text
    del keep


def test_an_index_past_the_devices_is_eagers_error(dev):
    module = torch.get_device_module(dev)
    for fn in (module.memory_summary, module.memory_stats_as_nested_dict, module.reset_accumulated_memory_stats):
        with pytest.raises(RuntimeError, match="Invalid device ordinal"):
            fn(module.device_count())
