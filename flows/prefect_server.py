"""Prefect's API server as a child of an assay process: ``python -m flows.prefect_server FD``.

Serves Prefect's API — with its UI and services for a serving assay (``ASSAY_PREFECT_UI=1``), else as Prefect's own
ephemeral mode would (no UI, services of an ephemeral server) — on the
listening socket FD that the parent bound, and exits when the parent goes, however it went (SIGKILL included): its
stdin is a pipe whose only writer is the parent, so end-of-file on stdin means the parent has exited or has closed
it to stop us. flows/core/prefect.py starts it.

The pipe's write end is the parent's alone only as long as nothing copies it: the parent opens it close-on-exec and
its children are started by exec (subprocess, multiprocessing's ``spawn``), but a bare ``fork()`` of the parent
(OpenVINO's telemetry did that, issue 21) copies every descriptor, and a copy that lives on keeps the pipe open.
So the parent is watched too: once our parent process id changes (the parent exited; we were re-parented to init
or a subreaper), we go as at end-of-file, whoever still holds the pipe.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading

GRACE_SECONDS = 10.0  # after the parent went: time for a clean shutdown (lifespan, database) before a hard exit
PARENT_POLL_SECONDS = 1.0  # how often the parent process id is checked


def _read_to_eof(eof: threading.Event) -> None:
    try:
        while sys.stdin.buffer.read(4096):  # the parent never writes: this returns only at end-of-file
            pass
    except (OSError, ValueError):
        pass
    eof.set()


def _exit_with_parent(parent: int) -> None:
    """Wait for end-of-file on stdin or for ``parent`` to be our parent no more; then shut down."""
    eof = threading.Event()
    threading.Thread(target=_read_to_eof, args=(eof,), name="stdin-eof", daemon=True).start()
    while not eof.wait(PARENT_POLL_SECONDS) and os.getppid() == parent:
        pass
    timer = threading.Timer(GRACE_SECONDS, os._exit, args=(0,))
    timer.daemon = True
    timer.start()
    os.kill(os.getpid(), signal.SIGTERM)  # uvicorn shuts down cleanly on SIGTERM; before it runs, SIGTERM ends us


def main(argv: list[str]) -> int:
    fd = int(argv[0])
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), name="exit-with-parent", daemon=True).start()
    os.environ.pop("PREFECT_API_URL", None)  # this is the API; it is nobody's client
    if os.environ.get("ASSAY_PREFECT_UI") == "1":  # a serving assay: the UI and Prefect's services (the scheduler...)
        os.environ.update(PREFECT_UI_ENABLED="1", PREFECT__SERVER_FINAL="1")
    else:  # a command-line call: the API alone, as Prefect's ephemeral mode serves it
        os.environ.update(PREFECT_UI_ENABLED="0", PREFECT__SERVER_EPHEMERAL="1", PREFECT__SERVER_FINAL="1")
    import uvicorn  # here, in the child: a process that never starts Prefect's server never loads it

    sock = socket.socket(fileno=fd)
    config = uvicorn.Config("prefect.server.api.server:create_app", factory=True, log_level="error",
                            lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
