"""Shared fixtures: a temp data dir and store, a generated tree, an app, and an in-process MCP client."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path

_SESSION_HOME = tempfile.mkdtemp(prefix="assay-tests-")
atexit.register(shutil.rmtree, _SESSION_HOME, ignore_errors=True)  # the session's Prefect home, gone after it
if _XDIST_WORKER := os.environ.get("PYTEST_XDIST_WORKER"):
    # scripts/test runs two pytest-xdist workers: each gets its own Prefect home (its ephemeral API's database),
    # data dir and Hugging Face cache under the ones the script made; the exported models stay shared (built
    # atomically: flows.semantic.encoder)
    for _key in ("PREFECT_HOME", "ASSAY_DATA_DIR", "HF_HOME"):
        if os.environ.get(_key):
            os.environ[_key] = os.path.join(os.environ[_key], _XDIST_WORKER)
            os.makedirs(os.environ[_key], exist_ok=True)
os.environ.setdefault("PREFECT_HOME", os.path.join(_SESSION_HOME, "prefect"))
# the trash of files deleted on the home's volume: a home of the session's, never the real one's Trash
os.environ.setdefault("ASSAY_TRASH_HOME", os.path.join(_SESSION_HOME, "home"))
os.makedirs(os.environ["ASSAY_TRASH_HOME"], exist_ok=True)
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# a server started with roots extracts their documents through the built-in plan; the tests about it turn it on
os.environ.setdefault("ASSAY_DOCUMENTS_PLAN", "off")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")  # a loaded CI machine starts slowly

import pytest  # noqa: E402
from hypothesis import settings as hypothesis_settings  # noqa: E402
from mcp import Client  # noqa: E402

from flows.core.roots import Roots  # noqa: E402
from mcp_server.app import AssayApp, build_server  # noqa: E402
from mcp_server.config import Settings  # noqa: E402
from store.engine import make_engine  # noqa: E402
from bench.cluster_parts import pg_bin  # noqa: E402
from tests.bench_runs import BenchRuns, is_runner, module_bench  # noqa: E402

# Property tests draw the same examples on every run, so CI judges the code and not the luck of the draw (a random
# draw failed CI once on a bug no example had shown before); ASSAY_HYPOTHESIS=explore draws new ones, to look for
# bugs on purpose.
hypothesis_settings.register_profile("ci", derandomize=True)
hypothesis_settings.register_profile("explore", derandomize=False)
hypothesis_settings.load_profile(os.environ.get("ASSAY_HYPOTHESIS", "ci"))


def make_tree(root: Path) -> Path:
    """A small, known tree: Photos (jpgs), Videos, docs with nesting, a hidden file, an empty dir."""
    files = {
        "Photos/vacation/beach.jpg": 3000,
        "Photos/vacation/sunset.jpg": 2000,
        "Photos/photo.jpg": 5000,
        "Photos/notes.txt": 10,
        "Videos/movie.mp4": 40000,
        "Videos/clip.mov": 8000,
        "docs/report_2024.pdf": 1500,
        "docs/readme.md": 120,
        "docs/deep/a/b/c.txt": 7,
        ".hidden": 1,
    }
    for rel, size in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"x" * size)
    (root / "empty").mkdir()
    return root


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return make_tree(tmp_path / "home" / "user")


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    return d


@pytest.fixture
def engine(data_dir: Path):
    eng = make_engine(f"sqlite:///{data_dir / 'assay.db'}")
    yield eng
    eng.dispose()


@pytest.fixture
def roots(tree: Path) -> Roots:
    return Roots.of([str(tree)])


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_backend(request) -> str:
    """Every test that builds an app runs on both stores (`-m "not postgres"` for SQLite only)."""
    return request.param


@pytest.fixture
def settings(request, store_backend: str, tree: Path, data_dir: Path) -> Settings:
    url = request.getfixturevalue("pg_database") if store_backend == "postgresql" else None
    return Settings(data_dir=data_dir, roots=[str(tree)], use_prefect=False, database_url=url)


@pytest.fixture
def app(settings: Settings):
    a = AssayApp.create(settings)
    yield a
    a.close()
    a.engine.dispose()
    from store.engine import dispose_engines

    dispose_engines()


@pytest.fixture
async def client(app):
    async with Client(build_server(app)) as c:
        yield c


class ToolFailed(Exception):
    pass


async def call(client, tool: str, args: dict | None = None) -> dict:
    """Call a tool; return its structured result, or raise ToolFailed with the error text."""
    result = await client.call_tool(tool, args or {})
    if result.is_error:
        raise ToolFailed(result.content[0].text)
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


async def read_json(client, uri: str):
    result = await client.read_resource(uri)
    return json.loads(result.contents[0].text)


def wait_for(predicate, timeout: float = 20.0, what: str = "condition"):
    """Poll ``predicate`` until it returns something true (returned), or fail after ``timeout`` seconds; for
    watchers and other background work. Never a timing assertion: the timeout only bounds a hang."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def index_sync(app, path: Path | str) -> dict:
    """Index synchronously through the plain function (no MCP), for tests that need a populated store."""
    from flows.index.service import index_path

    return index_path(app.runner, root=str(path), async_=False, max_age=0)


