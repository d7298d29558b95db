"""The group's coordination service, in a process of its own.

jax.distributed runs the coordination service inside process 0, and every
other process's jax client aborts (SIGABRT, a native stack) the moment it
loses the service: killing process 0 killed the whole group that way, before
lazycore could report anything. So ``lazycore.distributed.initialize()``
starts the service in this small process instead (process 0 starts it, with
:func:`start`, and joins it as a client like the others): process 0 dying is
then one process of the group dying (:mod:`lazycore.runtime.peers`).

The process imports only jaxlib. It reads process 0 on its standard input:
the other processes' watch addresses (``peer TOKEN@HOST:PORT``) and
``bye`` when the group shuts down normally (jax's shutdown barrier passed);
then the service stops and the process ends. When its input closes without
``bye`` (process 0 died) it serves the others until each of them has exited
(their watch connections close), at most ``heartbeat`` seconds more (then
the service's own heartbeat check ends them anyway). Run as a script:
``python coordinator.py BIND_ADDRESS PROCESSES HEARTBEAT_S SHUTDOWN_S``.
"""

from __future__ import annotations

import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import time

_HELLO = b"R"


def start(bind_address: str, num_processes: int, heartbeat_s: int, shutdown_s: int):
    """Start the service process; returns it once it serves (raises RuntimeError when it could not start)."""
    proc = subprocess.Popen(
        [sys.executable, "-I", os.path.abspath(__file__), bind_address, str(num_processes), str(heartbeat_s),
         str(shutdown_s)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True,
    )
    ready = proc.stdout.readline()
    if ready.strip() != "ready":
        proc.kill()
        proc.wait()
        raise RuntimeError(f"lazycore.distributed: the coordination service did not start on {bind_address} "
                           f"(its process said {ready!r}; exit status {proc.poll()})")
    return proc


class Remote:
    """Stands for the service in jax's distributed state in process 0: jax's
    shutdown (after its barrier) ends the service process."""

    def __init__(self, proc):
        self.proc = proc

    def tell(self, line: str) -> None:
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except (OSError, ValueError):
            pass

    def shutdown(self) -> None:
        self.tell("bye")
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _watch_others(peers: list[tuple[bytes, str, int]], count: int, limit_s: float) -> None:
    """Wait until every process in ``peers`` has closed its watch connection, or ``limit_s``."""
    selector = selectors.DefaultSelector()
    for token, host, port in peers:
        try:
            s = socket.create_connection((host, port), timeout=5)
            s.sendall(_HELLO + token + struct.pack("<I", count))  # rank ``count``: an observer
            s.setblocking(False)
            selector.register(s, selectors.EVENT_READ)
        except OSError:
            pass  # gone already
    deadline = time.monotonic() + limit_s
    while selector.get_map() and time.monotonic() < deadline:
        for key, _ in selector.select(timeout=max(0.0, deadline - time.monotonic())):
            try:
                data = key.fileobj.recv(64)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                selector.unregister(key.fileobj)
                key.fileobj.close()


def main(argv: list[str]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the group's processes end it, not a terminal's ^C
    bind, count, heartbeat_s, shutdown_s = argv[1], int(argv[2]), int(argv[3]), int(argv[4])
    import jaxlib._jax as _jax
    import jaxlib.utils

    jaxlib.utils.absl_set_min_log_level(1)  # warnings and errors, as the service logs inside a jax process

    service = _jax.get_distributed_runtime_service(bind, count, heartbeat_timeout=heartbeat_s,
                                                   shutdown_timeout=shutdown_s)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    peers = []
    normal = False
    for line in sys.stdin:
        words = line.split()
        if words[:1] == ["peer"]:
            token, address = words[1].split("@", 1)
            host, port = address.rsplit(":", 1)
            peers.append((bytes.fromhex(token), host.strip("[]"), int(port)))
        elif words == ["bye"]:
            normal = True
            break
    if normal:
        service.shutdown()
        os._exit(0)
    _watch_others(peers, count, heartbeat_s)  # process 0 died: serve the others until they are gone
    sys.stdout.flush()
    os._exit(0)  # not the service's shutdown: it would wait for the dead process


if __name__ == "__main__":
    main(sys.argv)
