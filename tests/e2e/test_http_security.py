"""The HTTP endpoint of a real `assay serve --transport http` process against forged Host and Origin headers (DNS
rebinding, foreign web pages), with raw HTTP requests (httpx)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import REPO, _stop, free_port, serve_args, server_env

pytestmark = pytest.mark.e2e

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "security-test", "version": "1"}}}
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


class Server:
    def __init__(self, proc: subprocess.Popen, port: int, log: Path) -> None:
        self.proc, self.port, self.log = proc, port, log
        self.base = f"http://127.0.0.1:{port}"

    def post(self, body: dict, **headers: str) -> httpx.Response:
        return httpx.post(self.base + "/mcp", json=body, headers={**HEADERS, **headers}, timeout=30)

    def output(self) -> str:
        return self.log.read_text()


@pytest.fixture
def serve(tmp_path: Path, tree: Path):
    """Starts `assay serve --transport http` with extra arguments and environment; waits until /mcp answers."""
    started: list[subprocess.Popen] = []

    def start(*extra: str, env: dict[str, str] | None = None) -> Server:
        port = free_port()
        log = tmp_path / f"serve-{port}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                serve_args(tree, prefect=False, extra=["--transport", "http", "--port", str(port), *extra]),
                stdout=out, stderr=subprocess.STDOUT, env={**server_env(tmp_path, prefect=False), **(env or {})},
                cwd=REPO, start_new_session=True)
        started.append(proc)
        server = Server(proc, port, log)
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"assay serve exited with {proc.returncode}:\n{log.read_text()}")
            try:
                httpx.get(server.base + "/mcp", timeout=1)
                return server
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"assay serve did not answer on {port}:\n{log.read_text()}") from None
                time.sleep(0.1)

    yield start
    for proc in started:
        _stop(proc)


def _session(server: Server) -> dict[str, str]:
    """Initialise a session the honest way (loopback Host, no Origin); the headers a follow-up request needs."""
    init = server.post(INIT)
    assert init.status_code == 200, init.text
    common = {"Mcp-Session-Id": init.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-06-18"}
    server.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, **common)
    return common


def test_a_forged_host_is_refused_and_delete_files_never_runs(serve, tree):
    server = serve()
    victim = tree / "Photos" / "notes.txt"
    common = _session(server)
    delete = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "delete-files", "arguments": {"paths": [str(victim)], "force": True}}}
    # a page on attacker.example whose name now resolves to 127.0.0.1: the browser sends the attacker's Host
    for host in ("attacker.example", f"attacker.example:{server.port}", "127.0.0.1.attacker.example"):
        refused = server.post(delete, Host=host, **common)
        assert refused.status_code == 421, (host, refused.status_code, refused.text)
        assert server.post(INIT, Host=host).status_code == 421
    assert victim.exists()


def test_a_forged_origin_is_refused_with_403(serve, tree):
    server = serve()
    for origin in ("https://evil.example", "null", "http://localhost.evil.example"):
        res = server.post(INIT, Origin=origin)
        assert res.status_code == 403, (origin, res.status_code)
        assert "access-control-allow-origin" not in res.headers
        preflight = httpx.options(server.base + "/mcp", headers={"Origin": origin,
                                                                "Access-Control-Request-Method": "POST"})
        assert preflight.status_code == 403


def test_loopback_hosts_and_origins_are_served(serve):
    server = serve()
    for host in (f"127.0.0.1:{server.port}", f"localhost:{server.port}", "localhost"):
        assert server.post(INIT, Host=host).status_code == 200, host
    for origin in ("http://localhost:5173", f"http://127.0.0.1:{server.port}", "http://[::1]:8080"):
        res = server.post(INIT, Origin=origin)
        assert res.status_code == 200 and res.headers["access-control-allow-origin"] == origin
    assert "CORS_ORIGINS is *" not in server.output()


def test_a_configured_origin_is_served_and_others_still_refused(serve, tmp_path):
    config = tmp_path / "assay.yaml"
    config.write_text('server:\n  cors_origins: ["https://app.example.com"]\n')
    server = serve("--config", str(config))
    res = server.post(INIT, Origin="https://app.example.com")
    assert res.status_code == 200 and res.headers["access-control-allow-origin"] == "https://app.example.com"
    assert server.post(INIT, Origin="https://app.example.com:8443").status_code == 403  # another origin
    assert server.post(INIT, Origin="https://evil.example").status_code == 403
    assert server.post(INIT, Origin="http://localhost:5173").status_code == 200  # loopback origins stay allowed


def test_cors_origins_star_accepts_any_origin_with_a_warning_at_start(serve):
    server = serve(env={"CORS_ORIGINS": "*"})
    res = server.post(INIT, Origin="https://evil.example")
    assert res.status_code == 200 and res.headers["access-control-allow-origin"] == "https://evil.example"
    output = server.output()
    assert "WARNING" in output and "CORS_ORIGINS is *" in output and "delete-files" in output
    assert server.post(INIT, Host="attacker.example").status_code == 421  # hosts are still checked


def test_a_non_loopback_binding_without_allowed_hosts_is_refused_at_start(tmp_path, tree):
    port = free_port()
    done = subprocess.run(
        serve_args(tree, prefect=False, extra=["--transport", "http", "--host", "0.0.0.0", "--port", str(port)]),
        capture_output=True, text=True, env=server_env(tmp_path, prefect=False), cwd=REPO, timeout=120)
    assert done.returncode == 2
    assert "0.0.0.0" in done.stderr and "not a loopback address" in done.stderr
    assert "--allowed-hosts" in done.stderr and "Traceback" not in done.stderr
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/mcp", timeout=2)


def test_a_non_loopback_binding_serves_its_allowed_hosts_only(serve, tmp_path, tree):
    # without auth it must be told so explicitly (issue 23): refused first, with the ways out
    args = serve_args(tree, prefect=False, extra=["--transport", "http", "--host", "0.0.0.0", "--allowed-hosts",
                                                  "assay.lan"])
    done = subprocess.run(args, capture_output=True, text=True, env=server_env(tmp_path, prefect=False), cwd=REPO,
                          timeout=120)
    assert done.returncode == 2 and "--auth" in done.stderr and "--allow-unauthenticated" in done.stderr
    server = serve("--host", "0.0.0.0", "--allowed-hosts", "assay.lan", "--allow-unauthenticated")
    assert server.post(INIT, Host=f"assay.lan:{server.port}").status_code == 200
    assert server.post(INIT, Host=f"127.0.0.1:{server.port}").status_code == 200
    assert server.post(INIT, Host=f"attacker.example:{server.port}").status_code == 421
