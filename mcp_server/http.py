"""Streamable HTTP at /mcp: Host and Origin checked on every request (DNS rebinding, foreign web pages), then the CORS
behaviour of reference 000.

Which requests are served: a ``Host`` header naming a loopback address (``127.0.0.1``, ``localhost``, ``[::1]``, any
port) or one of the configured allowed hosts (refused with 421 otherwise), and no ``Origin`` or a loopback origin or
one of the configured origins (refused with 403 otherwise, as the MCP specification asks). A server bound to a
non-loopback address must be told its allowed hosts. ``*`` in the origins (``CORS_ORIGINS=*``) accepts every origin,
reference 000's default, with a warning at start; ``*`` in the allowed hosts accepts every host.

Behind the same guard, ``GET``/``HEAD /api/content?path=cache/ab/cd/<hash>.jpg`` serves the classifier's artifacts
(thumbnails, timeline frames) from the content-addressed cache under the data dir (reference 000's form; inspect's
and navigate's URLs point here, see :func:`content_base`). Only the exact shape of a cache path is accepted
(flows.classify.cache.is_cache_path: no ``..``, no absolute path, nothing outside ``cache/``), and the file's real
path must lie inside the cache (a symlink out is refused). A cache file's name is the hash of its bytes, so it is
served as immutable with that hash as its ETag (304 on a matching If-None-Match).
"""

from __future__ import annotations

import ipaddress
import logging
from pathlib import Path
from typing import Callable, Literal, Sequence
from urllib.parse import parse_qs

import anyio.to_thread
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_server.config import ConfigError
from mcp_server.guard.verifier import RefusalRecorder
from store import cache

log = logging.getLogger(__name__)

