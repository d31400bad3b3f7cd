"""The command's side of the control socket: `assay index` and `assay classify` hand their job to an `assay serve`
on the same data dir, which runs it with Prefect warm, and only draw its progress and print its result. The
protocol is in mcp_server/control_protocol.py, the server's side in mcp_server/control.py.

This module imports nothing heavy: a handed-off `assay index` costs little more than Python's start (it loads
neither Prefect, the MCP SDK nor the store).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path

from mcp_server.control_protocol import read_message, socket_path
from store.errors import AssayError

ANSWER_TIMEOUT = 30.0  # seconds for a server to accept or refuse a request


class NoServer(Exception):
    """No server took the job (none answers, or it refused it: ``refused``): run it here."""

    def __init__(self, message: str, *, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused


class ServerError(AssayError):
    """The server ran the job's checks and they failed (a path that does not exist, ...): the same error a local run
    raises."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class Progress:
    """The counters a progress line carries, with the attribute names of flows.index.indexer.IndexProgress."""

    def __init__(self, line: dict) -> None:
        self.percent = float(line.get("progress") or 0)
        self.files = int(line.get("files") or 0)
        self.directories = int(line.get("directories") or 0)
        self.total_size = int(line.get("totalSize") or 0)
        self.current_path = line.get("currentPath")


def index_via_server(data_dir: Path | str, *, path: str, force: bool, max_age: float, follow_symlinks: bool,
                     store: str, on_progress: Callable[[Progress], None] | None = None,
                     on_accepted: Callable[[str, dict], None] | None = None) -> dict:
    """Have the server listening in ``data_dir`` index ``path``; its result (index_path's shape). Raises
    :class:`NoServer` when there is none or it will not take the job, :class:`ServerError` for the job's own errors.
    A KeyboardInterrupt while it runs asks the server to cancel the job and returns the cancelled job's result; a
    second one leaves at once (the closed connection cancels it too)."""
    request = {"op": "index", "path": path, "force": force, "maxAge": max_age,
               "followSymlinks": follow_symlinks, "store": store, "prefect": True}
    return _job_via_server(data_dir, request, lambda line: on_progress(Progress(line)) if on_progress else None,
                           on_accepted)


def classify_via_server(data_dir: Path | str, *, path: str, operations: list[str], force: bool, store: str,
                        on_progress: Callable[[dict], None] | None = None,
                        on_accepted: Callable[[str, dict], None] | None = None) -> dict:
    """Have the server listening in ``data_dir`` run a classify job of ``path`` (`assay classify`): the server's
    worker pool is already up. Its result is classify_path's shape; ``on_progress`` gets {percent, files, total,
    errors, path}. Same errors and cancel as :func:`index_via_server`."""
    request = {"op": "classify", "path": path, "operations": operations, "force": force, "store": store,
               "prefect": True}

    def progress(line: dict) -> None:
        if on_progress is not None:
            on_progress({"percent": float(line.get("progress") or 0), "files": int(line.get("files") or 0),
                         "total": int(line.get("total") or 0), "errors": int(line.get("errors") or 0),
                         "path": line.get("currentPath")})

    return _job_via_server(data_dir, request, progress, on_accepted)


def _job_via_server(data_dir: Path | str, request: dict, on_progress: Callable[[dict], None],
                    on_accepted: Callable[[str, dict], None] | None) -> dict:
    where = str(socket_path(data_dir))
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(ANSWER_TIMEOUT)
        try:
            conn.connect(where)
        except OSError as exc:  # none there (FileNotFoundError), a file left by a dead server (refused), too long
            raise NoServer(f"no assay server answers at {where} ({exc.strerror or exc})") from None
        reader = conn.makefile("rb")
        try:
            conn.sendall((json.dumps(request) + "\n").encode())
            first = read_message(reader)
        except (OSError, ValueError) as exc:
            raise NoServer(f"the assay server at {where} did not answer ({exc})") from None
        if first is None:
            raise NoServer(f"the assay server at {where} closed the connection")
        if "refused" in first:
            raise NoServer(f"the assay server at {where} leaves this job to us: {first['refused'].get('message')}",
                           refused=True)
        if "error" in first:
            raise ServerError(first["error"].get("code", "ASSAY_ERROR"), first["error"].get("message", ""))
        if on_accepted is not None:
            on_accepted(where, first.get("accepted") or {})
        conn.settimeout(None)  # a job may take hours
        try:
            return _follow(reader, on_progress)
        except KeyboardInterrupt:
            conn.sendall(b'{"op": "cancel"}\n')
            conn.settimeout(ANSWER_TIMEOUT)
            return _follow(reader, None)
    finally:
        conn.close()


def _follow(reader, on_progress: Callable[[dict], None] | None) -> dict:
    while True:
        message = read_message(reader)
        if message is None:
            raise ServerError("SERVER_GONE", "the assay server closed the connection before the job ended")
        if "result" in message:
            return message["result"]
        if "error" in message:
            raise ServerError(message["error"].get("code", "ASSAY_ERROR"), message["error"].get("message", ""))
        if "progress" in message and on_progress is not None:
            on_progress(message)
