"""How assay runs its Prefect flows in-process, and which Prefect API they report to.

**The API.** Before Prefect is first imported in a process, :func:`ensure_api` points ``PREFECT_API_URL`` at an API
that answers, first found of:

1. the operator's own ``PREFECT_API_URL`` (a `prefect server start` with its UI, say);
2. the API of an ``assay serve`` on the same data dir, which records it in ``<data dir>/prefect-api.json`` once it
   answers: so ``assay index`` or ``assay plan run`` next to a running server skip Prefect's 10-20 s cold start and
   their flow runs appear beside the server's;
3. our own Prefect server, started as a child process (flows/prefect_server.py) on a loopback socket we bind. The
   child exits when this process does, however it ends (SIGKILL included), unlike Prefect's own ephemeral server,
   which outlived a killed parent. A serving process (``assay serve``) starts it with Prefect's UI and its
   background services (the scheduler, cancellation clean-up, ...) on ``ASSAY_PREFECT_PORT`` (default 4200, any free
   port when that one is taken); a command-line call starts the bare API on any free port.

**A seed.** A fresh Prefect home costs its server ~19 s of CPU on its first start against ~7.5 s later (Prefect's
migrations and block registration). With ``ASSAY_PREFECT_SEED`` naming a folder holding a ``prefect.db`` (and
``memo_store.toml``) of a server that ran once, a home that has no database yet starts from copies of them; Prefect
then migrates only what the seed lacks. The test suite makes one (tests/prefect_seed.py) for its many fresh homes.

**Imports.** Prefect is imported once, under a lock: two threads importing it at once (the start-up warm-up and the
first job, say) met a half-initialised module ("Failed to initialize plugins: cannot import name
'get_current_settings' ...").

**Heartbeats.** Prefect 3.8's flow engine keeps a heartbeat thread per flow run and joins it at the end; the thread
sleeps in whole seconds, so every flow run, however short, takes about a second longer. assay's own job rows already
catch runs that died (a job left running is marked failed at the next start), so its flows run without heartbeats.
"""

from __future__ import annotations

import atexit
import json
import logging
import multiprocessing
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator
from uuid import UUID

log = logging.getLogger(__name__)

