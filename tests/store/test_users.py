"""Local users and their API tokens (store/users.py), on SQLite and PostgreSQL: names unique whatever their case,
roles and permissions checked against store.access, grants and revocations on top of the role, and tokens kept
as their hash, verified, expired, revoked and removed with their user."""

from __future__ import annotations

import hashlib
import secrets
import shutil
import sqlite3
import time
from pathlib import Path

import pytest
from sqlalchemy import select, update

from store import users as store_users
from store.access import PERMISSIONS, ROLES
from store.engine import make_engine
from store.errors import AlreadyExists, InvalidInput, NotFound
from store.models import ApiToken, User
from tests.conftest import BACKENDS, backend_engine

T = ApiToken.__table__
OLD_STORE = Path(__file__).parent / "fixtures" / "store-9cbe7cf.db"


@pytest.fixture(params=BACKENDS)
def engine(request, tmp_path_factory):
    with backend_engine(request, tmp_path_factory, "users") as eng:
        yield eng


def token_row(engine, token_id: int) -> dict:
    with engine.connect() as conn:
        return dict(conn.execute(select(T).where(T.c.id == token_id)).mappings().one())


def set_token(engine, token_id: int, **values) -> None:
    with engine.begin() as conn:
        conn.execute(update(T).where(T.c.id == token_id).values(**values))


# --- users ------------------------------------------------------------------------------------------------------


def test_a_user_is_made_found_in_any_case_listed_by_name_and_deleted(engine):
    made = store_users.create_user(engine, "Carol", role="Editor")
    assert made == {"name": "Carol", "role": "editor", "granted": [], "revoked": [],
                    "permissions": sorted(ROLES["editor"]), "roots": None, "created_at": made["created_at"],
                    "tokens": 0}
    store_users.create_user(engine, "alice", role="viewer")
    store_users.create_user(engine, "bob@example.org", role="admin")
    assert store_users.get_user(engine, "CAROL") == made
    assert [u["name"] for u in store_users.list_users(engine)] == ["alice", "bob@example.org", "Carol"]
    deleted = store_users.delete_user(engine, "carol")
    assert deleted["name"] == "Carol" and deleted["tokens_deleted"] == 0
    with pytest.raises(NotFound, match="alice, bob@example.org"):  # the users there are
        store_users.get_user(engine, "Carol")
    assert [u["name"] for u in store_users.list_users(engine)] == ["alice", "bob@example.org"]


def test_a_name_taken_in_any_case_is_refused(engine):
    store_users.create_user(engine, "alice", role="viewer")
    with pytest.raises(AlreadyExists, match="'ALICE' exists already"):
        store_users.create_user(engine, "ALICE", role="admin")
    assert [(u["name"], u["role"]) for u in store_users.list_users(engine)] == [("alice", "viewer")]


@pytest.mark.parametrize("name", ["", "a b", "x" * 65, "alice/../root", "élodie", "semi;colon", None])
def test_a_name_outside_the_accepted_characters_is_refused_saying_what_is_accepted(engine, name):
    with pytest.raises(InvalidInput, match="1-64 letters, digits"):
        store_users.create_user(engine, name, role="viewer")


def test_an_unknown_role_is_refused_naming_the_roles(engine):
    with pytest.raises(InvalidInput, match="roles: viewer, editor, admin"):
        store_users.create_user(engine, "alice", role="owner")
    store_users.create_user(engine, "alice", role="viewer")
    with pytest.raises(InvalidInput, match="roles: viewer, editor, admin"):
        store_users.set_role(engine, "alice", "root")
    assert store_users.get_user(engine, "alice")["role"] == "viewer"


def test_an_unknown_permission_is_refused_naming_the_permissions(engine):
    store_users.create_user(engine, "alice", role="viewer")
    for change in (store_users.grant_permission, store_users.revoke_permission):
        with pytest.raises(InvalidInput, match="permissions: " + ", ".join(PERMISSIONS)):
            change(engine, "alice", "superuser")
    assert store_users.get_user(engine, "alice")["permissions"] == ["mcp_access", "read"]


