"""Prefect's API server as a child of an assay process: ``python -m flows.prefect_server FD``.

Serves Prefect's API — with its UI and services for a serving assay (``ASSAY_PREFECT_UI=1``), else as Prefect's own
ephemeral mode would (no UI, services of an ephemeral server) — on the
listening socket FD that the parent bound, and exits when the parent goes, however it went (SIGKILL included): its
stdin is a pipe whose only writer is the parent, so end-of-file on stdin means the parent has exited or has closed
it to stop us. flows/prefect_support.py starts it.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading

GRACE_SECONDS = 10.0  # after the parent went: time for a clean shutdown (lifespan, database) before a hard exit


def _exit_with_parent() -> None:
    try:
        while sys.stdin.buffer.read(4096):  # the parent never writes: this returns only at end-of-file
            pass
    except (OSError, ValueError):
        pass
    timer = threading.Timer(GRACE_SECONDS, os._exit, args=(0,))
    timer.daemon = True
    timer.start()
    os.kill(os.getpid(), signal.SIGTERM)  # uvicorn shuts down cleanly on SIGTERM; before it runs, SIGTERM ends us


def main(argv: list[str]) -> int:
    fd = int(argv[0])
    threading.Thread(target=_exit_with_parent, name="exit-with-parent", daemon=True).start()
    os.environ.pop("PREFECT_API_URL", None)  # this is the API; it is nobody's client
    if os.environ.get("ASSAY_PREFECT_UI") == "1":  # a serving assay: the UI and Prefect's services (the scheduler...)
        os.environ.update(PREFECT_UI_ENABLED="1", PREFECT__SERVER_FINAL="1")
    else:  # a command-line call: the API alone, as Prefect's ephemeral mode serves it
        os.environ.update(PREFECT_UI_ENABLED="0", PREFECT__SERVER_EPHEMERAL="1", PREFECT__SERVER_FINAL="1")
    import uvicorn

    sock = socket.socket(fileno=fd)
    config = uvicorn.Config("prefect.server.api.server:create_app", factory=True, log_level="error",
                            lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
