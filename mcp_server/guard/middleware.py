"""The guard: one MCP middleware in front of every request, which knows the caller and
- filters ``tools/list``, ``resources/list`` and ``resources/templates/list`` to what the caller may use;
- refuses a call of a tool the caller may not see exactly as it refuses an unknown tool (reference 004's -32002),
  and a read of a resource it may not see as an unknown resource;
- counts the call against the caller's rate limit (-32003, with the retry-after) — every session of a user shares it;
- makes the caller current while the call runs (tools find its roots through flows.core.roots);
- records the call: in the audit database (off the request path) and in the live activity the operator tools show.

Under stdio and on a loopback HTTP server without auth, the caller is the local operator (``guard.local_permissions``,
default all) and is not rate limited (it could run the command line anyway).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError

from flows.core import roots as root_limits
from mcp_server.guard import caller as callers
from mcp_server.guard import placement
from mcp_server.guard.activity import Activity, RecentLog, Request
from mcp_server.guard.caller import Caller
from mcp_server.guard.ratelimit import RateLimiter
from store.audit import AuditLog, AuditRecord

log = logging.getLogger(__name__)

NOT_FOUND = -32002  # reference 004's hidden tool; MCP's resource not found
RATE_LIMITED = -32003  # reference 004's rate limit, with the retry-after in its data

_LISTS = {"tools/list": ("tools", "name"), "resources/list": ("resources", "uri"),
          "resources/templates/list": ("resourceTemplates", "uriTemplate")}


class Guard:
    """The guard of one server (see the module docstring); ``audit`` may be None (``guard.audit: false``)."""

    def __init__(self, *, local_permissions: frozenset[str], limits: Mapping[str, int],
                 audit: AuditLog | None = None, limit_local: bool = False) -> None:
        self.local_permissions = local_permissions
        self.limiter = RateLimiter(limits)
        self.audit = audit
        self.limit_local = limit_local
        self.activity = Activity()
        self.log = RecentLog()

    # --- who calls ---------------------------------------------------------------------------------------------

    def caller_of(self, ctx: ServerRequestContext[Any, Any]) -> Caller:
        request = ctx.request
        session = None
        if request is not None:
            session = request.headers.get("mcp-session-id")
        elif ctx.session is not None:
            session = "stdio"
        client = _client_of(ctx)
        token = callers.access_token_of(request)
        if token is not None:
            return callers.from_token(token, session=session, client=client)
        return callers.local(self.local_permissions, session=session, client=client)

    # --- the middleware ----------------------------------------------------------------------------------------

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.request_id is None or ctx.method in ("initialize", "ping"):
            return await call_next(ctx)
        caller = self.caller_of(ctx)
        self.activity.seen(caller.session, caller.user, caller.client, caller.source)
        if ctx.method in _LISTS:
            return self._filtered(ctx.method, await call_next(ctx), caller)
        if ctx.method == "tools/call":
            return await self._call(ctx, call_next, caller, "tool", str((ctx.params or {}).get("name", "")))
        if ctx.method == "resources/read":
            return await self._call(ctx, call_next, caller, "resource", str((ctx.params or {}).get("uri", "")))
        token = callers.set_current(caller)
        try:
            return await call_next(ctx)
        finally:
            callers.reset(token)

    def _filtered(self, method: str, result: HandlerResult, caller: Caller) -> HandlerResult:
        if not isinstance(result, dict):
            return result
        key, name = _LISTS[method]
        items = result.get(key) or []
        if method == "tools/list":
            kept = [t for t in items if placement.visible(t.get(name, ""), caller.permissions)]
        else:
            kept = [r for r in items if placement.resource_permission(r.get(name, "")) in caller.permissions]
        return {**result, key: kept}

    async def _call(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext, caller: Caller, kind: str,
                    name: str) -> HandlerResult:
        started = time.perf_counter()
        arguments = (ctx.params or {}).get("arguments") if kind == "tool" else {"uri": name}
        try:
            self._admit(caller, kind, name, arguments)
        except MCPError as exc:
            outcome = "rate_limited" if exc.code == RATE_LIMITED else "denied"
            self._record(caller, kind, name, arguments, outcome, str(exc.code), started, None)
            raise
        token = callers.set_current(caller)
        limit = root_limits.limit_to(caller.roots)
        try:
            result = await call_next(ctx)
        except MCPError as exc:
            self._record(caller, kind, name, arguments, "error", str(exc.code), started, None)
            raise
        except BaseException as exc:
            self._record(caller, kind, name, arguments, "error", type(exc).__name__, started, None)
            raise
        finally:
            root_limits.reset_limit(limit)
            callers.reset(token)
        failed = isinstance(result, dict) and result.get("isError") is True
        self._record(caller, kind, name, arguments, "error" if failed else "ok",
                     _error_code(result) if isinstance(result, dict) and failed else None, started, _size(result))
        return result

    def _admit(self, caller: Caller, kind: str, name: str, arguments: Any) -> None:
        """Raise the MCP error a call the caller may not make gets: unknown (whether hidden or not there at all),
        short of a permission its arguments need, or over the rate limit."""
        if kind == "tool":
            if not placement.visible(name, caller.permissions):
                raise MCPError(NOT_FOUND, f"unknown tool {name!r}; tools/list lists the tools you may call")
            needed = placement.tool_permissions(name, arguments if isinstance(arguments, dict) else None)
            missing = sorted((needed or frozenset()) - caller.permissions)
            if missing:
                raise MCPError(NOT_FOUND, f"{name} with these arguments needs the permission(s) {', '.join(missing)}"
                                          f", which {caller.user} does not have", data={"missing": missing})
            category = placement.category(name)
        else:
            if placement.resource_permission(name) not in caller.permissions:
                raise MCPError(NOT_FOUND, f"unknown resource {name}")
            category = "read"
        if caller.authenticated or self.limit_local:
            refused = self.limiter.take(caller.user, category)
            if refused is not None:
                raise MCPError(RATE_LIMITED,
                               f"rate limit: {caller.user} made {refused.limit} {category} calls in the last "
                               f"{refused.window:g} s; retry after {refused.retry_after:g} s",
                               data={"retryAfter": refused.retry_after, "category": category,
                                     "limit": refused.limit, "windowSeconds": refused.window})

    def _record(self, caller: Caller, kind: str, name: str, arguments: Any, outcome: str, code: str | None,
                started: float, size: int | None) -> None:
        elapsed = round((time.perf_counter() - started) * 1000, 3)
        self.activity.done(Request(time.time(), kind, name, caller.user, caller.session, outcome, code, elapsed))
        if self.audit is not None:
            self.audit.record(AuditRecord(time=time.time(), kind=kind, name=name, outcome=outcome, user=caller.user,
                                          session=caller.session, client=caller.client, arguments=arguments,
                                          error_code=code, duration_ms=elapsed, result_bytes=size))

    def refused_authentication(self, reason: str, remote: str | None) -> None:
        """A request the bearer middleware answered 401 (mcp_server/guard/verifier.py tells us why)."""
        self.activity.count("unauthenticated")
        if self.audit is not None:
            self.audit.record(AuditRecord(time=time.time(), kind="auth", name=reason, outcome="unauthenticated",
                                          client=remote))

    def close(self) -> None:
        """Write what the audit log holds, and stop collecting log records."""
        logging.getLogger().removeHandler(self.log)
        if self.audit is not None:
            self.audit.close()


def _client_of(ctx: ServerRequestContext[Any, Any]) -> str | None:
    try:
        params = ctx.session.client_params if ctx.session is not None else None
    except Exception:  # a stateless request has no handshake
        params = None
    info = getattr(params, "client_info", None)
    if info is None:
        return None
    return f"{info.name}/{info.version}" if getattr(info, "version", None) else str(info.name)


def _error_code(result: dict[str, Any]) -> str:
    """The code of a tool error: the first text item starts with it (``NOT_FOUND: ...``, tools.common.refusal)."""
    for item in result.get("content") or []:
        text = item.get("text") if isinstance(item, dict) else None
        if text:
            head = text.split(":", 1)[0].strip()
            return head if head.replace("_", "").isalnum() and head.isupper() and len(head) <= 40 else "ERROR"
    return "ERROR"


def _size(result: HandlerResult) -> int | None:
    """Characters of a result's content (text, and base64 blobs), a cheap measure of what went back."""
    if not isinstance(result, dict):
        return None
    total = 0
    for item in [*(result.get("content") or []), *(result.get("contents") or [])]:
        if isinstance(item, dict):
            total += len(item.get("text") or "") + len(item.get("data") or "") + len(item.get("blob") or "")
    return total
