"""`assay users` and `assay tokens`, run as separate processes the way scripts call them: one line or JSON on stdout,
the token alone on stdout, messages on stderr, exit status 2 for bad input and 1 when the store fails."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from store import users as store_users
from store.access import ROLES
from store.engine import make_engine
from tests.mcp_server.test_cli import assay


@pytest.fixture
def store(tmp_path: Path):
    """The engine of the store the commands use (ASSAY_DATA_DIR is tmp_path/data), for checking what they did."""
    engine = make_engine(f"sqlite:///{tmp_path / 'data' / 'assay.db'}")
    yield engine
    engine.dispose()


def ok(tmp_path: Path, *args: str) -> str:
    res = assay(tmp_path, *args)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_tokens_create_prints_only_the_token_which_verifies_until_revoked(tmp_path, store):
    added = ok(tmp_path, "users", "add", "alice", "--role", "editor")
    assert added.startswith("added user alice: role editor") and added.count("\n") == 1
    res = assay(tmp_path, "tokens", "create", "alice", "--label", "laptop")
    assert res.returncode == 0, res.stderr
    token = res.stdout.removesuffix("\n")
    assert res.stdout == token + "\n" and token.startswith("assay_") and "\n" not in token
    assert "shown only this once" in res.stderr and token not in res.stderr
    who = store_users.verify_token(store, token)
    assert who is not None and who["name"] == "alice" and who["permissions"] == sorted(ROLES["editor"])
    revoked = ok(tmp_path, "tokens", "revoke", token[:12])
    assert revoked == f"revoked token {who['token_id']} ({token[:12]}) of alice\n"
    assert store_users.verify_token(store, token) is None


def test_users_list_json_parses_with_each_users_role_permissions_and_roots(tmp_path):
    shared = tmp_path / "shared"
    ok(tmp_path, "users", "add", "alice", "--role", "viewer", "--root", str(shared), "--root", str(shared / "x/.."))
    ok(tmp_path, "users", "add", "Bob", "--role", "admin")
    ok(tmp_path, "users", "grant", "alice", "run")
    ok(tmp_path, "tokens", "create", "Bob")
    users = json.loads(ok(tmp_path, "users", "list", "--json"))
    assert [(u["name"], u["role"], u["roots"], u["tokens"]) for u in users] == [
        ("alice", "viewer", [str(shared)], 0), ("Bob", "admin", None, 1)]
    assert users[0]["permissions"] == ["mcp_access", "read", "run"] and users[0]["granted"] == ["run"]
    table = ok(tmp_path, "users", "list").splitlines()
    assert table[0].split() == ["NAME", "ROLE", "PERMISSIONS", "ROOTS", "TOKENS"]
    assert table[1].split() == ["alice", "viewer", "mcp_access,read,run", str(shared), "0"]
    assert table[2].split()[:2] == ["Bob", "admin"] and table[2].split()[-3:] == ["every", "root", "1"]


def test_a_users_role_permissions_and_roots_are_changed_and_shown(tmp_path):
    ok(tmp_path, "users", "add", "alice", "--role", "editor")
    assert ok(tmp_path, "users", "revoke", "alice", "run").startswith("alice: role editor, permissions change, "
                                                                        "mcp_access, read;")
    ok(tmp_path, "users", "set-role", "alice", "admin")
    ok(tmp_path, "users", "roots", "alice", "/srv/a", "/srv/b/")
    user = json.loads(ok(tmp_path, "users", "show", "alice", "--json"))
    assert user["role"] == "admin" and user["revoked"] == ["run"] and user["roots"] == ["/srv/a", "/srv/b"]
    assert "run" not in user["permissions"] and "admin" in user["permissions"]
    assert "roots:       /srv/a, /srv/b" in ok(tmp_path, "users", "show", "alice").splitlines()
    assert ok(tmp_path, "users", "roots", "alice").endswith("roots every root\n")


def test_removing_a_user_removes_its_tokens(tmp_path, store):
    ok(tmp_path, "users", "add", "alice", "--role", "viewer")
    token = ok(tmp_path, "tokens", "create", "alice").strip()
    ok(tmp_path, "tokens", "create", "alice", "--expires-days", "7")
    listed = json.loads(ok(tmp_path, "tokens", "list", "alice", "--json"))
    assert [t["live"] for t in listed] == [True, True] and listed[0]["prefix"] == token[:12]
    assert listed[0]["expires_at"] is None and listed[1]["expires_at"] > listed[1]["created_at"] + 6 * 86400
    assert not any(token in json.dumps(t) for t in listed)
    assert ok(tmp_path, "users", "remove", "alice") == "removed user alice and its 2 tokens\n"
    assert store_users.verify_token(store, token) is None
    assert json.loads(ok(tmp_path, "tokens", "list", "--json")) == []


BAD_INPUT = [
    (("users", "add", "bob", "--role", "owner"), "roles: viewer, editor, admin"),
    (("users", "add", "ALICE", "--role", "viewer"), "exists already"),
    (("users", "add", "a b", "--role", "viewer"), "1-64 letters, digits"),
    (("users", "grant", "alice", "superuser"), "permissions: mcp_access, read"),
    (("users", "show", "zed"), "no user named 'zed'; users: alice"),
    (("tokens", "create", "zed"), "no user named 'zed'"),
    (("tokens", "create", "alice", "--expires-days", "0"), "--expires-days takes a number of days above 0"),
    (("tokens", "revoke", "assay_"), "names no token"),
    (("tokens", "revoke", "12345"), "no token '12345'"),
]


def test_bad_input_exits_2_with_its_message_on_stderr_and_nothing_on_stdout(tmp_path):
    ok(tmp_path, "users", "add", "alice", "--role", "viewer")
    for args, message in BAD_INPUT:  # one store for all the cases (a process each)
        res = assay(tmp_path, *args)
        assert res.returncode == 2 and res.stdout == "", (args, res.stdout, res.stderr)
        assert res.stderr.startswith("assay: ") and message in res.stderr, (args, res.stderr)


def test_a_store_that_fails_exits_1_with_its_message_on_stderr(tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "assay.db").write_bytes(b"not a database at all, not even close" * 100)
    res = assay(tmp_path, "users", "list", "--data-dir", str(broken))
    assert res.returncode == 1 and res.stdout == ""
    assert "assay: the store failed" in res.stderr and "Traceback" not in res.stderr


def test_the_help_names_the_actions_and_the_roles(tmp_path):
    assert {"users", "tokens"} <= set(ok(tmp_path, "--help").split())
    users_help = ok(tmp_path, "users", "--help")
    for word in ("add", "set-role", "grant", "revoke", "roots", "editor: change, mcp_access, read, run"):
        assert word in users_help
    assert "--expires-days N" in ok(tmp_path, "tokens", "create", "--help")
