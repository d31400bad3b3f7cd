"""The warm starter of an ``assay worker``: a process that imports Prefect's engine and assay's flows once, then
forks a copy of itself for each flow run the worker starts, so a plan's run begins in milliseconds instead of the 3-5
s a fresh ``python -m prefect.engine`` spends importing (:mod:`flows.core.warm_launch` is the other end).

    python -m flows.core.warm_starter SOCKET PARENT_PID MODULE...

It imports the MODULEs, then loads the installed capabilities (their executors, fields and jobs).

Forking is safe here because nothing else runs in this process: it is spawned fresh by the worker, imports modules,
and serves its socket from one thread (it refuses to start if an import started a Python thread; OpenBLAS's is kept
from starting with ``OPENBLAS_NUM_THREADS=1``). It opens no store connection and no Prefect client, and logs nothing
through Prefect before a fork. It ends when its worker does (its parent's pid, watched each second) or on SIGTERM;
the flow runs it forked go on (a flow run outlives its worker, as with Prefect's own process worker).

Each request (a launcher's environment, working directory, arguments and standard streams) gets a fork whose copy
takes that environment (Prefect's settings read again from it), directory, streams and arguments, reseeds
``random``, and runs ``prefect.engine`` as ``python -m`` would; this process answers the copy's pid, and its exit
status when it ends. A launcher that goes away before its copy ended (Prefect's Runner killed it after its grace)
takes the copy with it (SIGKILL), as killing a cold ``prefect.engine`` would have.
"""

from __future__ import annotations

import importlib
import json
import os
import random
import runpy
import selectors
import signal
import socket
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

import prefect.engine as ENGINE
from prefect.context import refresh_global_settings_context

from flows.core.capability import load_capabilities
from flows.core.warm_launch import HEADER

POLL_SECONDS = 0.1
MAX_REQUEST = 16 << 20  # an environment larger than this is not a launcher's


@dataclass
class Pending:
    """A launcher's connection while its request is read."""

    conn: socket.socket
    data: bytearray = field(default_factory=bytearray)
    fds: list[int] = field(default_factory=list)


@dataclass
class Copy:
    """What a forked copy is to become: a launcher's request and its standard streams."""

    body: dict[str, Any]
    fds: list[int]


