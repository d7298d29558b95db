"""A process of the group that dies: one clear error, a normal exit.

jax.distributed notices a dead process only by its missing heartbeats
(``heartbeat_timeout_s``); then, or when the coordination service is gone,
its client ends every other process with a fatal error (SIGABRT and a native
stack), and a process whose group is broken aborts the same way at exit, in
jax's shutdown barrier. A collective that reads from a dead process fails at
once, with gloo's error about a closed connection that names no process.

So :func:`start` (called by ``lazycore.distributed.initialize()``) keeps a
connection of its own to every other process of the group, over TCP on the
interface that reaches the coordinator, watched by a daemon thread: a
connection that closes without the goodbye a process sends at exit names the
process that died (killed, crashed) at once. Then:

- a read of a value of the group that fails, or waits for the dead process
  (:func:`collective`), raises :class:`PeerLost` naming the process, once;
  later reads and programs of the group raise it before touching jax (they
  would hang or fail the same way);
- a process stuck in a collective that will never finish (one compiled into
  a program waits for the dead process's part) is ended after a grace period
  (half the heartbeat timeout, at most 10 s, so before jax's fatal error): the
  PeerLost message and the Python stack of its main thread go to stderr and
  it exits with status 1, as for an uncaught exception;
- at exit, a process whose group is broken skips jax's shutdown (its barrier
  waits for the dead process and then aborts) and the native libraries'
  teardown (their destructors wait for the collective that never ends): the
  C library's exit hands Python's status to ``_exit``, so it is Python's
  (1 after an uncaught exception, 0 when the script caught the error).

The coordination service runs in a process of its own
(:mod:`lazycore.runtime.coordinator`), so process 0 dying is one process
dying like any other. What stays jax.distributed's: a process that outlives a
dead member by more than the heartbeat timeout is still ended by its fatal
error (the service's heartbeat check), and so is every process when the
service's own process is killed (a client aborts at once when it loses the
service, before anything here runs).
"""

from __future__ import annotations

import atexit
import ctypes
import os
import selectors
import socket
import struct
import sys
import threading
import time
import traceback

from lazycore.runtime import nativeout

__all__ = ["PeerLost", "broken", "check", "collective", "failed", "start"]

_HELLO = b"R"
_BYE = b"B"
_HELLO_SIZE = 1 + 16 + 4
"""The first bytes a connection brings: :data:`_HELLO`, the token, the rank."""


class PeerLost(RuntimeError):
    """A process of the group died (or exited) while this one needed it;
    ``process`` is its index, ``how`` ``"died"`` or ``"exited"``."""

    def __init__(self, message: str, process: int, how: str):
        super().__init__(message)
        self.process = process
        self.how = how


