"""A guarded assay server over real HTTP for the guard's tests: the app built in this process, served by uvicorn on a
loopback port in a thread, with --auth, local users and their API tokens, and an identity provider's JWKS served by
tests/mcp_server/guard/test_jwt_verifier.py's JwksServer."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from mcp_server.app import AssayApp, build_server
from mcp_server.config import Settings
from mcp_server.http import http_app
from store import users as store_users
from tests.conftest import make_tree
from tests.mcp_server.guard.test_jwt_verifier import AUDIENCE, ISSUER, JwksServer

USERS = {"vera": "viewer", "ed": "editor", "ada": "admin"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Guarded:
    app: AssayApp
    url: str
    tree: Path
    jwks: JwksServer
    tokens: dict[str, str] = field(default_factory=dict)  # user -> API token

    def client(self, token: str | None = None, *, mode: str = "auto") -> Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        transport = streamable_http_client(self.url, http_client=create_mcp_http_client(headers=headers))
        return Client(transport, mode=mode)  # type: ignore[arg-type]

    @contextlib.asynccontextmanager
    async def session(self, user: str, *, mode: str = "auto") -> AsyncIterator[Client]:
        async with self.client(self.tokens[user], mode=mode) as c:
            yield c


@contextlib.contextmanager
def guarded_server(base: Path, **guard: Any) -> Iterator[Guarded]:
    """The server (see the module docstring): users vera (viewer), ed (editor), ada (admin) and lim (editor limited
    to the tree's Photos), each with a token; ``guard`` settings over the defaults (the JWT issuer is set)."""
    tree = make_tree(base / "home" / "user")
    jwks = JwksServer()
    port = free_port()
    settings = Settings(data_dir=base / "data", roots=[str(tree)], use_prefect=False, transport="http", port=port,
                        auth=True, guard={"jwt_issuer": ISSUER, "jwt_audience": [AUDIENCE],
                                          "jwt_jwks_url": jwks.url, **guard})
    app = AssayApp.create(settings)
    server = uvicorn.Server(uvicorn.Config(http_app(build_server(app), settings), host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, name="guarded-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the guarded test server did not start")
        time.sleep(0.02)
    g = Guarded(app, f"http://127.0.0.1:{port}/mcp", tree, jwks)
    for name, role in USERS.items():
        store_users.create_user(app.engine, name, role=role)
        g.tokens[name] = store_users.create_token(app.engine, name)[0]
    store_users.create_user(app.engine, "lim", role="editor", roots=[str(tree / "Photos")])
    g.tokens["lim"] = store_users.create_token(app.engine, "lim")[0]
    try:
        yield g
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        jwks.stop()
        app.close()
        app.engine.dispose()