class Starter:
    """Serves launchers on ``path`` until its parent ``parent`` is gone or it gets SIGTERM."""

    def __init__(self, path: str, parent: int) -> None:
        self.path, self.parent = path, parent
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.selector = selectors.DefaultSelector()
        self.pending: dict[int, Pending] = {}  # fd -> a connection whose request is being read
        self.running: dict[int, socket.socket] = {}  # pid of a copy -> its launcher's connection
        self.stopping = False

    def listen(self) -> None:
        if os.path.exists(self.path):
            os.unlink(self.path)
        self.listener.bind(self.path + ".new")  # the path appears only once it is listened on
        os.chmod(self.path + ".new", 0o600)
        self.listener.listen(64)
        os.rename(self.path + ".new", self.path)
        self.listener.setblocking(False)
        self.selector.register(self.listener, selectors.EVENT_READ)
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the worker, which stops this on its way out

    def serve(self) -> Copy | None:
        """Serve until told to stop (None, in this process), or until a fork (the request, in the copy: its
        caller makes it the flow run's process, with none of this process's frames below it)."""
        while not self.stopping and os.getppid() == self.parent:
            for key, _ in self.selector.select(POLL_SECONDS):
                if key.fileobj is self.listener:
                    self._accept()
                    continue
                copy = self._read(key.fd)
                if copy is not None:
                    return copy
            self._reap()
        self.selector.close()
        self.listener.close()
        if os.path.exists(self.path):
            os.unlink(self.path)
        return None

    def _stop(self, _signum: int, _frame: object) -> None:
        self.stopping = True

    def _accept(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except BlockingIOError:
            return
        conn.setblocking(False)
        self.pending[conn.fileno()] = Pending(conn)
        self.selector.register(conn, selectors.EVENT_READ)

    def _read(self, fd: int) -> Copy | None:
        if fd not in self.pending:  # a running copy's launcher: it sends nothing more, so it closed
            pid = next((p for p, c in self.running.items() if c.fileno() == fd), None)
            self._launcher_gone(pid)
            return None
        pending = self.pending[fd]
        try:
            data, fds, _, _ = socket.recv_fds(pending.conn, 65536, 8)
        except BlockingIOError:
            return None
        except OSError:
            data, fds = b"", []
        pending.data += data
        pending.fds += fds
        if not data or len(pending.data) > MAX_REQUEST + HEADER.size:
            self._drop(fd)
            return None
        if len(pending.data) < HEADER.size:
            return None
        (size,) = HEADER.unpack_from(pending.data)
        if len(pending.data) < HEADER.size + size + 1 or len(pending.fds) < 3:  # the body, then the byte with fds
            return None
        body = json.loads(bytes(pending.data[HEADER.size:HEADER.size + size]))
        del self.pending[fd]
        for extra in pending.fds[3:]:
            os.close(extra)
        return self._fork(pending.conn, body, pending.fds[:3])

    def _drop(self, fd: int) -> None:
        pending = self.pending.pop(fd)
        self.selector.unregister(pending.conn)
        pending.conn.close()
        for received in pending.fds:
            os.close(received)

    def _fork(self, conn: socket.socket, body: dict[str, Any], fds: list[int]) -> Copy | None:
        pid = os.fork()
        if pid == 0:  # the copy: none of the starter's descriptors stay open in it, so a launcher sees its starter
            # go when the starter goes, whatever copies live on
            theirs = [self.listener, conn, *(p.conn for p in self.pending.values()), *self.running.values()]
            self.selector.close()
            for sock in theirs:
                sock.close()
            return Copy(body, fds)
        for received in fds:
            os.close(received)
        self.running[pid] = conn
        try:
            conn.setblocking(True)
            conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
            conn.setblocking(False)
        except OSError:
            self._launcher_gone(pid)
        return None

    def _launcher_gone(self, pid: int | None) -> None:
        """A launcher closed before its copy ended (the Runner killed it): the copy goes too."""
        conn = self.running.pop(pid, None) if pid is not None else None
        if conn is None:
            return
        self.selector.unregister(conn)
        conn.close()
        try:
            os.kill(pid, signal.SIGKILL)  # type: ignore[arg-type]
            os.waitpid(pid, 0)  # type: ignore[arg-type]
        except (ProcessLookupError, ChildProcessError):
            pass

    def _reap(self) -> None:
        while self.running:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.running.pop(pid, None)
            if conn is None:
                continue
            self.selector.unregister(conn)
            try:
                conn.setblocking(True)
                conn.sendall(json.dumps({"status": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
            except OSError:
                pass
            conn.close()


def become(copy: Copy) -> None:
    """In the forked copy, at the top of its stack: become the flow run's process, as ``python -m prefect.engine
    ARGV`` would be in the launcher's environment, directory and standard streams. The engine's ``exit()`` ends the
    process the ordinary way (atexit handlers, Prefect's log flush)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for target, received in enumerate(copy.fds):
        os.dup2(received, target)
        os.close(received)
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in copy.body["env"].items()})
    os.chdir(str(copy.body["cwd"]))
    sys.argv = [ENGINE.__file__ or "prefect.engine", *[str(a) for a in copy.body["argv"]]]
    random.seed()
    refresh_global_settings_context()  # Prefect's settings from the flow run's environment
    runpy.run_path(sys.argv[0], run_name="__main__")


def main(argv: list[str]) -> int:
    path, parent, modules = argv[0], int(argv[1]), argv[2:]
    for name in modules:
        importlib.import_module(name)
    load_capabilities()  # the capabilities' declarations, and the executors and fields their registries hold
    if threading.active_count() != 1:
        sys.stderr.write(f"warm starter: importing {', '.join(modules)} started threads "
                         f"({', '.join(t.name for t in threading.enumerate())}); flow runs start cold\n")
        return 1
    starter = Starter(path, parent)
    starter.listen()
    copy = starter.serve()
    if copy is not None:
        become(copy)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