@pytest.fixture
def anyio_backend():
    return "asyncio"


def _postgres_bin(name: str) -> str | None:
    """A PostgreSQL server binary: on PATH, or where Debian's postgresql package puts it."""
    return pg_bin(name)


@pytest.fixture(scope="session")
def pg_url():
    """A throw-away PostgreSQL cluster listening on loopback (skipped where the server is not installed)."""
    import shutil
    import socket
    import subprocess

    pytest.importorskip("psycopg")
    initdb, pg_ctl = _postgres_bin("initdb"), _postgres_bin("pg_ctl")
    if not initdb or not pg_ctl:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) are not installed: apt-get install postgresql")
    base = Path(tempfile.mkdtemp(prefix="assay-pg-"))  # not under pytest's 0700 tmp: the server user must enter it
    data, sock = base / "data", base / "sock"
    sock.mkdir()
    prefix: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root
        if not shutil.which("runuser"):
            pytest.skip("running as root without runuser to start PostgreSQL as another user")
        shutil.chown(base, "postgres")
        shutil.chown(sock, "postgres")
        prefix = ["runuser", "-u", "postgres", "--"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE, "check": True, "timeout": 120}
    subprocess.run(prefix + [initdb, "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync"], **quiet)
    subprocess.run(prefix + [pg_ctl, "-D", str(data), "-w", "-l", str(base / "log"), "-o",
                             f"-p {port} -k {sock} -c listen_addresses=127.0.0.1 -c fsync=off", "start"], **quiet)
    try:
        yield f"postgresql+psycopg://postgres:secret@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(prefix + [pg_ctl, "-D", str(data), "-m", "immediate", "stop"], **{**quiet, "check": False})
        shutil.rmtree(base, ignore_errors=True)


@contextlib.contextmanager
def fresh_pg_database(pg_url: str, prefix: str = "assay"):
    """A fresh, empty database in the session's PostgreSQL cluster (its URL), dropped afterwards: for fixtures of any
    scope."""
    import uuid

    from sqlalchemy import create_engine, text

    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = create_engine(pg_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield pg_url.rsplit("/", 1)[0] + "/" + name
    finally:
        from store.engine import dispose_engines

        dispose_engines()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]  # params of two-store fixtures


@contextlib.contextmanager
def backend_engine(request, tmp_path_factory, prefix: str = "assay"):
    """A store engine of the fixture's backend (``request.param``: sqlite | postgresql) on a fresh database,
    disposed (and the PostgreSQL database dropped) afterwards: for module-scoped fixtures with BACKENDS."""
    from store.engine import make_engine

    if request.param == "sqlite":
        engine = make_engine(f"sqlite:///{tmp_path_factory.mktemp(prefix) / 'assay.db'}")
        try:
            yield engine
        finally:
            engine.dispose()
    else:
        with fresh_pg_database(request.getfixturevalue("pg_url"), prefix) as url:
            engine = make_engine(url)
            try:
                yield engine
            finally:
                engine.dispose()


@pytest.fixture
def pg_database(pg_url):
    """A fresh, empty database in the session's PostgreSQL cluster, dropped afterwards."""
    with fresh_pg_database(pg_url) as url:
        yield url



@pytest.fixture(scope="session", autouse=True)
def bench_runs(request, tmp_path_factory):
    """The benchmark smoke runs whose tests this session collected, started now in the background (tests/bench_runs.py
    says why); a smoke test waits for its own with ``bench_runs.result(name)``."""
    names = {name for item in request.session.items
             if (module := getattr(item, "module", None)) and (name := module_bench(module.__name__))}
    base = tmp_path_factory.getbasetemp()  # under xdist, each worker's is a folder of the session's
    shared = base.parent / "bench-runs" if os.environ.get("PYTEST_XDIST_WORKER") else base / "bench-runs"
    shared.mkdir(exist_ok=True)
    runs = BenchRuns(names, shared, runner=is_runner())
    yield runs
    runs.close()
