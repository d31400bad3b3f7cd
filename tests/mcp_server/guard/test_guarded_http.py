"""The guarded server over real HTTP with real tokens: authentication (local API tokens and an identity provider's
JWTs) through the SDK's auth, listings filtered per caller, hidden tools refused as unknown ones (-32002), per-user
rate limits (-32003), roots per user, and the audit log of it all. One server for the module (tests/.../guarded.py)."""

from __future__ import annotations

import json

import httpx
import pytest
from mcp.shared.exceptions import MCPError

from mcp_server.guard import placement
from store import users as store_users
from tests.mcp_server.guard.guarded import Guarded, guarded_server
from tests.mcp_server.guard.test_jwt_verifier import RSA_B, token

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    with guarded_server(tmp_path_factory.mktemp("guarded")) as g:
        yield g


def audit(g: Guarded, **filters) -> list[dict]:
    assert g.app.guard is not None and g.app.guard.audit is not None
    assert g.app.guard.audit.flush(10)
    return g.app.guard.audit.recent(limit=1000, **filters)


def names_of(tools) -> set[str]:
    return {t.name for t in tools.tools}


def post(g: Guarded, authorization: str | None) -> httpx.Response:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}  # stateless: no handshake
    if authorization is not None:
        headers["Authorization"] = authorization
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}}
    return httpx.post(g.url, headers=headers, content=json.dumps(body), timeout=30)


@pytest.mark.parametrize("authorization, reason", [
    (None, "no bearer token"),
    ("Bearer assay_not-a-real-token", "unknown, revoked or expired API token"),
    ("Basic dXNlcjpwYXNz", "no bearer token"),
])
def test_a_call_without_a_good_token_is_401_with_the_metadata_header_and_is_audited(guarded, authorization, reason):
    answer = post(guarded, authorization)
    assert answer.status_code == 401
    challenge = answer.headers["www-authenticate"]
    assert challenge.startswith("Bearer") and "resource_metadata=" in challenge
    assert "tools" not in answer.text  # nothing else revealed
    refused = audit(guarded, kinds=["auth"])
    assert any(r["name"] == reason and r["outcome"] == "unauthenticated" for r in refused), refused[:3]


