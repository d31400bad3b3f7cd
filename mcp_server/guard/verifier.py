"""Bearer tokens over HTTP, through the MCP SDK's own auth (its bearer middleware, protected-resource metadata at
``/.well-known/oauth-protected-resource/mcp`` and ``WWW-Authenticate`` on 401): a local user's API token (hashed in
the store, store/users.py) or, when ``guard.jwt_issuer`` is set, an identity provider's JWT
(mcp_server/guard/jwt_verifier.py).

A verified token becomes an ``AccessToken`` whose scopes are the caller's permissions and whose claims name the user
and its roots (read back by mcp_server/guard/caller.py). The SDK requires the ``mcp_access`` scope of every request
(403 ``insufficient_scope`` without it). A refused token is answered 401 by the SDK with nothing else revealed; why it
was refused (expired, revoked, wrong audience, ...) goes to the audit log only, through :class:`RefusalRecorder`,
which wraps the HTTP app and sees the 401 go out.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

import anyio.to_thread
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from pydantic import AnyHttpUrl
from sqlalchemy.engine import Engine
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from flows.core.roots import Roots, narrowed
from mcp_server.guard.jwt_verifier import JwtSettings, JwtVerifier, TokenRefused, looks_like_jwt
from store import users as store_users

log = logging.getLogger(__name__)

_refusal: ContextVar[dict[str, str] | None] = ContextVar("assay_auth_refusal", default=None)


def _note(reason: str) -> None:
    holder = _refusal.get()
    if holder is not None:
        holder["reason"] = reason


class AssayTokenVerifier:
    """The SDK's ``TokenVerifier``: local API tokens, and JWTs when a verifier for them is given."""

    def __init__(self, engine: Engine, roots: Roots, *, jwt: JwtVerifier | None = None) -> None:
        self.engine = engine
        self.roots = roots
        self.jwt = jwt

    async def verify_token(self, token: str) -> AccessToken | None:
        fingerprint = hashlib.sha256(token.encode()).hexdigest()[:16]  # never the token itself
        if self.jwt is not None and looks_like_jwt(token):
            try:
                identity = await anyio.to_thread.run_sync(self.jwt.verify, token)
            except TokenRefused as exc:
                _note(f"JWT refused: {exc.reason}")
                return None
            return AccessToken(token=fingerprint, client_id=identity.client_id or identity.user,
                               scopes=sorted(identity.permissions), expires_at=identity.expires_at,
                               subject=identity.subject,
                               claims={"iss": identity.issuer, "assay_user": identity.user, "assay_source": "jwt"})
        user = await anyio.to_thread.run_sync(store_users.verify_token, self.engine, token)
        if user is None:
            _note("unknown, revoked or expired API token")
            return None
        permissions = set(user["permissions"])
        roots = user.get("roots")
        if roots and not narrowed(self.roots.configured, tuple(roots)):
            permissions.discard("mcp_access")  # limited to roots this server does not have: nothing to reach
        return AccessToken(token=fingerprint, client_id=user["name"], scopes=sorted(permissions),
                           subject=user["name"],
                           claims={"assay_user": user["name"], "assay_source": "token", "assay_roots": roots,
                                   "assay_token": user.get("token_id")})


def jwt_verifier(guard_settings: Any) -> JwtVerifier | None:
    """The JWT verifier the ``guard`` settings describe, or None without ``jwt_issuer``."""
    g = guard_settings
    if not g.jwt_issuer:
        return None
    if not g.jwt_audience or not g.jwt_jwks_url:
        raise ValueError("guard.jwt_issuer needs guard.jwt_audience and guard.jwt_jwks_url (ASSAY_JWT_AUDIENCE, "
                         "ASSAY_JWT_JWKS_URL)")
    return JwtVerifier(JwtSettings(issuer=g.jwt_issuer, audience=tuple(g.jwt_audience), jwks_url=g.jwt_jwks_url,
                                   user_claim=g.jwt_user_claim, roles_claim=g.jwt_roles_claim,
                                   role_map=dict(g.jwt_role_map), scope_prefix=g.jwt_scope_prefix,
                                   default_role=g.jwt_default_role))


def auth_settings(resource_url: str, issuer: str | None) -> AuthSettings:
    """The SDK's auth settings: this server is a resource server whose protected-resource metadata names the
    identity provider (or itself, for local API tokens only); every request needs ``mcp_access``."""
    return AuthSettings(issuer_url=AnyHttpUrl(issuer or resource_url), resource_server_url=AnyHttpUrl(resource_url),
                        required_scopes=["mcp_access"], validate_token_resource=False)


class RefusalRecorder:
    """Wraps the HTTP app: a request answered 401 (no token, or one the verifier refused) or 403 for want of
    ``mcp_access`` is reported to ``on_refused(reason, remote address)``."""

    def __init__(self, app: ASGIApp, on_refused: Callable[[str, str | None], None]) -> None:
        self.app = app
        self.on_refused = on_refused

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        holder: dict[str, str] = {}
        token = _refusal.set(holder)

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] in (401, 403):
                headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
                status = message["status"]
                if status == 401:
                    reason = holder.get("reason") or ("no bearer token" if "authorization" not in headers
                                                      else "malformed Authorization header")
                    client = scope.get("client")
                    self.on_refused(reason, f"{client[0]}:{client[1]}" if client else None)
                elif "insufficient_scope" in _header(message, b"www-authenticate"):
                    client = scope.get("client")
                    self.on_refused("no mcp_access permission", f"{client[0]}:{client[1]}" if client else None)
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            _refusal.reset(token)


def _header(message: Message, name: bytes) -> str:
    for key, value in message.get("headers", []):
        if key.lower() == name:
            return value.decode("latin-1")
    return ""