def test_revoking_a_permission_of_the_role_removes_it_and_granting_it_back_restores_it(engine):
    store_users.create_user(engine, "alice", role="editor")
    revoked = store_users.revoke_permission(engine, "alice", "run")
    assert "run" not in revoked["permissions"] and revoked["revoked"] == ["run"]
    restored = store_users.grant_permission(engine, "alice", "RUN")
    assert restored["permissions"] == sorted(ROLES["editor"])
    assert restored["granted"] == [] and restored["revoked"] == []


def test_a_permission_granted_beyond_the_role_is_added_and_revoking_it_takes_it_away(engine):
    store_users.create_user(engine, "alice", role="viewer")
    granted = store_users.grant_permission(engine, "alice", "file_operations")
    assert granted["granted"] == ["file_operations"]
    assert granted["permissions"] == ["file_operations", "mcp_access", "read"]
    taken = store_users.revoke_permission(engine, "alice", "file_operations")
    assert taken["granted"] == [] and taken["revoked"] == [] and taken["permissions"] == ["mcp_access", "read"]


def test_a_new_role_keeps_the_users_grants_and_revocations(engine):
    store_users.create_user(engine, "alice", role="viewer")
    store_users.grant_permission(engine, "alice", "run")
    store_users.revoke_permission(engine, "alice", "read")
    editor = store_users.set_role(engine, "alice", "editor")
    assert editor["role"] == "editor" and editor["granted"] == ["run"] and editor["revoked"] == ["read"]
    assert editor["permissions"] == ["change", "mcp_access", "run"]


def test_roots_are_normalised_absolute_paths_and_none_means_every_root(engine):
    user = store_users.create_user(engine, "alice", role="viewer", roots=["/srv/docs/", "/srv/x/../photos",
                                                                         "/srv/docs"])
    assert user["roots"] == ["/srv/docs", "/srv/photos"]
    assert store_users.set_roots(engine, "alice", None)["roots"] is None
    assert store_users.set_roots(engine, "alice", ["/data"])["roots"] == ["/data"]
    with pytest.raises(InvalidInput, match="not an absolute path"):
        store_users.set_roots(engine, "alice", ["docs"])
    with pytest.raises(InvalidInput, match="at least one absolute path"):
        store_users.set_roots(engine, "alice", [])
    with pytest.raises(InvalidInput, match="not an absolute path"):
        store_users.create_user(engine, "bob", role="viewer", roots=["./photos"])
    assert store_users.get_user(engine, "alice")["roots"] == ["/data"]


# --- tokens -----------------------------------------------------------------------------------------------------


def test_a_token_verifies_as_its_user_and_its_row_is_shown_without_hash_or_text(engine):
    store_users.create_user(engine, "alice", role="editor", roots=["/srv"])
    token, row = store_users.create_token(engine, "ALICE", label=" laptop ")
    assert token.startswith("assay_") and len(token) > 40
    assert row["user"] == "alice" and row["label"] == "laptop" and row["prefix"] == token[:12] and row["live"]
    assert row["expires_at"] is None and row["last_used_at"] is None and row["revoked_at"] is None
    who = store_users.verify_token(engine, token)
    assert who == {**store_users.get_user(engine, "alice"), "token_id": row["id"]}
    assert who["permissions"] == sorted(ROLES["editor"]) and who["roots"] == ["/srv"] and who["tokens"] == 1
    listed = store_users.list_tokens(engine)
    assert [t["id"] for t in listed] == [row["id"]]
    assert not any(token in str(v) or str(v) == store_users.token_hash(token) for v in listed[0].values())


