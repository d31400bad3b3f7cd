"""The control socket, the server's side: `assay index` (and `assay classify`) beside a running `assay serve` hands
its job to that server; the command's side is mcp_server/cli/handoff.py, the protocol between them
mcp_server/control_protocol.py.

A serving process listens on ``<data dir>/assay.sock`` (a Unix domain socket, mode 0600, removed on exit). A
command-line call that finds a server there sends its job and only draws the progress and prints the result: the
job runs in the server's process, as a Prefect flow with Prefect already warm, through the same ``index`` operation
as the MCP tool (flows/index/service.py ``index_path`` on the app's JobRunner; ``classify_path`` for `assay
classify`). The command never imports Prefect or the MCP SDK, so it costs little more than Python's start.

A socket file left by a server that died (SIGKILL) is recognised by a refused connection: the client runs locally,
the next server replaces it.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import stat
import threading
import time
from typing import Any

from flows.classify.service import check_operations, classify_path
from flows.index.service import index_path
from mcp_server.control_protocol import read_message, socket_path
from store.errors import AssayError

log = logging.getLogger(__name__)

PROGRESS_EVERY = 0.1  # seconds between progress lines (the bar redraws at most this often)
SUN_PATH_MAX = 107  # bytes of a Unix socket path (Linux: 108 with the NUL)


def _send(conn: socket.socket, lock: threading.Lock, message: dict) -> None:
    data = (json.dumps(message, default=str) + "\n").encode()
    with lock:
        conn.sendall(data)


class _Session:
    """One command-line call's connection and the job it asked for."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        self.lock = threading.Lock()  # one writer at a time
        self.job_id: int | None = None
        self.cancelled = threading.Event()
        self.finished = threading.Event()  # the answer is out: a closed connection cancels nothing any more


