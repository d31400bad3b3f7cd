"""CORS and the Streamable HTTP endpoint over real HTTP: uvicorn on a free loopback port in a thread, httpx as
client."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from pathlib import Path
from typing import Iterator

import httpx
import pytest
import uvicorn

from mcp_server.app import AssayApp, build_server
from mcp_server.config import load_settings
from mcp_server.http import ALLOW_HEADERS, ALLOW_METHODS, EXPOSE_HEADERS, http_app
from tests.conftest import make_tree

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "cors-test", "version": "1"}}}
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
APP_ORIGIN = "http://localhost:5173"
OTHER_ORIGIN = "https://evil.example"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(tmp: Path, *, env: dict[str, str] | None = None, config: str | None = None,
            cli: dict | None = None) -> Iterator[str]:
    """The real ASGI app built from settings (env / YAML / cli) behind uvicorn at 127.0.0.1; yields its base URL."""
    tree = make_tree(tmp / "home" / "user")
    config_file = None
    if config is not None:
        config_file = tmp / "assay.yaml"
        config_file.write_text(config)
    settings = load_settings({"roots": [str(tree)], "data_dir": str(tmp / "data"), "use_prefect": False,
                              **(cli or {})}, config_file=config_file, env=env or {})
    app = AssayApp.create(settings)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(http_app(build_server(app), settings), host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        for _ in range(500):
            if server.started:
                break
            if not thread.is_alive():
                raise RuntimeError("uvicorn stopped before it started")
            time.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        app.close()
        app.engine.dispose()


def preflight(base: str, origin: str, **headers: str) -> httpx.Response:
    return httpx.options(base + "/mcp", headers={"Origin": origin, "Access-Control-Request-Method": "POST",
                                                 "Access-Control-Request-Headers": "content-type, mcp-session-id",
                                                 **headers})


def initialize(base: str, **headers: str) -> httpx.Response:
    return httpx.post(base + "/mcp", json=INIT, headers={**MCP_HEADERS, **headers})


@pytest.fixture(scope="module")
def wildcard(tmp_path_factory) -> Iterator[str]:
    with serving(tmp_path_factory.mktemp("wildcard"), env={"CORS_ORIGINS": "*"}) as base:
        yield base


@pytest.fixture(scope="module")
def default(tmp_path_factory) -> Iterator[str]:
    with serving(tmp_path_factory.mktemp("default")) as base:
        yield base


@pytest.fixture(scope="module")
def listed_by_env(tmp_path_factory) -> Iterator[str]:
    with serving(tmp_path_factory.mktemp("env"), env={"CORS_ORIGINS": f"{APP_ORIGIN}, https://app.example.com"}) as b:
        yield b


def test_preflight_answers_every_reference_header(wildcard):
    res = preflight(wildcard, APP_ORIGIN)
    assert res.status_code == 204
    h = res.headers
    assert h["access-control-allow-origin"] == APP_ORIGIN  # echoed: credentials are on by default
    assert h["access-control-allow-methods"] == "GET, POST, PUT, PATCH, DELETE, OPTIONS" == ALLOW_METHODS
    assert h["access-control-allow-headers"] == (
        "Origin, Content-Type, Accept, Authorization, Mcp-Session-Id, X-Requested-With") == ALLOW_HEADERS
    assert h["access-control-expose-headers"] == "Content-Length, Content-Type, Mcp-Session-Id" == EXPOSE_HEADERS
    assert h["access-control-allow-credentials"] == "true"
    assert h["access-control-max-age"] == "86400"
    assert "origin" in h["vary"].lower()


def test_wildcard_echoes_any_origin_and_the_post_carries_cors_headers(wildcard):
    assert preflight(wildcard, OTHER_ORIGIN).headers["access-control-allow-origin"] == OTHER_ORIGIN
    res = initialize(wildcard, Origin=OTHER_ORIGIN)
    assert res.status_code == 200
    assert res.headers["access-control-allow-origin"] == OTHER_ORIGIN
    assert res.headers["access-control-allow-credentials"] == "true"
    assert "Mcp-Session-Id" in res.headers["access-control-expose-headers"]
    assert res.headers["mcp-session-id"]  # the header a browser may now read
    assert "serverInfo" in res.text


def test_request_without_origin_gets_no_cors_headers(wildcard):
    res = initialize(wildcard)
    assert res.status_code == 200 and "access-control-allow-origin" not in res.headers


def test_wildcard_without_credentials_answers_star(tmp_path):
    with serving(tmp_path, config="server:\n  cors_credentials: false\n  cors_origins: ['*']\n") as base:
        res = preflight(base, APP_ORIGIN)
        assert res.headers["access-control-allow-origin"] == "*"
        assert "access-control-allow-credentials" not in res.headers
        assert initialize(base, Origin=APP_ORIGIN).headers["access-control-allow-origin"] == "*"


def test_env_origins_allow_listed_ones(listed_by_env):
    for origin in (APP_ORIGIN, "https://app.example.com"):
        res = preflight(listed_by_env, origin)
        assert res.status_code == 204 and res.headers["access-control-allow-origin"] == origin
    res = initialize(listed_by_env, Origin=APP_ORIGIN)
    assert res.status_code == 200 and res.headers["access-control-allow-origin"] == APP_ORIGIN


def test_env_origins_refuse_others(listed_by_env):
    res = preflight(listed_by_env, OTHER_ORIGIN)
    assert res.status_code == 403 and "access-control-allow-origin" not in res.headers
    post = initialize(listed_by_env, Origin=OTHER_ORIGIN)
    assert "access-control-allow-origin" not in post.headers
    assert post.status_code == 403  # loopback bind with a list: the SDK's origin check refuses it too


def test_loopback_with_listed_origins_refuses_a_foreign_host_header(listed_by_env):
    assert initialize(listed_by_env, Host="attacker.example").status_code == 421
    assert initialize(listed_by_env, Host=listed_by_env.removeprefix("http://")).status_code == 200


def test_yaml_reference_example_configures_origins_and_a_public_host(tmp_path):
    config = ('server:\n  port: 3000\n  host: "0.0.0.0"\n  cors_origins:\n'
              '    - "http://localhost:5173"\n    - "https://app.example.com"\n  allowed_hosts: [assay.lan]\n')
    with serving(tmp_path, config=config) as base:
        assert preflight(base, "https://app.example.com").headers["access-control-allow-origin"] == (
            "https://app.example.com")
        assert preflight(base, OTHER_ORIGIN).status_code == 403
        # bound to every interface: clients reach it by the names it was given, on any port
        res = initialize(base, Host="assay.lan:3000", Origin=APP_ORIGIN)
        assert res.status_code == 200 and res.headers["access-control-allow-origin"] == APP_ORIGIN
        assert initialize(base, Host="attacker.example:3000").status_code == 421


def test_session_id_round_trips_for_tools_list(wildcard):
    init = initialize(wildcard, Origin=APP_ORIGIN)
    session = init.headers["mcp-session-id"]
    common = {**MCP_HEADERS, "Origin": APP_ORIGIN, "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-06-18"}
    httpx.post(wildcard + "/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=common)
    res = httpx.post(wildcard + "/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=common)
    assert res.status_code == 200 and '"navigate"' in res.text
    assert res.headers["access-control-allow-origin"] == APP_ORIGIN


def test_default_accepts_loopback_origins_on_any_port_and_refuses_others(default):
    for origin in ("http://localhost:5173", "http://127.0.0.1:8080", "http://[::1]:3000", "https://localhost"):
        res = preflight(default, origin)
        assert res.status_code == 204 and res.headers["access-control-allow-origin"] == origin
        assert initialize(default, Origin=origin).status_code == 200
    for origin in (OTHER_ORIGIN, "null", "http://localhost.evil.example", "http://127.0.0.1.evil.example:80"):
        assert preflight(default, origin).status_code == 403
        res = initialize(default, Origin=origin)
        assert res.status_code == 403 and "access-control-allow-origin" not in res.headers


def test_default_refuses_a_foreign_host_even_in_a_preflight(default):
    assert preflight(default, APP_ORIGIN, Host="attacker.example:3000").status_code == 421
    assert initialize(default, Host="attacker.example").status_code == 421
    assert initialize(default, Host="localhost:1234").status_code == 200


def test_a_public_binding_without_allowed_hosts_is_refused(tmp_path):
    from mcp_server.config import ConfigError
    from mcp_server.http import transport_security

    for host in ("0.0.0.0", "192.168.1.10", "::"):
        with pytest.raises(ConfigError, match="--allowed-hosts"):
            transport_security(load_settings({"host": host}, env={}))
    for host in ("127.0.0.1", "127.0.0.2", "localhost", "::1"):
        transport_security(load_settings({"host": host}, env={}))
    transport_security(load_settings({"host": "0.0.0.0"}, env={"ASSAY_ALLOWED_HOSTS": "assay.lan"}))
