"""Local users of a guarded server and their API tokens (issue 23): made, changed and removed by `assay users` /
`assay tokens` and the admin tools, read by the server's guard on every call (:func:`verify_token`).

A user has a role (store.access.ROLES), permissions granted beyond it and revoked from it, and the roots it may reach
(None: every root the server has); its effective permissions are store.access.effective_permissions of the three.
Names are 1-64 letters, digits and ``._@-``, kept as given and unique whatever their case (found by ``name_key``).

A token is ``assay_`` and 43 random URL-safe characters, shown once when it is made. The store keeps its SHA-256
(a unique column: a presented token is found by its hash, then compared in constant time) and its first 12
characters (``prefix``, to tell tokens apart in a list and revoke one by it); never the text. Nothing here logs a
token or puts one in an error message.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import time
from typing import Any

from sqlalchemy import ColumnElement, Select, and_, delete, func, insert, or_, select, update
from sqlalchemy.engine import Connection, Engine, RowMapping
from sqlalchemy.exc import IntegrityError

from store.access import check_permission, check_role, effective_permissions
from store.errors import AlreadyExists, InvalidInput, NotFound
from store.models import ApiToken, User
from store.models.columns import inserted_id

U = User.__table__
T = ApiToken.__table__

NAME = re.compile(r"[A-Za-z0-9._@-]{1,64}")
TOKEN_START = "assay_"  # every token begins so: a presented text that does not is no token of ours
PREFIX_LENGTH = 12  # characters of a token kept and shown: "assay_" and 6 random ones
SHORTEST_PREFIX = 8  # the fewest characters revoke_token takes as a prefix ("assay_" and 2 more)
LAST_USED_EVERY = 60.0  # seconds: last_used_at is written at most this often per token
LONGEST_TOKEN = 256  # characters: a longer presented text is refused without hashing it
LONGEST_LABEL = 200


# --- checks -----------------------------------------------------------------------------------------------------


def check_name(name: Any, *, field: str = "name") -> str:
    """``name`` if it is a user name: 1-64 letters, digits, ``.``, ``_``, ``@``, ``-``; InvalidInput otherwise."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise InvalidInput(f"user name {name!r} is not one: use 1-64 letters, digits, '.', '_', '@' or '-'",
                           field=field)
    return name


def check_roots(roots: Any, *, field: str = "roots") -> list[str] | None:
    """``roots`` normalised (os.path.normpath, duplicates dropped) when every one is an absolute path; None (every
    root the server has) stays None; InvalidInput for a relative path or an empty list."""
    if roots is None:
        return None
    if isinstance(roots, str) or not isinstance(roots, (list, tuple)):
        raise InvalidInput(f"{field} must be a list of absolute paths, or none for every root", field=field)
    if not roots:
        raise InvalidInput(f"{field} is empty: give at least one absolute path, or none for every root", field=field)
    normalised: list[str] = []
    for root in roots:
        if not isinstance(root, str) or not os.path.isabs(root):
            raise InvalidInput(f"root {root!r} is not an absolute path; roots are absolute paths such as /srv/docs",
                               field=field)
        path = os.path.normpath(root)
        if path not in normalised:
            normalised.append(path)
    return normalised