def test_the_store_keeps_the_hash_of_a_token_and_not_the_token(engine):
    store_users.create_user(engine, "alice", role="viewer")
    token, row = store_users.create_token(engine, "alice")
    stored = token_row(engine, row["id"])
    assert stored["token_hash"] == hashlib.sha256(token.encode()).hexdigest()
    assert stored["prefix"] == token[:12]
    assert not any(isinstance(v, str) and token in v for v in stored.values())


@pytest.mark.parametrize("presented", ["", "assay_", "assay_nope", "Bearer x", "assay_" + "A" * 500, None])
def test_a_wrong_token_verifies_as_nobody(engine, presented):
    store_users.create_user(engine, "alice", role="viewer")
    store_users.create_token(engine, "alice")
    assert store_users.verify_token(engine, presented) is None


def test_a_token_differing_from_a_real_one_in_its_last_character_verifies_as_nobody(engine):
    store_users.create_user(engine, "alice", role="viewer")
    token, _ = store_users.create_token(engine, "alice")
    assert store_users.verify_token(engine, token[:-1] + ("A" if token[-1] != "A" else "B")) is None
    assert store_users.verify_token(engine, token) is not None


def test_a_revoked_token_verifies_as_nobody_and_no_longer_counts_as_live(engine):
    store_users.create_user(engine, "alice", role="viewer")
    token, row = store_users.create_token(engine, "alice")
    kept, _ = store_users.create_token(engine, "alice")
    assert store_users.get_user(engine, "alice")["tokens"] == 2
    revoked = store_users.revoke_token(engine, str(row["id"]))
    assert revoked["revoked_at"] is not None and not revoked["live"]
    assert store_users.verify_token(engine, token) is None
    assert store_users.verify_token(engine, kept) is not None
    assert store_users.get_user(engine, "alice")["tokens"] == 1
    again = store_users.revoke_token(engine, str(row["id"]))  # revoking again changes nothing
    assert again["revoked_at"] == revoked["revoked_at"]


def test_an_expired_token_verifies_as_nobody(engine):
    store_users.create_user(engine, "alice", role="viewer")
    token, row = store_users.create_token(engine, "alice", expires_at=time.time() + 3600)
    assert row["live"] and store_users.verify_token(engine, token) is not None
    set_token(engine, row["id"], expires_at=time.time() - 1)
    assert store_users.verify_token(engine, token) is None
    assert [t["live"] for t in store_users.list_tokens(engine, "alice")] == [False]
    assert store_users.get_user(engine, "alice")["tokens"] == 0


@pytest.mark.parametrize("expires_at", [0.0, 1.0, True, "tomorrow"])
def test_a_token_cannot_be_made_already_expired_or_with_a_time_that_is_not_one(engine, expires_at):
    store_users.create_user(engine, "alice", role="viewer")
    with pytest.raises(InvalidInput, match="time in the future"):
        store_users.create_token(engine, "alice", expires_at=expires_at)
    assert store_users.list_tokens(engine) == []


def test_the_tokens_of_a_deleted_user_go_with_it_and_verify_as_nobody(engine):
    store_users.create_user(engine, "alice", role="viewer")
    token, row = store_users.create_token(engine, "alice")
    store_users.create_token(engine, "alice")
    assert store_users.delete_user(engine, "alice")["tokens_deleted"] == 2
    assert store_users.verify_token(engine, token) is None
    assert store_users.list_tokens(engine) == []
    with pytest.raises(NotFound):
        store_users.create_token(engine, "alice")
    store_users.create_user(engine, "alice", role="admin")  # a new user of the same name gets none of them
    assert store_users.verify_token(engine, token) is None


def test_last_used_is_noted_at_most_once_a_minute(engine):
    store_users.create_user(engine, "alice", role="viewer")
    token, row = store_users.create_token(engine, "alice")
    assert store_users.verify_token(engine, token) is not None
    first = token_row(engine, row["id"])["last_used_at"]
    assert first is not None
    recent = time.time() - 30  # used half a minute ago: a verification now writes nothing
    set_token(engine, row["id"], last_used_at=recent)
    assert store_users.verify_token(engine, token) is not None
    assert token_row(engine, row["id"])["last_used_at"] == recent
    old = time.time() - 3600  # an hour ago: noted again
    set_token(engine, row["id"], last_used_at=old)
    assert store_users.verify_token(engine, token) is not None
    assert token_row(engine, row["id"])["last_used_at"] > old + 3000
    assert store_users.list_tokens(engine)[0]["last_used_at"] == token_row(engine, row["id"])["last_used_at"]