class _Watch:
    def __init__(self, client, rank: int, count: int, coordinator: str, timeout_s: float, heartbeat_s: float):
        self.rank, self.count, self.heartbeat_s = rank, count, heartbeat_s
        self.grace_s = max(1.0, min(10.0, heartbeat_s / 2))
        self.lost: dict[int, str] = {}
        self.first_death: float | None = None
        self.first_loss: float | None = None
        self.said_bye: set[int] = set()
        self.raised = False
        self.exiting = False
        self.changed = threading.Condition()
        self.selector = selectors.DefaultSelector()
        self.peers: dict[int, socket.socket] = {}
        host = _local_address(coordinator)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.listener = socket.create_server((host, 0), family=family, backlog=max(count, 8))
        self.listener.setblocking(False)
        self.selector.register(self.listener, selectors.EVENT_READ, None)
        # a connection must bring the token published beside the address (only the group reads it)
        self.token = os.urandom(16)
        client.key_value_set(f"lazycore/peers/{rank}",
                             f"{self.token.hex()}@{host}:{self.listener.getsockname()[1]}")
        for j in range(rank):  # each pair: the higher rank connects, the lower accepts
            where = client.blocking_key_value_get(f"lazycore/peers/{j}", int(timeout_s * 1000))
            token, address = where.split("@", 1)
            peer_host, port = address.rsplit(":", 1)
            s = socket.create_connection((peer_host.strip("[]"), int(port)), timeout=timeout_s)
            s.sendall(_HELLO + bytes.fromhex(token) + struct.pack("<I", rank))
            self._add(s, j)
        self.thread = threading.Thread(target=self._run, name="lazycore-peers", daemon=True)
        self.thread.start()

    def _add(self, s: socket.socket, j: int) -> None:
        s.setblocking(False)
        self.peers[j] = s
        self.selector.register(s, selectors.EVENT_READ, j)

    def _run(self) -> None:
        while True:
            for key, _ in self.selector.select():
                if key.data is None:
                    self._accept()
                    continue
                j = key.data
                if j == -1:  # an observer: read and drop
                    try:
                        if not key.fileobj.recv(64):
                            raise OSError("closed")
                    except BlockingIOError:
                        pass
                    except OSError:
                        self.selector.unregister(key.fileobj)
                        key.fileobj.close()
                    continue
                try:
                    data = key.fileobj.recv(64)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if _BYE in data:
                    self.said_bye.add(j)
                if not data:
                    self.selector.unregister(key.fileobj)
                    key.fileobj.close()
                    self._lost(j, "exited" if j in self.said_bye else "died")

    def _accept(self) -> None:
        try:
            s, _ = self.listener.accept()
        except OSError:
            return
        try:
            s.settimeout(10)
            hello = b""
            while len(hello) < _HELLO_SIZE:
                part = s.recv(_HELLO_SIZE - len(hello))
                if not part:
                    raise OSError("closed")
                hello += part
        except OSError:
            s.close()
            return
        j = struct.unpack("<I", hello[17:])[0]
        if hello[:1] != _HELLO or hello[1:17] != self.token or not self.rank < j <= self.count or j in self.peers:
            s.close()
            return
        if j == self.count:  # the coordination service's process watching this one: nothing to watch back
            s.setblocking(False)
            self.selector.register(s, selectors.EVENT_READ, -1)
            return
        self._add(s, j)

    def _lost(self, j: int, how: str) -> None:
        with self.changed:
            self.lost.setdefault(j, how)
            if self.first_loss is None:
                self.first_loss = time.monotonic()
            if how == "died" and self.first_death is None:
                self.first_death = time.monotonic()
            self.changed.notify_all()
        if how == "died" and not self.exiting:
            threading.Thread(target=self._end_if_stuck, name="lazycore-peers-grace", daemon=True).start()

    def message(self, j: int | None = None) -> tuple[str, int, str]:
        if j is None:
            j = min(self.lost, key=lambda k: (self.lost[k] != "died", k))
        how = self.lost[j]
        if how == "died":
            text = (f"process {j} of {self.count} died: its connection to process {self.rank} closed without "
                    f"the goodbye a process sends at exit (killed or crashed); the group cannot go on")
        else:
            text = f"process {j} of {self.count} exited while process {self.rank} still needed it"
        return text, j, how

    def error(self, cause: BaseException | None = None) -> PeerLost:
        text, j, how = self.message()
        if cause is not None:
            text += f" ({type(cause).__name__}: {str(cause).splitlines()[0][:300]})"
        self.raised = True
        return PeerLost("lazycore: " + text, j, how)

    def _end_if_stuck(self) -> None:
        """The main thread's distributed call never returns (a collective
        inside a program waits for the dead process): end the process."""
        time.sleep(self.grace_s)
        if self.raised or self.exiting:
            return
        text, j, how = self.message()
        main = sys._current_frames().get(threading.main_thread().ident)
        stack = "".join(traceback.format_stack(main)) if main is not None else ""
        try:
            nativeout.restore()  # what the main thread's window holds reaches stdout before _exit
            sys.stdout.flush()
        except Exception:
            pass
        try:
            sys.stderr.write(f"Traceback (most recent call last):\n{stack}"
                             f"{__name__}.PeerLost: lazycore: {text}; this process waited {self.grace_s:g} s in a "
                             f"collective that cannot finish and exits\n")
            sys.stderr.flush()
        finally:
            os._exit(1)

    def at_exit(self) -> None:
        self.exiting = True
        for s in list(self.peers.values()):
            try:
                s.setblocking(True)
                s.settimeout(1)
                s.sendall(_BYE)
            except OSError:
                pass
        if self.lost:
            _skip_jax_shutdown()
            _exit_at_exit()


_WATCH: list[_Watch] = []


def _local_address(coordinator: str) -> str:
    """The address of this host's interface that reaches ``coordinator``."""
    host = coordinator.rsplit(":", 1)[0].strip("[]")
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect((host, 9))
            return s.getsockname()[0]
    except OSError:
        return "127.0.0.1"


