"""The user tools of reference 004 (list_users, get_user, create_user, delete_user, set_user_role, grant_permission,
revoke_permission) through an in-process MCP client, on both stores. Under stdio the caller is the local operator
("local", every permission)."""

from __future__ import annotations

import json

import pytest
from mcp import Client
from sqlalchemy import text

from mcp_server.app import AssayApp, build_server
from mcp_server.guard.caller import LOCAL_USER
from store import users as store_users
from store.engine import dispose_engines
from tests.conftest import ToolFailed, call

USER_TOOLS = ("list_users", "get_user", "create_user", "delete_user", "set_user_role", "grant_permission",
              "revoke_permission")


@pytest.fixture
def app(settings):
    made = AssayApp.create(settings.model_copy(update={"tool_groups": ["users"]}))
    yield made
    made.close()
    made.engine.dispose()
    dispose_engines()


@pytest.fixture
async def client(app):
    async with Client(build_server(app)) as c:
        yield c


async def failure(client, tool: str, args: dict) -> str:
    with pytest.raises(ToolFailed) as caught:
        await call(client, tool, args)
    return str(caught.value)


async def test_user_tools_are_listed_with_their_annotations(client):
    listed = {t.name: t.annotations for t in (await client.list_tools()).tools}
    assert set(USER_TOOLS) <= set(listed)
    assert listed["list_users"].read_only_hint and listed["get_user"].read_only_hint
    assert listed["delete_user"].destructive_hint and not listed["delete_user"].read_only_hint
    for name in ("create_user", "set_user_role", "grant_permission", "revoke_permission"):
        assert not listed[name].read_only_hint and not listed[name].destructive_hint


async def test_create_user_returns_a_token_the_store_accepts(client, app):
    made = await call(client, "create_user", {"handle": "alice", "role": "viewer"})
    assert made["user"]["handle"] == "alice" and made["user"]["role"] == "viewer"
    assert made["user"]["permissions"] == ["mcp_access", "read"] and made["user"]["live_tokens"] == 1
    assert "shown this once" in made["note"] and "not stored" not in made["note"]
    assert made["token_info"]["prefix"] == made["token"][:12] and made["token_info"]["live"] is True
    verified = store_users.verify_token(app.engine, made["token"])
    assert verified is not None and verified["name"] == "alice"


async def test_the_references_create_user_call_works_and_the_password_is_not_stored(client, app):
    made = await call(client, "create_user", {"handle": "bob", "password": "hunter2-secret", "role": "editor"})
    assert made["user"]["role"] == "editor" and "password given was not stored" in made["note"]
    assert store_users.verify_token(app.engine, made["token"])["name"] == "bob"
    with app.engine.connect() as conn:
        stored = [*conn.execute(text("SELECT * FROM users")), *conn.execute(text("SELECT * FROM api_tokens"))]
    assert stored and not any("hunter2" in str(value) for row in stored for value in row)
    assert not any(made["token"] == str(value) for row in stored for value in row)


async def test_create_user_with_roots_and_refusals(client):
    made = await call(client, "create_user", {"handle": "carol", "role": "viewer", "roots": "/srv/docs/"})
    assert made["user"]["roots"] == ["/srv/docs"]
    assert "ALREADY_EXISTS" in await failure(client, "create_user", {"handle": "CAROL", "role": "viewer"})
    refused = await failure(client, "create_user", {"handle": "dave", "role": "owner"})
    assert refused.startswith("INVALID_PARAMS") and "viewer, editor, admin" in refused
    assert "absolute" in await failure(client, "create_user", {"handle": "erin", "role": "viewer",
                                                               "roots": ["docs"]})


async def test_list_users_with_and_without_activity(client, app):
    await call(client, "create_user", {"handle": "alice", "role": "viewer"})
    await call(client, "create_user", {"handle": LOCAL_USER, "role": "admin"})
    plain = await call(client, "list_users")
    assert [u["handle"] for u in plain["users"]] == ["alice", "local"] and plain["total"] == 2
    assert all(u["activity"] is None for u in plain["users"])
    app.guard.limiter.take("alice", "read")
    app.guard.limiter.take("alice", "sql")
    busy = {u["handle"]: u["activity"] for u in (await call(client, "list_users",
                                                             {"include_activity": True}))["users"]}
    assert busy["alice"]["requests_in_window"] == {"read": 1, "write": 0, "sql": 1}
    assert busy["alice"]["limits"] == {"read": 120, "write": 30, "sql": 10} and busy["alice"]["window_seconds"] == 60
    assert busy["alice"]["last_request_at"] is None  # the limiter counted, but the server never saw alice call
    assert busy["local"]["last_request_at"] is not None  # the calls of this test


