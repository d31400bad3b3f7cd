"""The guard of a server, made from its settings: the middleware with its rate limits and audit log, and, over HTTP
with ``server.auth``, the SDK's auth (token verifier and settings). Refuses a server that would be open to a network:
a non-loopback HTTP binding without auth, unless the operator said ``server.allow_unauthenticated``."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from mcp.server.auth.settings import AuthSettings
from sqlalchemy.engine import Engine

from flows.core.roots import Roots
from flows.env import ConfigError
from mcp_server.guard.middleware import Guard
from mcp_server.guard.verifier import AssayTokenVerifier, auth_settings, jwt_verifier
from mcp_server.http import content_base, is_loopback
from store.audit import AuditLog, default_audit_url

log = logging.getLogger(__name__)


@dataclass
class ServerAuth:
    verifier: AssayTokenVerifier
    settings: AuthSettings


def check_exposure(settings: Any) -> None:
    """:class:`ConfigError` for an HTTP server on a non-loopback address without auth, unless allowed explicitly."""
    if settings.transport != "http" or is_loopback(settings.host) or settings.server.auth:
        return
    if settings.server.allow_unauthenticated:
        log.warning("serving %s without authentication (server.allow_unauthenticated): anyone who reaches the port "
                    "may call every tool the local operator may", settings.host)
        return
    raise ConfigError(f"the HTTP server binds {settings.host}, which is not a loopback address, without "
                      "authentication: start it with --auth (server.auth, ASSAY_AUTH) and give callers tokens "
                      "(assay users add NAME --role viewer; assay tokens create NAME), or say "
                      "--allow-unauthenticated (server.allow_unauthenticated) if a proxy in front checks callers",
                      field="server.auth")


def build_guard(settings: Any, engine: Engine) -> Guard:
    g = settings.guard
    audit = None
    if g.audit:
        url = g.audit_url or default_audit_url(settings.db_url, settings.data_dir)
        audit = AuditLog(url, retention_days=g.audit_retention_days)
    guard = Guard(local_permissions=frozenset(g.local_permissions),
                  limits={"read": g.rate_read, "write": g.rate_write, "sql": g.rate_sql}, audit=audit)
    logging.getLogger().addHandler(guard.log)  # first: the log records of the audit writer's start are kept too
    if audit is not None:
        audit.start()
    return guard


def server_auth(settings: Any, engine: Engine, roots: Roots) -> ServerAuth | None:
    """The SDK's auth for an HTTP server with ``server.auth``; None otherwise (stdio: the local operator)."""
    if settings.transport != "http" or not settings.server.auth:
        return None
    try:
        jwt = jwt_verifier(settings.guard)
    except ValueError as exc:
        raise ConfigError(str(exc), field="guard.jwt_issuer") from None
    resource = (content_base(settings) or f"http://{settings.host}:{settings.port}") + "/mcp"
    return ServerAuth(AssayTokenVerifier(engine, roots, jwt=jwt),
                      auth_settings(resource, settings.guard.jwt_issuer))
