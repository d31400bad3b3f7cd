"""The control socket's protocol, shared by its two sides: where a serving process listens and how a message is
read. The server's side is mcp_server/control.py, the command's mcp_server/cli/handoff.py.

A serving process listens on ``<data dir>/assay.sock`` (a Unix domain socket, mode 0600, removed on exit). The
protocol is JSON, one object a line (UTF-8)::

    client: {"op": "index", "path": "/abs/path", "force": false, "maxAge": 0, "followSymlinks": false,
             "store": "<database URL>", "prefect": true}
    server: {"refused": {"code", "message"}}    not for this server (path outside its roots, another store, no
                                                Prefect): the client runs the job itself; or
            {"accepted": {"pid": 1234}}         then
            {"job": 17}                         the job row (when it is created), then
            {"progress": 42.0, "files": n, "directories": n, "totalSize": bytes, "currentPath": "..."} ..., then
            {"result": {...}}                   index_path's response; or {"error": {"code", "message"}}
    client: {"op": "cancel"}                    at any time; closing the connection cancels the job too.

``assay classify`` sends ``{"op": "classify", "path", "operations": [...], "force", "store", "prefect"}`` and gets
the same answers, its progress lines being ``{"progress", "files", "total", "errors", "currentPath"}`` and its result
flows/classify/service.py ``classify_path``'s.

A module of its own, apart from the server's side, because the command imports it: it imports nothing but the
standard library, so `assay index` handed to a server loads neither the services the server runs nor Prefect.
"""

from __future__ import annotations

import json
from pathlib import Path

SOCKET_NAME = "assay.sock"
MAX_LINE = 1 << 20  # bytes of one message line


def socket_path(data_dir: Path | str) -> Path:
    return Path(data_dir) / SOCKET_NAME


def read_message(reader) -> dict | None:
    """The next message on a connection (one JSON object a line); None once it is closed."""
    line = reader.readline(MAX_LINE)
    if not line:
        return None
    if not line.endswith(b"\n"):
        raise ValueError("request line too long or cut short")
    message = json.loads(line)
    if not isinstance(message, dict):
        raise ValueError("a message must be a JSON object")  # noqa: TRY004 (a bad line, as a cut one is)
    return message
