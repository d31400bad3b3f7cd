"""Who is calling: the caller of one MCP request, as the guard sees it.

Over HTTP with ``server.auth``, the SDK's bearer middleware has checked the token (mcp_server/guard/verifier.py) and
put an ``AccessToken`` on the request, whose scopes are the caller's permissions and whose claims name the user and
the roots it is limited to. Under stdio, and over a loopback HTTP server without auth, the caller is the local
operator, with ``guard.local_permissions`` (default: all).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken

LOCAL_USER = "local"


@dataclass(frozen=True)
class Caller:
    user: str
    permissions: frozenset[str]
    roots: tuple[str, ...] | None = None  # None: every root the server has
    source: str = "local"  # local (stdio / unauthenticated loopback), token (a local API token), jwt
    session: str | None = None
    client: str | None = None

    @property
    def authenticated(self) -> bool:
        return self.source != "local"

    def public(self) -> dict[str, Any]:
        return {"user": self.user, "permissions": sorted(self.permissions), "roots": list(self.roots or []) or None,
                "source": self.source, "session": self.session, "client": self.client}


_current: ContextVar[Caller | None] = ContextVar("assay_caller", default=None)


def current() -> Caller | None:
    """The caller of the request being handled (None outside one)."""
    return _current.get()


def set_current(caller: Caller | None):
    """Make ``caller`` the current one; returns the token to reset it with :func:`reset`."""
    return _current.set(caller)


def reset(token) -> None:
    _current.reset(token)


def access_token_of(request: Any) -> AccessToken | None:
    """The access token the bearer middleware verified for ``request`` (a Starlette request, or None)."""
    if request is not None:
        user = request.scope.get("user")
        if isinstance(user, AuthenticatedUser):
            return user.access_token
    return get_access_token()


def from_token(token: AccessToken, *, session: str | None, client: str | None) -> Caller:
    claims: Mapping[str, Any] = token.claims or {}
    roots = claims.get("assay_roots")
    return Caller(user=str(claims.get("assay_user") or token.subject or token.client_id),
                  permissions=frozenset(token.scopes), roots=tuple(roots) if roots else None,
                  source=str(claims.get("assay_source") or "token"), session=session, client=client)


def local(permissions: frozenset[str], *, session: str | None, client: str | None) -> Caller:
    return Caller(user=LOCAL_USER, permissions=permissions, session=session, client=client)