class ControlSocket:
    """The listener of a serving process: one thread accepting, one thread per connection (the job runs there, off
    the event loop), the cancel watcher of each connection in a thread of its own."""

    def __init__(self, app) -> None:
        self.app = app
        self.path = socket_path(app.settings.data_dir)
        self._sock: socket.socket | None = None
        self._inode: int | None = None
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._sessions: dict[int, tuple[_Session, threading.Thread]] = {}
        self._lock = threading.Lock()

    # lifetime

    def start(self) -> bool:
        """Listen at <data dir>/assay.sock; False (logged) when another live server holds it or it cannot be made."""
        path = str(self.path)
        if len(os.fsencode(path)) > SUN_PATH_MAX:
            log.warning("not listening for command-line calls: the socket path %s is longer than %d bytes", path,
                        SUN_PATH_MAX)
            return False
        if _answers(path):
            log.warning("not listening for command-line calls: another assay server listens at %s", path)
            return False
        try:
            if stat.S_ISSOCK(os.lstat(path).st_mode):
                os.unlink(path)  # left by a server that died: nothing answers on it
                log.info("removed the socket %s left by a server that is gone", path)
        except FileNotFoundError:
            pass
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            os.fchmod(sock.fileno(), 0o600)  # Linux creates the file with these bits: no window where others connect
            sock.bind(path)
            os.chmod(path, 0o600)
            sock.listen(16)
            sock.settimeout(0.5)  # the accept loop looks at the stop flag this often
        except OSError as exc:
            sock.close()
            log.warning("not listening for command-line calls at %s: %s", path, exc)
            return False
        self._sock, self._inode = sock, os.stat(path).st_ino
        self._thread = threading.Thread(target=self._accept_loop, name="assay-control", daemon=True)
        self._thread.start()
        log.info("listening for command-line calls at %s", path)
        return True

    def stop(self, timeout: float = 30.0) -> None:
        """Stop listening, remove the socket, cancel the jobs of connected calls and wait for them to end."""
        if self._sock is None:
            return
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._sock.close()
        try:
            if os.stat(self.path).st_ino == self._inode:  # ours, not a newer server's
                os.unlink(self.path)
        except OSError:
            pass
        self._sock = None
        with self._lock:
            sessions = list(self._sessions.values())
        for session, _ in sessions:
            self._cancel(session, "the server is stopping")
        deadline = time.monotonic() + timeout
        for _, thread in sessions:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))

    def _accept_loop(self) -> None:
        assert self._sock is not None
        while not self._stopping.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                if not self._stopping.is_set():
                    log.exception("the control socket failed; command-line calls run on their own from now on")
                return
            conn.settimeout(None)
            session = _Session(conn)
            thread = threading.Thread(target=self._serve, args=(session,), name="assay-control-call", daemon=True)
            with self._lock:
                self._sessions[id(session)] = (session, thread)
            thread.start()

    # one call

    def _serve(self, session: _Session) -> None:
        conn = session.conn
        reader = conn.makefile("rb")
        try:
            request = read_message(reader)
            if request is None:
                return
            if request.get("op") not in ("index", "classify"):
                _send(conn, session.lock, {"error": {"code": "INVALID_PARAMS",
                                                     "message": f"unknown op {request.get('op')!r}"}})
                return
            self._index(session, reader, request)
        except (OSError, ValueError) as exc:
            log.info("a command-line call ended early: %s", exc)
        finally:
            with self._lock:
                self._sessions.pop(id(session), None)
            try:
                conn.shutdown(socket.SHUT_RDWR)  # wakes the cancel watcher
            except OSError:
                pass
            reader.close()
            conn.close()

    def _index(self, session: _Session, reader, request: dict[str, Any]) -> None:
        app = self.app
        conn = session.conn
        refusal = None
        try:
            root = app.roots.resolve(str(request.get("path", "")), field="path")
        except AssayError as exc:
            refusal = {"code": exc.code, "message": exc.message}
        else:
            if request.get("store") != app.settings.db_url:
                refusal = {"code": "OTHER_STORE", "message": "this server uses another store"}
            elif request.get("prefect", True) and not app.settings.use_prefect:
                refusal = {"code": "NO_PREFECT", "message": "this server runs jobs without Prefect (--no-prefect)"}
        if refusal is not None:
            log.info("a command-line call for %s left to itself: %s", request.get("path"), refusal["message"])
            _send(conn, session.lock, {"refused": refusal})
            return
        _send(conn, session.lock, {"accepted": {"pid": os.getpid()}})
        threading.Thread(target=self._watch, args=(session, reader), name="assay-control-watch", daemon=True).start()

        def on_start(job_id: int) -> None:
            session.job_id = job_id
            log.info("%s of %s for a command-line call: job %s", request.get("op"), root, job_id)
            if session.cancelled.is_set():
                app.runner.cancel(job_id)
            try:
                _send(conn, session.lock, {"job": job_id})
            except OSError:
                self._cancel(session, "the command-line call went away")

        last = [0.0]

        def on_progress(p) -> None:
            now = time.monotonic()
            if session.cancelled.is_set() or (now - last[0] < PROGRESS_EVERY and p.percent < 100):
                return
            last[0] = now
            try:
                _send(conn, session.lock, {"progress": p.percent, "files": p.files, "directories": p.directories,
                                           "totalSize": p.total_size, "currentPath": p.current_path})
            except OSError:
                self._cancel(session, "the command-line call went away")

        def on_classify_progress(p: dict) -> None:
            now = time.monotonic()
            if session.cancelled.is_set() or (now - last[0] < PROGRESS_EVERY and p["percent"] < 100):
                return
            last[0] = now
            try:
                _send(conn, session.lock, {"progress": p["percent"], "files": p["files"], "total": p["total"],
                                           "errors": p["errors"], "currentPath": p.get("path")})
            except OSError:
                self._cancel(session, "the command-line call went away")

        try:
            try:
                if request.get("op") == "classify":
                    operations = check_operations(request.get("operations"))
                    result = classify_path(app.runner, path=root, operations=operations,
                                           force=bool(request.get("force")), async_=False,
                                           on_progress=on_classify_progress, on_start=on_start)
                else:
                    result = index_path(app.runner, root=root, async_=False, force=bool(request.get("force")),
                                        max_age=float(request.get("maxAge") or 0),
                                        follow_symlinks=bool(request.get("followSymlinks")), on_progress=on_progress,
                                        on_start=on_start)
            finally:
                session.finished.set()
        except AssayError as exc:
            _send(conn, session.lock, {"error": {"code": exc.code, "message": exc.message}})
            return
        except Exception as exc:  # the call gets told; the server keeps serving
            log.exception("index of %s for a command-line call failed", root)
            _send(conn, session.lock, {"error": {"code": "INTERNAL_ERROR", "message": f"{type(exc).__name__}: {exc}"}})
            return
        log.info("index of %s for a command-line call: %s (job %s)", root, result.get("status"), result.get("jobId"))
        _send(conn, session.lock, {"result": result})

    def _watch(self, session: _Session, reader) -> None:
        """Cancels the call's job when it asks to, or when its connection closes before the result is sent."""
        while True:
            try:
                message = read_message(reader)
            except (OSError, ValueError):
                message = None
            if message is None:  # closed: the command-line call went away (or we finished and closed it)
                self._cancel(session, "the command-line call went away")
                return
            if message.get("op") == "cancel":
                self._cancel(session, "cancelled from the command line")

    def _cancel(self, session: _Session, why: str) -> None:
        if session.cancelled.is_set() or session.finished.is_set():
            return
        session.cancelled.set()
        job_id = session.job_id
        if job_id is None:
            return  # on_start cancels it as soon as it exists
        job = self.app.runner.cancel(job_id)
        if job.get("cancelled"):
            log.info("job %s cancelled: %s", job_id, why)


def _answers(path: str) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(2.0)
    try:
        probe.connect(path)
        return True
    except OSError:
        return False
    finally:
        probe.close()