async def test_get_user_lists_its_tokens_without_secrets(client, app):
    made = await call(client, "create_user", {"handle": "alice", "role": "viewer"})
    second, _ = store_users.create_token(app.engine, "alice", label="laptop")
    store_users.revoke_token(app.engine, second)
    got = await call(client, "get_user", {"handle": "ALICE"})
    assert got["handle"] == "alice" and got["live_tokens"] == 1 and got["activity"] is not None
    assert [(t["prefix"], t["live"]) for t in got["tokens"]] == [(made["token"][:12], True), (second[:12], False)]
    assert got["tokens"][1]["label"] == "laptop" and got["tokens"][1]["revoked_at"] is not None
    dumped = json.dumps(got)
    assert made["token"] not in dumped and second not in dumped
    missing = await failure(client, "get_user", {"handle": "nobody"})
    assert missing.startswith("NOT_FOUND") and "alice" in missing


async def test_delete_user_removes_it_and_its_tokens(client, app):
    made = await call(client, "create_user", {"handle": "alice", "role": "viewer"})
    gone = await call(client, "delete_user", {"handle": "alice"})
    assert gone["deleted"]["handle"] == "alice" and gone["tokens_deleted"] == 1
    assert store_users.verify_token(app.engine, made["token"]) is None
    assert (await call(client, "list_users"))["users"] == []


async def test_delete_user_refuses_the_calling_user_itself(client, app):
    await call(client, "create_user", {"handle": "Local", "role": "admin"})  # the stdio caller is "local"
    refused = await failure(client, "delete_user", {"handle": "LOCAL"})
    assert refused.startswith("CONFLICT") and "cannot delete itself" in refused
    assert store_users.get_user(app.engine, "local")["name"] == "Local"


async def test_set_user_role_changes_permissions_and_refuses_unknown_roles(client):
    await call(client, "create_user", {"handle": "alice", "role": "viewer"})
    changed = await call(client, "set_user_role", {"handle": "alice", "role": "editor"})
    assert changed["user"]["role"] == "editor" and "was viewer" in changed["message"]
    assert changed["user"]["permissions"] == ["change", "mcp_access", "read", "run"]
    refused = await failure(client, "set_user_role", {"handle": "alice", "role": "root"})
    assert refused.startswith("INVALID_PARAMS") and "viewer, editor, admin" in refused


async def test_grant_and_revoke_permissions(client):
    await call(client, "create_user", {"handle": "alice", "role": "viewer"})
    granted = await call(client, "grant_permission", {"handle": "alice", "permission": "run"})
    assert granted["user"]["granted"] == ["run"] and "run" in granted["user"]["permissions"]
    revoked = await call(client, "revoke_permission", {"handle": "alice", "permission": "read"})
    assert revoked["user"]["revoked"] == ["read"] and revoked["user"]["permissions"] == ["mcp_access", "run"]
    back = await call(client, "grant_permission", {"handle": "alice", "permission": "read", "count": None})
    assert back["user"]["revoked"] == [] and back["user"]["permissions"] == ["mcp_access", "read", "run"]
    refused = await failure(client, "revoke_permission", {"handle": "alice", "permission": "sudo"})
    assert refused.startswith("INVALID_PARAMS") and "mcp_access, read, change, run, file_operations, admin" in refused


async def test_a_count_limited_grant_is_refused_and_changes_nothing(client, app):
    await call(client, "create_user", {"handle": "alice", "role": "viewer"})
    refused = await failure(client, "grant_permission", {"handle": "alice", "permission": "run", "count": 3})
    assert refused.startswith("INVALID_PARAMS") and "count" in refused and "until" in refused
    assert store_users.get_user(app.engine, "alice")["permissions"] == ["mcp_access", "read"]