def test_a_token_is_revoked_by_its_unique_prefix_or_its_whole_text(engine):
    store_users.create_user(engine, "alice", role="viewer")
    first, first_row = store_users.create_token(engine, "alice")
    second, second_row = store_users.create_token(engine, "alice")
    assert store_users.revoke_token(engine, first_row["prefix"])["id"] == first_row["id"]
    assert store_users.revoke_token(engine, second)["id"] == second_row["id"]
    assert store_users.verify_token(engine, first) is None and store_users.verify_token(engine, second) is None


def test_an_ambiguous_prefix_is_refused_naming_the_ids_and_revokes_nothing(engine, monkeypatch):
    store_users.create_user(engine, "alice", role="viewer")
    made = iter(["SAMEsame" + "a" * 35, "SAMEsame" + "b" * 35])
    monkeypatch.setattr(secrets, "token_urlsafe", lambda _n: next(made))
    (one, one_row), (two, two_row) = (store_users.create_token(engine, "alice") for _ in range(2))
    assert one_row["prefix"] == two_row["prefix"] == "assay_SAMEsa"
    with pytest.raises(InvalidInput, match=f"2 live tokens \\(ids {one_row['id']}, {two_row['id']}\\)"):
        store_users.revoke_token(engine, "assay_SAMEsa")
    assert store_users.verify_token(engine, one) is not None and store_users.verify_token(engine, two) is not None
    store_users.revoke_token(engine, str(one_row["id"]))  # once one is revoked, the prefix names the other
    assert store_users.revoke_token(engine, "assay_SAME")["id"] == two_row["id"]


@pytest.mark.parametrize("name", ["assay", "assay_x", "abcdefghijkl", "-1"])
def test_a_text_too_short_or_unlike_a_token_names_no_token(engine, name):
    with pytest.raises(InvalidInput, match="names no token"):
        store_users.revoke_token(engine, name)


def test_revoking_a_token_that_does_not_exist_is_not_found_and_the_message_hides_the_token(engine):
    store_users.create_user(engine, "alice", role="viewer")
    secret = "assay_" + "z" * 43
    for name in ("999", "assay_zzzzzz", secret):
        with pytest.raises(NotFound) as err:
            store_users.revoke_token(engine, name)
        assert secret not in str(err.value)


def test_tokens_are_listed_per_user(engine):
    for name in ("alice", "bob"):
        store_users.create_user(engine, name, role="viewer")
    a, _ = store_users.create_token(engine, "alice", label="a")
    store_users.create_token(engine, "bob", label="b")
    assert [t["label"] for t in store_users.list_tokens(engine, "Alice")] == ["a"]
    assert [(t["user"], t["label"]) for t in store_users.list_tokens(engine)] == [("alice", "a"), ("bob", "b")]
    with pytest.raises(NotFound):
        store_users.list_tokens(engine, "carol")


# --- an older store -----------------------------------------------------------------------------------------------


def test_a_store_made_before_users_existed_opens_and_gains_their_tables(tmp_path):
    db = tmp_path / "assay.db"
    shutil.copy(OLD_STORE, db)
    with sqlite3.connect(db) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "entries" in tables and not {User.__tablename__, ApiToken.__tablename__} & tables
    engine = make_engine(f"sqlite:///{db}")
    try:
        store_users.create_user(engine, "alice", role="admin")
        token, _ = store_users.create_token(engine, "alice")
        assert store_users.verify_token(engine, token)["name"] == "alice"
    finally:
        engine.dispose()