def token_hash(token: str) -> str:
    """The SHA-256 of a token's text, in hex: what the store keeps of it."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


# --- rows and their dicts ---------------------------------------------------------------------------------------


def _live(now: float) -> ColumnElement[bool]:
    """A token not revoked and not expired at ``now``."""
    return and_(T.c.revoked_at.is_(None), or_(T.c.expires_at.is_(None), T.c.expires_at > now))


def _users(now: float) -> Select[Any]:
    """The users' columns and the count of each one's live tokens (``tokens``)."""
    live = select(func.count()).select_from(T).where(T.c.user_id == U.c.id, _live(now)).scalar_subquery()
    return select(*U.c, live.label("tokens"))


def _user_dict(row: RowMapping) -> dict[str, Any]:
    granted, revoked = json.loads(row["granted"] or "[]"), json.loads(row["revoked"] or "[]")
    return {
        "name": row["name"], "role": row["role"], "granted": granted, "revoked": revoked,
        "permissions": sorted(effective_permissions(row["role"], granted, revoked)),
        "roots": None if row["roots"] is None else json.loads(row["roots"]),
        "created_at": row["created_at"], "tokens": int(row["tokens"]),
    }


def _token_dict(row: RowMapping, now: float) -> dict[str, Any]:
    expires = row["expires_at"]
    return {
        "id": row["id"], "user": row["user"], "label": row["label"], "prefix": row["prefix"],
        "created_at": row["created_at"], "expires_at": expires, "last_used_at": row["last_used_at"],
        "revoked_at": row["revoked_at"], "live": row["revoked_at"] is None and (expires is None or expires > now),
    }


def _tokens() -> Select[Any]:
    return select(*T.c, U.c.name.label("user")).select_from(T.join(U, U.c.id == T.c.user_id))


def _user_row(conn: Connection, name: str, *, lock: bool = False) -> RowMapping:
    """The user row named ``name`` (any case) with its live-token count; NotFound naming the users otherwise."""
    query = _users(time.time()).where(U.c.name_key == check_name(name).lower())
    row = conn.execute(query.with_for_update(of=U) if lock else query).mappings().first()
    if row is None:
        names = conn.execute(select(U.c.name).order_by(U.c.name_key).limit(11)).scalars().all()
        known = ", ".join(names[:10]) + (", ..." if len(names) > 10 else "") if names else "none yet"
        raise NotFound(f"no user named {name!r}; users: {known}", field="name")
    return row


def _change_user(engine: Engine, name: str, **values: Any) -> dict[str, Any]:
    with engine.begin() as conn:
        user_id = _user_row(conn, name)["id"]
        conn.execute(update(U).where(U.c.id == user_id).values(**values, updated_at=time.time()))
        return _user_dict(conn.execute(_users(time.time()).where(U.c.id == user_id)).mappings().one())


# --- users ------------------------------------------------------------------------------------------------------


def create_user(engine: Engine, name: str, *, role: str, roots: list[str] | None = None) -> dict[str, Any]:
    """A new user with ``role`` and ``roots`` (None: every root); AlreadyExists when the name is taken in any case."""
    name, role, checked_roots = check_name(name), check_role(role), check_roots(roots)
    stamp = time.time()
    taken = AlreadyExists(f"a user named {name!r} exists already (names are unique whatever their case)",
                          field="name")
    try:
        with engine.begin() as conn:
            if conn.execute(select(U.c.name).where(U.c.name_key == name.lower())).first() is not None:
                raise taken
            conn.execute(insert(U).values(
                name=name, name_key=name.lower(), role=role, granted="[]", revoked="[]",
                roots=None if checked_roots is None else json.dumps(checked_roots),
                created_at=stamp, updated_at=stamp))
    except IntegrityError:  # made by another caller between the check and the insert
        raise taken from None
    return get_user(engine, name)


def get_user(engine: Engine, name: str) -> dict[str, Any]:
    with engine.connect() as conn:
        return _user_dict(_user_row(conn, name))


def list_users(engine: Engine) -> list[dict[str, Any]]:
    """Every user, by name (whatever its case)."""
    with engine.connect() as conn:
        rows = conn.execute(_users(time.time()).order_by(U.c.name_key)).mappings().all()
    return [_user_dict(r) for r in rows]


def delete_user(engine: Engine, name: str) -> dict[str, Any]:
    """Remove the user and all its tokens; the user as it was, with ``tokens_deleted`` (every token row removed,
    live or not)."""
    with engine.begin() as conn:
        row = _user_row(conn, name, lock=True)
        removed = conn.execute(delete(T).where(T.c.user_id == row["id"])).rowcount
        conn.execute(delete(U).where(U.c.id == row["id"]))
    return {**_user_dict(row), "tokens_deleted": removed}


def set_role(engine: Engine, name: str, role: str) -> dict[str, Any]:
    """Give the user ``role``; its grants and revocations stay as they are."""
    return _change_user(engine, name, role=check_role(role))


def _permission_lists(engine: Engine, name: str, permission: str, *, grant: bool) -> dict[str, Any]:
    permission = check_permission(permission)
    with engine.begin() as conn:
        row = _user_row(conn, name, lock=True)
        granted = [p for p in json.loads(row["granted"]) if p != permission]
        revoked = [p for p in json.loads(row["revoked"]) if p != permission]
        from_role = permission in effective_permissions(row["role"])
        if grant and not from_role:
            granted.append(permission)
        if not grant and from_role:
            revoked.append(permission)
        conn.execute(update(U).where(U.c.id == row["id"]).values(
            granted=json.dumps(sorted(granted)), revoked=json.dumps(sorted(revoked)), updated_at=time.time()))
    return get_user(engine, name)


def grant_permission(engine: Engine, name: str, permission: str) -> dict[str, Any]:
    """Give the user ``permission``: no longer revoked, and granted when its role does not give it."""
    return _permission_lists(engine, name, permission, grant=True)


def revoke_permission(engine: Engine, name: str, permission: str) -> dict[str, Any]:
    """Take ``permission`` from the user: no longer granted, and revoked when its role gives it."""
    return _permission_lists(engine, name, permission, grant=False)


def set_roots(engine: Engine, name: str, roots: list[str] | None) -> dict[str, Any]:
    """The roots the user may reach (absolute paths); None: every root the server has."""
    checked = check_roots(roots)
    return _change_user(engine, name, roots=None if checked is None else json.dumps(checked))


# --- tokens -----------------------------------------------------------------------------------------------------


def create_token(engine: Engine, name: str, *, label: str | None = None,
                 expires_at: float | None = None) -> tuple[str, dict[str, Any]]:
    """A new token of the user: its text (to be shown once: the store keeps only its hash) and its row."""
    if label is not None and (not isinstance(label, str) or len(label.strip()) > LONGEST_LABEL):
        raise InvalidInput(f"label must be text of at most {LONGEST_LABEL} characters", field="label")
    stamp = time.time()
    if expires_at is not None and (isinstance(expires_at, bool) or not isinstance(expires_at, (int, float))
                                   or expires_at <= stamp):
        raise InvalidInput("expires_at must be a time in the future (unix seconds), or none for a token that does "
                           "not expire", field="expires_at")
    token = TOKEN_START + secrets.token_urlsafe(32)
    with engine.begin() as conn:
        user_id = _user_row(conn, name)["id"]
        token_id = inserted_id(conn.execute(insert(T).values(
            user_id=user_id, token_hash=token_hash(token), prefix=token[:PREFIX_LENGTH],
            label=(label or "").strip() or None, created_at=stamp,
            expires_at=None if expires_at is None else float(expires_at))))
        row = conn.execute(_tokens().where(T.c.id == token_id)).mappings().one()
    return token, _token_dict(row, stamp)


def verify_token(engine: Engine, token: str) -> dict[str, Any] | None:
    """The user of ``token`` (its dict and ``token_id``) when the token exists, is neither revoked nor expired and its
    user exists; None otherwise. Notes when it was used, at most once a minute per token."""
    if not isinstance(token, str) or not token.startswith(TOKEN_START) or len(token) > LONGEST_TOKEN:
        return None
    digest, stamp = token_hash(token), time.time()
    users = _users(stamp).subquery()
    query = (select(users, T.c.id.label("token_id"), T.c.token_hash, T.c.expires_at, T.c.revoked_at,
                    T.c.last_used_at)
             .select_from(T.join(users, users.c.id == T.c.user_id)).where(T.c.token_hash == digest))
    with engine.connect() as conn:
        row = conn.execute(query).mappings().first()
    if row is None or not hmac.compare_digest(row["token_hash"], digest) or row["revoked_at"] is not None \
            or (row["expires_at"] is not None and row["expires_at"] <= stamp):
        return None
    if row["last_used_at"] is None or stamp - row["last_used_at"] >= LAST_USED_EVERY:
        with engine.begin() as conn:  # the condition again: of callers racing, one writes
            conn.execute(update(T).where(
                T.c.id == row["token_id"],
                or_(T.c.last_used_at.is_(None), T.c.last_used_at <= stamp - LAST_USED_EVERY),
            ).values(last_used_at=stamp))
    return {**_user_dict(row), "token_id": row["token_id"]}


def revoke_token(engine: Engine, token: str) -> dict[str, Any]:
    """Revoke a token named by its id, its prefix as listed (or its first 8 or more characters, when only one
    token starts so) or its whole text; the token's row. A token revoked already keeps its revocation time."""
    text = token.strip() if isinstance(token, str) else str(token)
    shown = text[:PREFIX_LENGTH]  # never the whole of a token in a message
    if text.isdigit():
        where: ColumnElement[bool] = T.c.id == int(text)
    elif text.startswith(TOKEN_START) and len(text) > PREFIX_LENGTH:
        where = T.c.token_hash == token_hash(text)
    elif text.startswith(TOKEN_START) and len(text) >= SHORTEST_PREFIX:
        where = T.c.prefix.startswith(text, autoescape=True)
    else:
        raise InvalidInput(f"{shown!r} names no token: give its id, its prefix as the token list shows it "
                           f"(at least {SHORTEST_PREFIX} characters, starting {TOKEN_START!r}) or the token",
                           field="token")
    stamp = time.time()
    with engine.begin() as conn:
        rows = conn.execute(_tokens().where(where).order_by(T.c.id)).mappings().all()
        if len(rows) > 1:  # of a live token and revoked ones, the live one is meant
            rows = [r for r in rows if r["revoked_at"] is None] or rows
        if not rows:
            raise NotFound(f"no token {shown!r}; the token list shows their ids and prefixes", field="token")
        if len(rows) > 1:
            ids = ", ".join(str(r["id"]) for r in rows)
            raise InvalidInput(f"{shown!r} is the start of {len(rows)} live tokens (ids {ids}); give the id or "
                               f"more characters", field="token")
        row = rows[0]
        if row["revoked_at"] is None:
            conn.execute(update(T).where(T.c.id == row["id"]).values(revoked_at=stamp))
            row = conn.execute(_tokens().where(T.c.id == row["id"])).mappings().one()
    return _token_dict(row, stamp)


def list_tokens(engine: Engine, name: str | None = None) -> list[dict[str, Any]]:
    """Every token (of the user ``name``, when given), oldest first: never its hash nor its text."""
    stamp = time.time()
    with engine.connect() as conn:
        query = _tokens().order_by(T.c.id)
        if name is not None:
            query = query.where(T.c.user_id == _user_row(conn, name)["id"])
        rows = conn.execute(query).mappings().all()
    return [_token_dict(r, stamp) for r in rows]
