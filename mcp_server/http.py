"""Streamable HTTP at /mcp, wrapped in the CORS behaviour of reference 000."""

from __future__ import annotations

from typing import Sequence

from starlette.types import ASGIApp, Message, Receive, Scope, Send

ALLOW_METHODS = "GET, POST, PUT, PATCH, DELETE, OPTIONS"
ALLOW_HEADERS = "Origin, Content-Type, Accept, Authorization, Mcp-Session-Id, X-Requested-With"
EXPOSE_HEADERS = "Content-Length, Content-Type, Mcp-Session-Id"
MAX_AGE = "86400"


class CORSMiddleware:
    """Answers preflights and adds CORS headers to every response for allowed origins.

    ``Access-Control-Allow-Origin`` echoes the request's origin; with the wildcard and credentials off it is ``*``
    (browsers refuse ``*`` together with credentials, so the origin is echoed whenever credentials are on).
    A request from an origin that is not allowed gets no CORS headers (the browser then blocks it) and a preflight
    from it is answered 403.
    """

    def __init__(self, app: ASGIApp, *, origins: Sequence[str], credentials: bool = True) -> None:
        self.app = app
        self.origins = [o.rstrip("/") for o in origins]
        self.wildcard = "*" in self.origins
        self.credentials = credentials

    def allowed(self, origin: str) -> bool:
        return self.wildcard or origin.rstrip("/") in self.origins

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


def http_app(mcp, settings) -> ASGIApp:
    """The ASGI app: the MCP SDK's Streamable HTTP app at /mcp inside our CORS middleware."""
    from mcp.server.transport_security import TransportSecuritySettings

    # DNS-rebinding protection (Host and Origin checks) for loopback binds with an explicit origin list. With the
    # reference's default of every origin allowed, there is no origin to check against, so only CORS applies.
    loopback = settings.host in ("127.0.0.1", "localhost", "::1")
    # (Passing None would make the SDK turn on its own localhost-only origin list, refusing the browsers we allow.)
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    if loopback and "*" not in settings.cors_origins:
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1", "localhost", "[::1]", "127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=[o.rstrip("/") for o in settings.cors_origins],
        )
    inner = mcp.streamable_http_app(streamable_http_path="/mcp", transport_security=security, host=settings.host)
    return CORSMiddleware(inner, origins=settings.cors_origins, credentials=settings.cors_credentials)


async def serve_http(mcp, settings) -> None:
    import uvicorn

    config = uvicorn.Config(http_app(mcp, settings), host=settings.host, port=settings.port, log_level="warning",
                            lifespan="on")
    await uvicorn.Server(config).serve()
