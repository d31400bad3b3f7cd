"""The command an ``assay worker`` gives the flow runs it starts: it asks the worker's warm starter
(:mod:`flows.core.warm_starter`) to run the flow run in a copy of a process that has Prefect and assay imported
already, and stands in for that copy towards Prefect's Runner — its pid is the one the Runner watches and signals.

Prefect's process worker runs a flow run as ``python -m prefect.engine`` in a fresh interpreter, which spends 3-5 s
importing Prefect and assay before it does anything. This launcher imports only the standard library (~30 ms):

1. it connects to the starter's socket (``ASSAY_WARM_SOCKET``) and sends its environment, working directory,
   arguments and standard streams (their descriptors, ``SCM_RIGHTS``);
2. the starter forks the flow run's process and answers with its pid; SIGTERM, SIGINT and SIGHUP sent to this
   launcher (the Runner's cancel, a worker stopping) are passed on to it;
3. when that process ends the starter sends its exit status, and the launcher ends with the same status (killed by a
   signal: the same signal), which is what the Runner reads.

With no starter to reach (a plain ``prefect worker``'s environment, the starter gone) the launcher becomes
``python -m prefect.engine`` itself (``exec``): the flow run starts cold, as Prefect would have started it. If the
starter goes away while the flow run's process lives on (its worker was killed: flow runs outlive their worker), the
launcher waits for that process to end.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import struct
import sys
import time

SOCKET_ENV = "ASSAY_WARM_SOCKET"
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
HEADER = struct.Struct("!I")  # the request's length


def request(argv: list[str]) -> bytes:
    """The request: this process's environment, working directory and arguments, length-prefixed JSON."""
    body = json.dumps({"env": dict(os.environ), "cwd": os.getcwd(), "argv": argv}).encode()
    return HEADER.pack(len(body)) + body


def read_line(conn: socket.socket, buffer: bytearray) -> dict[str, int] | None:
    """The starter's next message (a JSON line), or None when it closed the connection."""
    while b"\n" not in buffer:
        chunk = conn.recv(4096)
        if not chunk:
            return None
        buffer += chunk
    line, _, rest = bytes(buffer).partition(b"\n")
    buffer[:] = rest
    message: dict[str, int] = json.loads(line)
    return message


def end_as(status: int) -> None:
    """End this process as the flow run's process ended: ``status`` >= 0 an exit code, < 0 killed by that signal."""
    if status < 0:
        sys.stdout.flush()
        sys.stderr.flush()
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
        time.sleep(1)  # a signal whose default action is not to end the process: end with its conventional code
        sys.exit(128 - status)
    sys.exit(status)


def wait_for(pid: int) -> None:
    """Wait until process ``pid`` (not this process's child) is gone."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):  # too old a kernel, or it is gone already
        while _alive(pid):
            time.sleep(0.5)
        return
    try:
        select.select([fd], [], [])
    finally:
        os.close(fd)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (flows.core.prefect has the same test; this module imports only the standard
    library, so it keeps its own)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def cold(argv: list[str]) -> None:
    """Become ``python -m prefect.engine`` (no warm starter to reach)."""
    os.execv(sys.executable, [sys.executable, "-m", "prefect.engine", *argv])


def main(argv: list[str]) -> None:
    path = os.environ.get(SOCKET_ENV)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        if not path:
            raise OSError("no warm starter")
        conn.connect(path)
        conn.sendall(request(argv))
        socket.send_fds(conn, [b"s"], [0, 1, 2])
        buffer = bytearray()
        started = read_line(conn, buffer)
    except OSError:
        started = None
    if started is None or "pid" not in started:
        conn.close()
        cold(argv)
        return
    pid = int(started["pid"])

    def forward(signum: int, _frame: object) -> None:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    for sig in FORWARDED:
        signal.signal(sig, forward)
    while True:
        try:
            ended = read_line(conn, buffer)
            break
        except InterruptedError:  # a forwarded signal interrupted the read (PEP 475 retries it anyway)
            continue
    conn.close()
    if ended is None:  # the starter went away (its worker was stopped); the flow run goes on without it
        wait_for(pid)
        end_as(0)
        return
    end_as(int(ended["status"]))


if __name__ == "__main__":
    main(sys.argv[1:])