def test_the_protected_resource_metadata_names_the_server_and_its_identity_provider(guarded):
    answer = httpx.get(guarded.url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp"), timeout=30)
    assert answer.status_code == 200
    metadata = answer.json()
    assert metadata["resource"] == guarded.url
    assert metadata["authorization_servers"] == ["https://idp.example/realms/assay"]


def test_a_revoked_token_and_expired_or_foreign_jwts_are_refused(guarded):
    store_users.create_user(guarded.app.engine, "gone", role="viewer")
    gone = store_users.create_token(guarded.app.engine, "gone")
    assert post(guarded, f"Bearer {gone[0]}").status_code == 200
    store_users.revoke_token(guarded.app.engine, str(gone[1]["id"]))
    assert post(guarded, f"Bearer {gone[0]}").status_code == 401
    for bad, reason in [(token(exp=1), "expired"), (token(aud="another-api"), "wrong audience"),
                        (token(key=RSA_B), "bad signature")]:
        assert post(guarded, f"Bearer {bad}").status_code == 401
        assert any(r["name"] == f"JWT refused: {reason}" for r in audit(guarded, kinds=["auth"])), reason
    everything = json.dumps(audit(guarded))
    assert gone[0] not in everything  # tokens are never recorded


async def test_each_role_lists_only_the_tools_its_permissions_allow(guarded):
    seen = {}
    for user in ("vera", "ed", "ada"):
        async with guarded.session(user) as c:
            seen[user] = names_of(await c.list_tools())
    read = {t for t, p in placement.TOOL_PERMISSIONS.items() if p == "read"}
    assert seen["vera"] and seen["vera"] <= read and "index" not in seen["vera"]
    assert {"index", "plan-create", "plan-execute"} <= seen["ed"] and not seen["ed"] & {"delete-files", "query_sql"}
    assert {"delete-files", "query_sql", "create_user"} <= seen["ada"]
    assert seen["vera"] < seen["ed"] < seen["ada"]


async def test_listings_say_they_are_private_to_the_caller(guarded):
    async with guarded.session("vera") as c:
        listed = await c.list_tools()
    assert listed.cache_scope == "private"


async def test_a_hidden_tool_is_refused_exactly_as_an_unknown_one(guarded):
    async with guarded.session("vera") as c:
        with pytest.raises(MCPError) as hidden:
            await c.call_tool("delete-files", {"paths": [str(guarded.tree / "docs")]})
        with pytest.raises(MCPError) as unknown:
            await c.call_tool("no-such-tool", {"paths": [str(guarded.tree / "docs")]})
    assert hidden.value.code == unknown.value.code == -32002
    assert hidden.value.message.replace("delete-files", "X") == unknown.value.message.replace("no-such-tool", "X")
    assert (guarded.tree / "docs").is_dir()
    denied = audit(guarded, kinds=["tool"], user="vera", outcomes=["denied"])
    assert {r["name"] for r in denied} >= {"delete-files", "no-such-tool"}


async def test_admin_resources_are_hidden_from_a_viewer(guarded):
    async with guarded.session("vera") as c:
        templates = [t.uri_template for t in (await c.list_resource_templates()).resource_templates]
        with pytest.raises(MCPError) as refused:
            await c.read_resource("logs://recent")
    assert templates and all(t.startswith("synthesis://") for t in templates)
    assert refused.value.code == -32002


async def test_a_jwt_maps_its_roles_and_scopes_to_permissions(guarded):
    editor = token(preferred_username="jo", roles=["editor"])
    async with guarded.client(editor) as c:
        tools = names_of(await c.list_tools())
        assert "plan-create" in tools and "delete-files" not in tools
        info = await c.call_tool("session-info", {})
    assert not info.is_error
    mover = token(preferred_username="mo", roles=["viewer"], scope="openid assay:file_operations")
    async with guarded.client(mover) as c:
        tools = names_of(await c.list_tools())
    assert "move-files" in tools and "index" not in tools
    assert {r["user"] for r in audit(guarded, kinds=["tool"])} >= {"jo"}


async def test_a_token_without_mcp_access_is_refused_403(guarded):
    nobody = token(preferred_username="nobody", roles=[])  # valid, but no role and no scope
    answer = post(guarded, f"Bearer {nobody}")
    assert answer.status_code == 403 and "insufficient_scope" in answer.headers["www-authenticate"]


async def test_rate_limits_are_per_user_across_sessions_and_say_when_to_retry(guarded):
    limiter = guarded.app.guard.limiter
    saved = dict(limiter.limits)
    limiter.limits["read"] = 4
    try:
        async with guarded.session("ed", mode="legacy") as one, guarded.session("ed", mode="legacy") as two:
            for c in (one, two, one, two):
                assert not (await c.call_tool("session-info", {})).is_error
            with pytest.raises(MCPError) as refused:
                await two.call_tool("session-info", {})
        async with guarded.session("ada") as other:  # another user is not affected
            assert not (await other.call_tool("session-info", {})).is_error
    finally:
        limiter.limits.clear()
        limiter.limits.update(saved)
    assert refused.value.code == -32003
    assert 0 < refused.value.error.data["retryAfter"] <= 60 and refused.value.error.data["category"] == "read"
    limited = audit(guarded, user="ed", outcomes=["rate_limited"])
    assert limited and limited[0]["name"] == "session-info"


async def test_a_user_limited_to_some_roots_reaches_nothing_else(guarded):
    photos = guarded.tree / "Photos"
    async with guarded.session("lim") as c:
        inside = await c.call_tool("index", {"root": str(photos), "async": False})
        outside = await c.call_tool("navigate", {"path": str(guarded.tree / "docs")})
        info = await c.call_tool("session-info", {})
    assert not inside.is_error, inside.content[0].text
    assert outside.is_error and outside.content[0].text.startswith("PATH_TRAVERSAL_DETECTED")
    assert "limited" in outside.content[0].text
    assert info.structured_content["roots"] == [str(photos)]


async def test_every_call_is_in_the_audit_log_with_its_caller_and_outcome(guarded):
    async with guarded.session("ada", mode="legacy") as c:
        await c.call_tool("navigate", {"path": str(guarded.tree), "password": "hunter2"})
        await c.read_resource("logs://recent")
    rows = audit(guarded, user="ada")
    call = next(r for r in rows if r["name"] == "navigate")
    assert call["kind"] == "tool" and call["session"] and call["client"]
    assert call["arguments"]["password"] == "[redacted]"
    assert call["outcome"] == "error" and call["error_code"] == "INVALID_PARAMS"  # navigate has no password
    assert call["duration_ms"] >= 0
    assert any(r["kind"] == "resource" and r["name"] == "logs://recent" and r["outcome"] == "ok" for r in rows)


async def test_job_ids_and_resource_ids_are_handles_not_permissions(guarded):
    async with guarded.session("ada") as c:
        done = await c.call_tool("index", {"root": str(guarded.tree / "docs"), "async": False, "force": True})
        job = done.structured_content["jobId"]
        seen = await c.call_tool("job-progress", {"jobId": job})
        mapped = await c.call_tool("getStructure", {"resource_id": str(guarded.tree / "docs" / "readme.md")})
    assert not seen.is_error and not mapped.is_error, mapped.content[0].text
    resource = mapped.structured_content["resource_id"]
    async with guarded.session("lim") as c:
        other = await c.call_tool("job-progress", {"jobId": job})
        missing = await c.call_tool("job-progress", {"jobId": "999999"})
        jobs = await c.call_tool("list-jobs", {})
        structure = await c.call_tool("getStructure", {"resource_id": resource})
    assert other.is_error and other.content[0].text == missing.content[0].text.replace("999999", str(job))
    assert all(j["root"].startswith(str(guarded.tree / "Photos")) for j in jobs.structured_content["jobs"])
    assert structure.is_error and "RESOURCE_NOT_FOUND" in structure.content[0].text


def plan_args(name: str, source: dict) -> dict:
    return {"name": name, "sources": [source], "conditions": "media_type = image",
            "outcomes": [{"type": "selection_set", "selectionSetName": f"{name}-set", "operation": "add"}]}


async def test_a_user_limited_to_some_roots_uses_only_plans_whose_sources_lie_there(guarded):
    docs = {"name": "docs", "type": "filesystem.index", "config": {"path": str(guarded.tree / "docs")}}
    photos = {"name": "photos", "type": "filesystem.index", "config": {"path": str(guarded.tree / "Photos")}}
    async with guarded.session("ada") as c:
        assert not (await c.call_tool("plan-create", plan_args("everyones-docs", docs))).is_error
    async with guarded.session("lim") as c:
        listed = (await c.call_tool("plan-list", {})).structured_content["plans"]
        run = await c.call_tool("plan-execute", {"name": "everyones-docs"})
        own = await c.call_tool("plan-create", plan_args("my-photos", photos))
        outside = await c.call_tool("plan-create", plan_args("my-docs", docs))
        by_set = await c.call_tool("plan-create", plan_args("by-set", {"name": "s", "type": "selection_set",
                                                                        "config": {"set": "everyones-docs-set"}}))
    assert "everyones-docs" not in {p["name"] for p in listed}
    assert run.is_error and run.content[0].text.startswith("NOT_FOUND: no plan named 'everyones-docs'")
    assert not own.is_error, own.content[0].text
    assert outside.is_error and by_set.is_error and "limited to the roots" in by_set.content[0].text
