"""``lazycore.torch.DeviceLoader``: batches uploaded in the background, a step per batch.

    for x, y in ltorch.DeviceLoader(loader, dev):
        loss = train_step(x, y)          # no mark_step: the loader marks each step

PyTorch/XLA's ``MpDeviceLoader`` habit. A thread iterates the user's loader
and copies each batch's CPU tensors to the device (:class:`lazycore.trace.core.Upload`)
while the current step traces and runs; the tracing thread only wraps the
copied buffers as lazy tensors when it takes the batch. Taking the next batch
marks the step (``mark_step()``), and so does the end of the data, so a loop
over the loader needs no barrier of its own.
"""

from __future__ import annotations

import queue
import threading
from typing import NamedTuple

import torch
from torch.utils import _pytree as pytree

from lazycore.runtime import buckets
from lazycore.trace import core

from . import dtypes
from .tensor import lc_device, wrap

_DONE = object()


class _Padded(NamedTuple):
    """A batch's tensor uploaded padded along ``dim`` (``DeviceLoader(dynamic=dim)``)."""

    upload: core.Upload
    shape: tuple
    dim: int


class DeviceLoader:
    """Iterate ``loader`` with its batches' tensors on the lazy ``device``.

    ``prefetch``: batches copied ahead of the one in use. ``mark_step``: mark
    the step when the next batch is taken and when the data ends.
    ``dynamic``: a dimension (the batch's, 0) that every tensor of a batch
    has marked dynamic (:func:`lazycore.torch.dynamic`): an epoch's last,
    smaller batch then runs the program of the others' bucket. The tensors
    are uploaded padded to their bucket, so the barrier pads nothing."""

    def __init__(self, loader, device, prefetch: int = 2, mark_step: bool = True, dynamic: int | None = None):
        if prefetch < 1:
            raise ValueError(f"prefetch must be at least 1, got {prefetch}")
        self.dynamic = dynamic
        self.loader = loader
        self.device = torch.device(device)
        self.lc_device = lc_device(self.device)
        self.prefetch = prefetch
        self.mark_step = mark_step

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self):
        return _Iterator(self)


class _Iterator:
    def __init__(self, owner: DeviceLoader):
        self.owner = owner
        self.queue: queue.Queue = queue.Queue(owner.prefetch)
        self.stop = threading.Event()
        self.started = False
        self.thread = threading.Thread(target=self._fill, name="lazycore-device-loader", daemon=True)
        self.thread.start()

    def _fill(self) -> None:
        """The background thread: read and copy batches until the data or the iterator ends."""
        try:
            for batch in self.owner.loader:
                leaves, spec = pytree.tree_flatten(batch)
                copied = [self._copy(x) for x in leaves]
                if not self._put((copied, spec)):
                    return
        except BaseException as e:  # raised again where the batch is taken
            self._put(e)
            return
        self._put(_DONE)

    def _copy(self, x):
        if type(x) is torch.Tensor and x.device.type == "cpu" and x.dim() and not x.requires_grad:
            host = dtypes.to_numpy(x)
            dim = self.owner.dynamic
            if dim is not None and host.ndim > dim:  # uploaded padded to its bucket
                return _Padded(core.Upload(buckets.pad_host(host, dim), self.owner.lc_device), host.shape, dim)
            return core.Upload(host, self.owner.lc_device)
        return x  # taken to the device as ``.to`` takes it (a 0-d tensor is a scalar parameter)

    def _put(self, item) -> bool:
        while not self.stop.is_set():
            try:
                self.queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def __iter__(self):
        return self

    def __next__(self):
        if self.owner.mark_step and self.started:
            core.mark_step()  # the step that used the last batch
        self.started = True
        item = self.queue.get()
        if item is _DONE or isinstance(item, BaseException):
            self.close()
            if isinstance(item, BaseException):
                raise item
            raise StopIteration
        copied, spec = item
        return pytree.tree_unflatten([self._claim(x) for x in copied], spec)

    def _claim(self, x):
        if type(x) is _Padded:  # the batch's own size: a cut of the padded upload
            handle = x.upload.claim()
            value = buckets.cut(handle.value.node, x.shape, x.dim)
            return wrap(core.LazyTensor(value, handle.device), owned=True)
        if type(x) is core.Upload:
            return wrap(x.claim(), owned=True)  # dense and row-major, as ``.to(device)`` makes it
        if isinstance(x, torch.Tensor) and x.device.type == "cpu":
            return x.to(self.owner.device)
        return x

    def close(self) -> None:
        """Stop the background thread (a loop that breaks early)."""
        self.stop.set()
        while True:  # unblock a thread waiting to put
            try:
                self.queue.get_nowait()
            except queue.Empty:
                break

    def __del__(self):
        self.stop.set()
