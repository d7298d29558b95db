"""Several processes, one program: ``lazycore.distributed.initialize()``.

Each process runs the same script (SPMD, as with ``torchrun`` or
``jax.distributed``). :func:`initialize` joins them through jax.distributed's
coordination service, before anything uses a device; then a
:class:`~lazycore.runtime.device.Mesh` made without ``devices=`` spans the
devices of every process, a barrier compiles one program for all of them
and each process runs its devices' part (on the CPU, collectives between
processes go through gloo). Values of single devices stay local to their
process.

Inputs: ``lazycore.shard(local, mesh, spec, local=True)`` makes a global
value from each process's part of it (its devices' blocks, together);
``lazycore.shard(array, mesh, spec)`` takes the same global array in every
process. Reading a value of such a mesh gathers it from every process: every
process must read it (a collective), as every process runs every step.

A process of the group that dies (killed, crashed) makes the others' next
read raise :class:`PeerLost` naming it, and they exit with Python's status,
not jax.distributed's fatal error (:mod:`lazycore.runtime.peers`).
"""

from __future__ import annotations

import os

from lazycore.runtime import pjrt
from lazycore.runtime.peers import PeerLost

__all__ = ["PeerLost", "device_count", "initialize", "is_initialized", "local_rank", "process_count", "process_index"]

_STATE = {"joined": False, "local_rank": None}
"""This process's membership: set once by :func:`initialize`."""


def initialize(coordinator_address: str | None = None, num_processes: int | None = None,
               process_id: int | None = None, local_device_ids=None, *,
               timeout_s: int = 300, heartbeat_timeout_s: int = 100) -> None:
    """Join the group of processes running this script.

    Arguments default to the environment ``torchrun`` sets: ``WORLD_SIZE``
    processes, this one ``RANK``; the coordinator listens on ``MASTER_ADDR``
    at port ``MASTER_PORT + 1`` (torchrun's own store holds ``MASTER_PORT``);
    ``LAZYCORE_COORDINATOR`` (``host:port``) names another. ``LOCAL_RANK`` is
    kept (:func:`local_rank`); ``local_device_ids`` picks this process's
    accelerators (one per process on a GPU host: ``[local_rank()]``).
    Processes wait up to ``timeout_s`` for each other to join; a process that
    stops answering for ``heartbeat_timeout_s`` makes the others fail.

    Raises ValueError for missing or inconsistent arguments, RuntimeError when
    called twice or after a device was used (jax's clients exist then)."""
    if _STATE["joined"]:
        raise RuntimeError("lazycore.distributed.initialize() was called already in this process")
    env = os.environ
    if coordinator_address is None:
        coordinator_address = env.get("LAZYCORE_COORDINATOR")
    if coordinator_address is None and env.get("MASTER_ADDR") and env.get("MASTER_PORT"):
        coordinator_address = f"{env['MASTER_ADDR']}:{int(env['MASTER_PORT']) + 1}"
    num_processes = _number(num_processes, "WORLD_SIZE", "num_processes")
    process_id = _number(process_id, "RANK", "process_id")
    missing = [name for name, v in (("coordinator_address (or MASTER_ADDR and MASTER_PORT)", coordinator_address),
                                    ("num_processes (or WORLD_SIZE)", num_processes),
                                    ("process_id (or RANK)", process_id)) if v is None]
    if missing:
        raise ValueError(f"lazycore.distributed.initialize: no {', no '.join(missing)}; pass them or run under torchrun")
    if not 0 <= process_id < num_processes:
        raise ValueError(f"lazycore.distributed.initialize: process_id {process_id} is not in [0, {num_processes})")
    if pjrt.backends_started():
        raise RuntimeError(
            "lazycore.distributed.initialize() must run before anything uses a device (a lazy value, a mesh, "
            "lazycore.devices()): call it first in the script"
        )
    pjrt.join_processes(coordinator_address, num_processes, process_id, local_device_ids, timeout_s,
                        heartbeat_timeout_s)
    _STATE["joined"] = True
    _STATE["local_rank"] = _number(None, "LOCAL_RANK", "local_rank")
    if num_processes > 1:
        # gloo prints a line to stdout for each connection between processes: these, used by jax's
        # checks when a value is put on a mesh over the processes, are made at once, with the line dropped
        pjrt.connect_processes()


def _number(value, variable: str, what: str) -> int | None:
    if value is not None:
        return int(value)
    text = os.environ.get(variable)
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"lazycore.distributed.initialize: {variable}={text!r} is not a number ({what})") from None


def is_initialized() -> bool:
    return _STATE["joined"]


def process_index() -> int:
    """This process's rank (0 in a single process)."""
    return pjrt.process_index()


def process_count() -> int:
    """How many processes run together (1 without :func:`initialize`)."""
    return pjrt.process_count()


def device_count() -> int:
    """How many devices a mesh made without ``devices=`` spans: those of the
    best platform there is (an accelerator, else the CPU), in every process."""
    every = pjrt.global_devices()
    platforms = {d.platform for d in every}
    best = next((p for p in platforms if p != "cpu"), "cpu")
    return sum(d.platform == best for d in every)


def local_rank() -> int | None:
    """``LOCAL_RANK`` as :func:`initialize` read it (None when it was not set)."""
    return _STATE["local_rank"]
