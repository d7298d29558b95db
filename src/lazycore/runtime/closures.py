"""Step closures: Python run after a step's program, at no extra program.

``lazycore.add_step_closure(fn, args)`` (``lazycore.torch.add_step_closure``,
as PyTorch/XLA's ``xm.add_step_closure``) queues ``fn(*args)`` for the end of
the step: the next ``mark_step`` runs the step's program, waits for it and
then calls the step's closures, in the order they were added. The arguments
are held until then, so a lazy value among them is a live pending value when
the barrier runs: one of the step's program outputs. Reading it in the
closure (``loss.item()``) copies that result to the host; it runs no program
of its own, so logging a loss every step costs no program the loop would not
run anyway.

Errors: a closure that raises stops the step's closures there (the rest of
that step's are dropped, as PyTorch/XLA does) and ``mark_step`` raises
:class:`StepClosureError` naming the closure and the line that added it, the
closure's exception as ``__cause__``.

``run_async=True``: the closure runs on a worker thread once the step's
program has finished, so ``mark_step`` does not wait for the program (the
next step traces meanwhile). Asynchronous closures run in the order they were
added among themselves; an error in one is raised (as above) by the next
``mark_step``, or by :func:`wait`, which returns once every queued
asynchronous closure has run.

Threads: the queue is shared by all threads (as the step is: ``mark_step`` in
any thread runs everyone's pending work), written under
:data:`lazycore.ir.context.LOCK`. ``mark_step`` takes the step's closures
right after its barrier and calls them still holding the lock (as a read
would), so steps' closures run one step after the other, each thread's in
the order it added them, and a closure another thread adds meanwhile belongs
to the next step.
Closures run only at ``mark_step`` (``lazycore.mark_step``,
``lazycore.torch.mark_step``, ``optimizer_step``); reads and automatic step
barriers do not run them.
"""

from __future__ import annotations

import queue
import threading

from lazycore.ir.context import LOCK
from lazycore.ir.sourceloc import caller, format_location
from lazycore.runtime import device as _device

PENDING: list = []
"""``(fn, args, location, run_async)`` of the closures added since the last ``mark_step``."""


class StepClosureError(RuntimeError):
    """A step closure raised; its exception is the ``__cause__``."""


def add_step_closure(fn, args=(), run_async: bool = False) -> None:
    """Call ``fn(*args)`` once the step's program (the next ``mark_step``'s)
    has run; lazy values in ``args`` hold that program's results then."""
    if not callable(fn):
        raise TypeError(f"add_step_closure: fn must be callable, got {type(fn).__name__}")
    args = tuple(args)
    loc = caller()
    with LOCK:
        PENDING.append((fn, args, loc, bool(run_async)))


def queued() -> int:
    """How many closures wait for the next ``mark_step`` (a captured step's
    recording refuses a call that added one: :func:`lazycore.trace.capture.check`)."""
    return len(PENDING)


def take():
    """The closures of the step a barrier just ran (under ``LOCK``), and the
    programs they wait for: ``(closures, launches)``."""
    step = PENDING[:]
    PENDING.clear()
    launches = [d.running for d in _device.known_devices() if d.running is not None]
    return step, launches


def _error(fn, loc, e: BaseException) -> StepClosureError:
    name = getattr(fn, "__qualname__", None) or repr(fn)
    err = StepClosureError(
        f"step closure {name} (added at {format_location(loc)}) raised {type(e).__name__}: {e}")
    err.__cause__ = e
    return err


def run(step) -> None:
    """Call a step's closures (under ``LOCK``): the synchronous ones now,
    after the step's programs have finished; the asynchronous ones queued for
    the worker. Raises an earlier asynchronous closure's error first."""
    _raise_async()
    closures, launches = step
    sync = [c for c in closures if not c[3]]
    later = [c for c in closures if c[3]]
    if later:
        _worker().put((later, launches))
    if not sync:
        return
    for d in _device.known_devices():  # the step's programs have finished
        d.wait()
    for fn, args, loc, _ in sync:
        try:
            fn(*args)
        except Exception as e:
            raise _error(fn, loc, e) from e


# --- asynchronous closures --------------------------------------------------------

_QUEUE: queue.Queue | None = None
ERRORS: list = []
_START = threading.Lock()


def _worker() -> queue.Queue:
    global _QUEUE
    with _START:
        if _QUEUE is None:
            _QUEUE = queue.Queue()
            threading.Thread(target=_serve, args=(_QUEUE,), name="lazycore-step-closures", daemon=True).start()
    return _QUEUE


def _serve(q: queue.Queue) -> None:
    while True:
        closures, launches = q.get()
        try:
            for launch in launches:
                try:
                    launch.done.block_until_ready()  # without LOCK: the next step traces meanwhile
                except Exception:
                    pass  # a failed program: reading its values raises (the closure's error)
            for fn, args, loc, _ in closures:
                if ERRORS:
                    break  # a step's closures stop at the first error
                try:
                    fn(*args)
                except Exception as e:
                    ERRORS.append(_error(fn, loc, e))
        finally:
            q.task_done()


def _raise_async() -> None:
    if ERRORS:
        err = ERRORS.pop(0)
        ERRORS.clear()
        raise err


def wait() -> None:
    """Return once every queued asynchronous closure has run; raise the first
    error one of them raised (:class:`StepClosureError`). Not from inside a
    closure or an op (the queued closures' reads would wait for this thread)."""
    if _QUEUE is not None and LOCK._is_owned():
        raise RuntimeError("wait_step_closures() from inside a step closure or a lazycore call would never "
                           "return: the asynchronous closures' reads wait for this thread")
    if _QUEUE is not None:
        _QUEUE.join()
    _raise_async()


wait_step_closures = wait