API_RECORD = "prefect-api.json"
# seconds for our API server to answer (a busy 2-core machine needs 15-30 s); Prefect's own setting if given
STARTUP_TIMEOUT = float(os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS") or 90)

_lock = threading.RLock()
_prepared = threading.Event()
_chosen = threading.Event()  # the API's URL is known (its server may still be starting)
_data_dir: Path | None = None
_publish = False
_ui = False
_port = 4200
_child: subprocess.Popen | None = None
_record: Path | None = None  # the record this process wrote, removed at exit


def configure(data_dir: Path, *, publish: bool | None = None, ui: bool | None = None,
              port: int | None = None) -> None:
    """Where this process keeps its data (the first call wins, as PREFECT_HOME does); ``publish``: a server shares
    the API it starts with command-line calls on the same data dir; ``ui``: the server we start serves Prefect's UI
    and runs its services, on ``port`` when free (0: any free port)."""
    global _data_dir, _publish, _ui, _port
    with _lock:
        if _data_dir is None:
            _data_dir = Path(data_dir)
        if publish is not None:
            _publish = publish
        if ui is not None:
            _ui = ui
        if port is not None:
            _port = port


def _bind() -> socket.socket:
    """A listening loopback socket: the UI's port when we serve the UI and it is free, else any free port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if _ui and _port:
        try:
            sock.bind(("127.0.0.1", _port))
            sock.listen(128)
            return sock
        except OSError:
            sock.close()
            log.info("port %d is taken; Prefect's server takes a free port", _port)
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    return sock


def _healthy(url: str, timeout: float) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=timeout) as response:
            return response.status == 200
    except (OSError, urllib.error.URLError, ValueError):
        return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def recorded_api(data_dir: Path) -> str | None:
    """The Prefect API a server on ``data_dir`` recorded, if that server is alive and the API answers."""
    try:
        record = json.loads((Path(data_dir) / API_RECORD).read_text())
        url, owner = str(record["url"]), int(record["owner"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not url.startswith("http://127.0.0.1:"):  # we only ever record our own loopback child
        return None
    if not _alive(owner) or not _healthy(url, timeout=2.0):
        return None
    return url


def seed_home(home: Path | None = None, env: dict[str, str] | None = None) -> None:
    """Copy ``ASSAY_PREFECT_SEED``'s database into Prefect home ``home`` (default: ``env``'s, this process's) when it
    has none (see the module docstring); for a `prefect server start` too."""
    env = dict(os.environ) if env is None else env
    seed = env.get("ASSAY_PREFECT_SEED")
    if not seed or any(env.get(f"PREFECT_{part}_DATABASE_CONNECTION_URL") for part in ("API", "SERVER")):
        return  # no seed, or a database elsewhere than the home
    home = Path(home or env.get("PREFECT_HOME") or Path.home() / ".prefect").expanduser()
    if (home / "prefect.db").exists():
        return
    home.mkdir(parents=True, exist_ok=True)
    for name in ("memo_store.toml", "prefect.db"):  # the database last: present means whole
        source = Path(seed) / name
        if source.is_file():
            partial = home / f".{name}.{os.getpid()}"
            shutil.copyfile(source, partial)
            os.replace(partial, home / name)


def _start_child() -> str:
    """Start our API server child on a socket bound here (so its URL is known and its port ours); its URL."""
    global _child
    seed_home()
    sock = _bind()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/api"
    project = str(Path(__file__).resolve().parents[2])
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["PYTHONPATH"] = project + os.pathsep + env.get("PYTHONPATH", "")
    env["ASSAY_PREFECT_UI"] = "1" if _ui else "0"
    env["PREFECT_UI_API_URL"] = url
    try:
        # stdin: a pipe only we write to (end-of-file = we are gone); stdout: our stderr, never a stdio protocol;
        # a session of its own: a Ctrl-C or a SIGTERM sent to our process group reaches us, not it, so our flow runs
        # can still finish and report while we stop (we close the pipe last, at exit)
        _child = subprocess.Popen([sys.executable, "-m", "flows.prefect_server", str(sock.fileno())],
                                  stdin=subprocess.PIPE, stdout=sys.stderr.fileno(), pass_fds=(sock.fileno(),),
                                  env=env, cwd=project, start_new_session=True)
    finally:
        sock.close()  # the child holds it now
    atexit.register(stop_api)
    log.info("starting Prefect's %s at %s (pid %d)", "server and UI" if _ui else "API server", url, _child.pid)
    return url


def _wait_ready(url: str) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while not _healthy(url, timeout=5.0):
        if _child is not None and _child.poll() is not None:
            raise RuntimeError(f"Prefect's API server exited with status {_child.returncode} before answering "
                               "(its messages are above in this log)")
        if time.monotonic() > deadline:
            raise RuntimeError(f"Prefect's API server at {url} did not answer within {STARTUP_TIMEOUT:.0f} s")
        time.sleep(0.1)


def _write_record(url: str) -> None:
    global _record
    assert _data_dir is not None and _child is not None
    path = _data_dir / API_RECORD
    tmp = path.with_name(f".{API_RECORD}.{os.getpid()}")
    tmp.write_text(json.dumps({"url": url, "owner": os.getpid(), "pid": _child.pid}))
    os.replace(tmp, path)
    _record = path


def ensure_api() -> str | None:
    """Point this process's Prefect at an API that answers (see the module docstring); its URL. Call before
    importing Prefect; idempotent and thread-safe."""
    with _lock:
        if _prepared.is_set():
            return os.environ.get("PREFECT_API_URL")
        url = os.environ.get("PREFECT_API_URL") or ""
        chosen = not url
        if chosen:
            shared = recorded_api(_data_dir) if _data_dir is not None else None
            if shared:
                log.info("using the Prefect API of the assay server on this data dir: %s", shared)
                url = shared
            else:
                url = _start_child()
            os.environ["PREFECT_API_URL"] = url
            if "prefect.context" in sys.modules:  # imported before us (a test, a bench): make it see the URL
                from prefect.context import refresh_global_settings_context  # already imported (see the test above)

                refresh_global_settings_context()
        _chosen.set()
        try:
            import prefect  # noqa: F401  (once, here: see "Imports" above; while our API server starts)
            import prefect.flow_engine  # noqa: F401  (as above)
            import prefect.settings  # noqa: F401  (as above)

            if _child is not None:
                _wait_ready(url)
                log.info("Prefect's API server is ready")
                if _publish and _data_dir is not None:
                    _write_record(url)
        except BaseException:
            stop_api()
            if chosen:  # the next flow run chooses again
                os.environ.pop("PREFECT_API_URL", None)
            raise
        _prepared.set()
        return url


def stop_api() -> None:
    """Stop our API server child (closing its stdin: it shuts down cleanly) and drop our record; at exit."""
    global _child, _record
    with _lock:
        if _record is not None:
            try:
                if json.loads(_record.read_text()).get("owner") == os.getpid():
                    _record.unlink()
            except (OSError, ValueError):
                pass
            _record = None
        child, _child = _child, None
    if child is None or child.poll() is not None:
        return
    if "prefect.logging.handlers" in sys.modules:  # logs of our flow runs still queued: to the API while it is up
        try:
            from prefect.logging.handlers import APILogHandler  # only when our flows logged (see the test above)

            APILogHandler().flush()
        except Exception:  # noqa: BLE001 (best effort at exit)
            log.debug("flushing Prefect's log queue failed", exc_info=True)
    try:
        if child.stdin is not None:  # always: the child is started with stdin=PIPE
            child.stdin.close()
        child.wait(timeout=15)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def child_pid() -> int | None:
    """The pid of our API server child, if this process started one."""
    return _child.pid if _child is not None else None


@contextmanager
def flow_settings() -> Iterator[None]:
    """Settings for a flow run started from this thread: an API that answers, no heartbeat thread."""
    if not _prepared.is_set():
        ensure_api()
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings  # after ensure_api ("Imports")

    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        yield


def cancel_requested_in_prefect(flow_run_id: str | None, *, every_seconds: float = 2.0) -> Callable[[], bool] | None:
    """For a flow run executed in this process: a check, asked now and then by the job's loops, of whether someone
    cancelled the run in Prefect (the UI's Cancel). Prefect's runner handles that for the runs it started itself (it
    kills their process); nobody else watches a run that an agent started in the server's process."""
    if not flow_run_id:
        return None
    from prefect.client.orchestration import get_client  # noqa: PLC0415 (Prefect is imported by ensure_api)

    run_id = UUID(flow_run_id)
    last = time.monotonic()  # first asked after ``every_seconds``: a short run never pays for the call

    def check() -> bool:
        nonlocal last
        now = time.monotonic()
        if now - last < every_seconds:
            return False
        last = now
        try:
            with get_client(sync_client=True) as client:
                state = client.read_flow_run(run_id).state
        except Exception:  # noqa: BLE001 (the API away for a moment: the run goes on; the store's flag still works)
            log.debug("reading flow run %s failed", flow_run_id, exc_info=True)
            return False
        return state is not None and (state.is_cancelling() or state.is_cancelled())

    return check


def stop_worker_processes(grace: float = 2.0) -> None:
    """End this process's worker processes (its ``multiprocessing`` children: the classifier's and the extractors'
    pools) now, for a process that is being stopped: SIGTERM, SIGKILL after ``grace`` seconds. Otherwise its exit
    waits for the pools' files in flight, and a process killed meanwhile leaves its workers orphaned for good (each
    waits on a queue whose write end it holds itself). Python's resource tracker is not such a child: it ends when
    this process does."""
    children = multiprocessing.active_children()
    for child in children:
        child.terminate()
    deadline = time.monotonic() + grace
    for child in children:
        child.join(max(0.0, deadline - time.monotonic()))
        if child.is_alive():
            child.kill()
            child.join(1.0)
    if children:
        log.info("stopped %d worker process(es)", len(children))


def chosen_api_url(timeout: float) -> str | None:
    """The URL of the API this process reports to, once chosen (its server may still be starting); None if it was
    not chosen within ``timeout`` seconds."""
    return os.environ.get("PREFECT_API_URL") if _chosen.wait(timeout) else None


def ui_url(api_url: str | None) -> str | None:
    """Prefect's UI for an API URL (``http://127.0.0.1:4200/api`` -> ``http://127.0.0.1:4200``)."""
    return api_url.removesuffix("/").removesuffix("/api") if api_url else None