ALLOW_METHODS = "GET, POST, PUT, PATCH, DELETE, OPTIONS"
ALLOW_HEADERS = "Origin, Content-Type, Accept, Authorization, Mcp-Session-Id, X-Requested-With"
EXPOSE_HEADERS = "Content-Length, Content-Type, Mcp-Session-Id"
MAX_AGE = "86400"

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
LOOPBACK_ORIGINS = tuple(f"{scheme}://{host}" for scheme in ("http", "https") for host in LOOPBACK_HOSTS)


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` listens on the loopback interface only."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _with_any_port(values: Sequence[str]) -> list[str]:
    """Each value as given and, when it names no port, with any port (the SDK's ``name:*`` pattern)."""
    out: list[str] = []
    for value in values:
        value = value.rstrip("/")
        out.append(value)
        if not value.rsplit("]", 1)[-1].rsplit("/", 1)[-1].count(":"):
            out.append(value + ":*")
    return list(dict.fromkeys(out))


def transport_security(settings) -> TransportSecuritySettings:
    """The SDK's transport-security settings for ``settings``: the hosts and origins accepted.

    Raises :class:`ConfigError` for a non-loopback binding without allowed hosts: any web page could otherwise reach
    the server under a name of the attacker's choosing (DNS rebinding).
    """
    if not is_loopback(settings.host) and not settings.allowed_hosts:
        raise ConfigError(
            f"the HTTP server binds {settings.host}, which is not a loopback address: say which host names clients "
            "use to reach it with --allowed-hosts (ASSAY_ALLOWED_HOSTS, server.allowed_hosts), e.g. "
            "--allowed-hosts assay.lan,192.168.1.10; '*' accepts any Host header (only behind a proxy that checks "
            "it)", field="allowed_hosts")
    hosts = [*LOOPBACK_HOSTS, *(h for h in settings.allowed_hosts if h != "*")]
    origins = [*_with_any_port(LOOPBACK_ORIGINS), *(o.rstrip("/") for o in settings.cors_origins if o != "*")]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=_with_any_port(hosts),
                                     allowed_origins=list(dict.fromkeys(origins)))


class RequestGuard(TransportSecurityMiddleware):
    """The SDK's Host and Origin validation applied to every HTTP request, preflights included, before anything
    else sees it; ``*`` among the configured hosts or origins accepts any."""

    def __init__(self, app: ASGIApp, security: TransportSecuritySettings, *, any_host: bool = False,
                 any_origin: bool = False) -> None:
        super().__init__(security)
        self.app = app
        self.any_host = any_host
        self.any_origin = any_origin

    def _validate_host(self, host: str | None) -> bool:
        return (self.any_host and bool(host)) or super()._validate_host(host)

    def _validate_origin(self, origin: str | None) -> bool:
        return self.any_origin or super()._validate_origin(origin)

    def origin_allowed(self, origin: str) -> bool:
        return self._validate_origin(origin.rstrip("/"))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refused = await self.validate_request(Request(scope), is_post=False)
            if refused is not None:
                await refused(scope, receive, send)
                return
        await self.app(scope, receive, send)


class CORSMiddleware:
    """Answers preflights and adds CORS headers to every response for allowed origins.

    ``Access-Control-Allow-Origin`` echoes the request's origin; with the wildcard and credentials off it is ``*``
    (browsers refuse ``*`` together with credentials, so the origin is echoed whenever credentials are on).
    A request from an origin that is not allowed gets no CORS headers (the browser then blocks it) and a preflight
    from it is answered 403.
    """

    def __init__(self, app: ASGIApp, *, allowed: Callable[[str], bool], wildcard: bool = False,
                 credentials: bool = True) -> None:
        self.app = app
        self.allowed = allowed
        self.wildcard = wildcard
        self.credentials = credentials

    def headers_for(self, origin: str) -> list[tuple[bytes, bytes]]:
        allow_origin = "*" if self.wildcard and not self.credentials else origin
        headers = [
            (b"access-control-allow-origin", allow_origin.encode()),
            (b"access-control-expose-headers", EXPOSE_HEADERS.encode()),
            (b"vary", b"Origin"),
        ]
        if self.credentials:
            headers.append((b"access-control-allow-credentials", b"true"))
        return headers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        origin = request_headers.get("origin")
        if scope["method"] == "OPTIONS" and origin and "access-control-request-method" in request_headers:
            if not self.allowed(origin):
                await _respond(send, 403, [(b"content-type", b"text/plain")], b"origin not allowed")
                return
            headers = self.headers_for(origin) + [
                (b"access-control-allow-methods", ALLOW_METHODS.encode()),
                (b"access-control-allow-headers", ALLOW_HEADERS.encode()),
                (b"access-control-max-age", MAX_AGE.encode()),
                (b"content-length", b"0"),
            ]
            await _respond(send, 204, headers, b"")
            return
        if not origin or not self.allowed(origin):
            await self.app(scope, receive, send)
            return
        extra = self.headers_for(origin)

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {k.lower() for k, _ in extra}
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in names]
                message = {**message, "headers": kept + extra}
            await send(message)

        await self.app(scope, receive, send_with_cors)


async def _respond(send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


CONTENT_PATH = "/api/content"
CHUNK = 64 * 1024
IMMUTABLE = "public, max-age=31536000, immutable"


def content_base(settings) -> str | None:
    """The address artifact URLs start with: the public URL when one is set (a proxy), else the HTTP server's own
    ``http://HOST:PORT`` (a wildcard binding names its first allowed host, or 127.0.0.1); None under stdio, where
    there is no HTTP server and artifacts are read as ``synthesis://content/...`` resources instead."""
    if getattr(settings, "public_url", None):
        return settings.public_url.rstrip("/")
    if settings.transport != "http":
        return None
    host = settings.host
    if host in ("0.0.0.0", "::", ""):
        host = next((h for h in settings.allowed_hosts if h != "*"), "127.0.0.1")
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{settings.port}"


class ContentRoute:
    """``GET``/``HEAD /api/content?path=cache/...``: one cached artifact, immutable, with its hash as ETag; every other
    request goes on to ``app``."""

    def __init__(self, app: ASGIApp, data_dir: str | Path) -> None:
        self.app = app
        self.data_dir = Path(data_dir)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != CONTENT_PATH:
            await self.app(scope, receive, send)
            return
        text = [(b"content-type", b"text/plain; charset=utf-8")]
        if scope["method"] not in ("GET", "HEAD"):
            await _respond(send, 405, text + [(b"allow", b"GET, HEAD")], b"only GET and HEAD are served here")
            return
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        rel = (query.get("path") or [""])[0]
        if not cache.is_cache_path(rel):
            await _respond(send, 400, text, b"path must be a cache path such as cache/ab/cd/<32 hex digits>.jpg "
                                            b"(the url inspect and navigate give)")
            return
        file = cache.resolve(self.data_dir, rel)
        if file is None:
            await _respond(send, 404, text, b"no such artifact in the cache (it may have been swept after its entry "
                                            b"went; inspect the entry again for a current url)")
            return
        etag = '"' + rel.rsplit("/", 1)[-1].split(".", 1)[0] + '"'
        headers = [(b"etag", etag.encode()), (b"cache-control", IMMUTABLE.encode()),
                   (b"x-content-type-options", b"nosniff")]
        request_headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        wanted = request_headers.get("if-none-match", "")
        if wanted.strip() == "*" or etag in [t.strip().removeprefix("W/") for t in wanted.split(",")]:
            await _respond(send, 304, headers, b"")
            return
        size = file.stat().st_size
        headers += [(b"content-type", cache.mime_type(rel).encode()), (b"accept-ranges", b"bytes")]
        span = byte_range(request_headers.get("range"), size)
        if span == "unsatisfiable":
            await _respond(send, 416, text + [(b"content-range", f"bytes */{size}".encode())],
                           f"the range asked for lies outside the file's {size} bytes".encode())
            return
        start, end = span if span is not None else (0, size - 1)
        status = 206 if span is not None else 200
        if span is not None:
            headers.append((b"content-range", f"bytes {start}-{end}/{size}".encode()))
        headers.append((b"content-length", str(max(end - start + 1, 0)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        if scope["method"] == "HEAD" or end < start:
            await send({"type": "http.response.body", "body": b""})
            return
        with open(file, "rb") as fh:  # read in a worker thread, chunk by chunk: the event loop never waits on disk
            fh.seek(start)
            left = end - start + 1
            while left > 0:
                chunk = await anyio.to_thread.run_sync(fh.read, min(CHUNK, left))
                left = left - len(chunk) if chunk else 0
                await send({"type": "http.response.body", "body": chunk, "more_body": left > 0})


def byte_range(header: str | None, size: int) -> tuple[int, int] | Literal["unsatisfiable"] | None:
    """The one byte range a ``Range`` header asks for, as (first, last) inclusive; None to send the whole file (no
    header, a malformed one or several ranges: RFC 9110 lets a server ignore those); "unsatisfiable" when it starts
    past the end. Players seek in a clip this way."""
    if not header or not header.strip().lower().startswith("bytes="):
        return None
    spec = header.strip()[6:].strip()
    if "," in spec or "-" not in spec:
        return None
    first, _, last = spec.partition("-")
    try:
        if not first.strip():  # bytes=-N: the last N bytes
            n = int(last)
            if n <= 0:
                return "unsatisfiable"
            return (max(size - n, 0), size - 1) if size else "unsatisfiable"
        start = int(first)
        end = int(last) if last.strip() else size - 1
    except ValueError:
        return None
    if start >= size:
        return "unsatisfiable"
    if start < 0 or end < start:
        return None
    return start, min(end, size - 1)


def http_app(mcp, settings) -> ASGIApp:
    """The ASGI app: Host/Origin checks (:class:`RequestGuard`), then CORS, then the artifact route
    (:class:`ContentRoute`, /api/content) and the MCP SDK's Streamable HTTP app at /mcp. Raises
    :class:`ConfigError` when the settings would leave the server open (see :func:`transport_security`)."""
    security = transport_security(settings)
    any_origin = "*" in settings.cors_origins
    if any_origin:
        log.warning("CORS_ORIGINS is *: any web page open in a browser on this machine may call every tool, "
                    "delete-files included (reference 000's default); list the origins you use instead, e.g. "
                    "CORS_ORIGINS=http://localhost:5173")
    # The guard below checks every request before the SDK sees it (preflights too, and with '*' understood), so the
    # SDK's own check is off; its Content-Type check of POST requests stays.
    inner = mcp.streamable_http_app(
        streamable_http_path="/mcp", host=settings.host,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
    guard = RequestGuard(inner, security, any_host="*" in settings.allowed_hosts, any_origin=any_origin)
    routes: ASGIApp = ContentRoute(inner, settings.data_dir)
    if getattr(mcp, "authenticated", False):  # refused tokens reach the audit log
        routes = RefusalRecorder(routes, mcp.guard.refused_authentication)
    guard.app = CORSMiddleware(routes, allowed=guard.origin_allowed, wildcard=any_origin,
                               credentials=settings.cors_credentials)
    return guard


async def serve_http(mcp, settings) -> None:
    import uvicorn  # only a server over HTTP needs it

    config = uvicorn.Config(http_app(mcp, settings), host=settings.host, port=settings.port, log_level="warning",
                            lifespan="on")
    await uvicorn.Server(config).serve()