def _skip_jax_shutdown() -> None:
    """Keep jax's exit hook from shutting the distributed runtime down (its
    barrier would wait for the dead process, then abort): its client and
    service are dropped from jax's state and never destroyed (their
    destructors would shut down the same way); the process is ending."""
    from jax._src import distributed, xla_bridge

    state = distributed.global_state
    for name in ("preemption_sync_manager", "client", "service"):
        obj = getattr(state, name, None)
        if obj is not None:
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))
            setattr(state, name, None)
    # the clients too: destroying one waits for its threads, one of them in a collective that never ends
    for client in list(xla_bridge._backends.values()):
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(client))


def _exit_at_exit() -> None:
    """Make the C library's ``exit`` end the process at once with the status
    Python gives it (``on_exit`` passes the status to ``_exit``), before the
    native libraries' destructors, which wait for collectives of the dead
    process that never finish."""
    libc = ctypes.CDLL(None)
    on_exit = getattr(libc, "on_exit", None)  # glibc's; elsewhere the teardown runs as it is
    if on_exit is None:
        return
    handler = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_void_p)(ctypes.cast(libc._exit, ctypes.c_void_p).value)
    _KEEP.append(handler)
    on_exit(handler, None)


_KEEP: list = []


def start(client, rank: int, count: int, coordinator: str, timeout_s: float, heartbeat_timeout_s: float,
          service=None) -> None:
    """Watch the other processes of the group (module doc); after jax.distributed joined them.
    ``service``: in process 0, the coordination service's process
    (:class:`lazycore.runtime.coordinator.Remote`), told where the others' watches listen."""
    if count < 2 or _WATCH:
        return
    watch = _Watch(client, rank, count, coordinator, timeout_s, heartbeat_timeout_s)
    _WATCH.append(watch)
    if service is not None:
        for j in range(1, count):
            service.tell("peer " + client.blocking_key_value_get(f"lazycore/peers/{j}", int(timeout_s * 1000)))
    # after jax's own exit hook was registered, so this one runs first
    atexit.register(watch.at_exit)


def broken() -> bool:
    """Whether a process of the group is gone."""
    return bool(_WATCH) and bool(_WATCH[0].lost)


def check() -> None:
    """Raise :class:`PeerLost` when a process of the group is gone (before a
    collective that would hang or fail)."""
    if _WATCH and _WATCH[0].lost:
        raise _WATCH[0].error()


def failed(error: BaseException, wait_s: float = 3.0) -> None:
    """After ``error`` from a collective: raise :class:`PeerLost` from it when
    a process of the group is gone (waiting up to ``wait_s`` for the watch to
    see a connection close); return otherwise (the caller raises ``error``)."""
    if not _WATCH:
        return
    watch = _WATCH[0]
    text = str(error).lower()
    if not any(w in text for w in ("gloo", "connection", "peer", "unavailable", "socket", "heartbeat")):
        wait_s = 0.0  # not a lost connection: no need to wait for the watch
    with watch.changed:
        watch.changed.wait_for(lambda: watch.lost, timeout=wait_s)
    if watch.lost:
        raise watch.error(error) from None


SETTLE_S = 2.0
"""How long a collective may still finish after a process of the group is
gone (its part may have arrived) before :func:`collective` gives up on it.
0.5 s was too short on a loaded 2-core machine: a gather whose parts had all
arrived was reported lost (test_clean_exits, under the suite's two workers)."""


def collective(fn):
    """``fn()``, a collective, run in a daemon thread while the caller waits:
    :class:`PeerLost` when a process of the group is gone and it has not
    finished :data:`SETTLE_S` later (it may never return: the thread is left
    to the process's end); ``fn``'s result or exception otherwise."""
    if not _WATCH:
        return fn()
    watch = _WATCH[0]
    box: dict = {}
    done = threading.Event()

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:  # handed to the caller
            box["error"] = e
        finally:
            done.set()

    threading.Thread(target=run, name="lazycore-collective", daemon=True).start()
    while not done.wait(0.05):
        if watch.first_loss is not None and time.monotonic() - watch.first_loss > SETTLE_S and not done.is_set():
            raise watch.error() from None
    if "error" in box:
        raise box["error"]
    return box["value"]
