"""User tools (reference 004's "Users" group): list_users, get_user, create_user, delete_user, set_user_role,
grant_permission, revoke_permission — thin wrappers over store/users.py for an operator with the ``admin``
permission (the guard enforces it; mcp_server/guard/placement.py).

Two places where assay differs from the reference, said in the results rather than hidden: assay's callers
authenticate with API tokens, not passwords, so ``create_user`` makes the user *and* one token, returns the token
once, and does not store a password it is given; and a permission is granted until revoked, so the reference's
count-limited grant (``count``) is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, Field

from mcp_server.guard import caller as callers
from mcp_server.guard.activity import MAX_REQUESTS
from mcp_server.tools.common import DESTRUCTIVE, IDEMPOTENT_WRITE, READ_ONLY, WRITES, StrList, ToolSet, tool
from store import users as store_users
from store.access import PERMISSIONS, ROLES
from store.entries import iso
from store.errors import Conflict, InvalidInput

if TYPE_CHECKING:
    from mcp_server.app import AssayApp

_ROLES = ", ".join(f"{role} ({', '.join(sorted(ROLES[role]))})" for role in ROLES)
Handle = Annotated[str, Field(description="The user's name (1-64 letters, digits, '.', '_', '@', '-'; any case)")]
Role = Annotated[str, Field(description=f"Role: {_ROLES}")]
Permission = Annotated[str, Field(description=f"Permission: {', '.join(PERMISSIONS)}")]

TOKEN_NOTE = ("assay authenticates callers with API tokens, not passwords: this is the user's token, shown this once "
              "(the store keeps only its hash). Give it to the user, who sends it as 'Authorization: Bearer <token>'; "
              "`assay tokens create` makes more and `assay tokens revoke` ends one.")
PASSWORD_NOTE = " The password given was not stored: it cannot be used to sign in."


class UserActivity(BaseModel):
    last_request_at: str | None = Field(description="When this server last saw a request of the user (since it "
                                                    "started; none: not seen)")
    requests_in_window: dict[str, int] = Field(description="Calls of each rate-limit category (read, write, sql) "
                                                           "the user made in the current window")
    limits: dict[str, int] = Field(description="Calls per window allowed in each category (0: no limit)")
    window_seconds: float = Field(description="Length of the rate-limit window")


class UserInfo(BaseModel):
    handle: str
    role: str
    permissions: list[str] = Field(description="Effective permissions: the role's, plus granted, minus revoked")
    granted: list[str] = Field(description="Permissions granted beyond the role")
    revoked: list[str] = Field(description="Permissions of the role revoked from the user")
    roots: list[str] | None = Field(description="The roots the user may reach; none: every root the server has")
    created_at: str | None
    live_tokens: int = Field(description="API tokens neither revoked nor expired")
    activity: UserActivity | None = Field(None, description="What this server saw of the user (when asked for)")


class TokenInfo(BaseModel):
    id: int
    prefix: str = Field(description="The token's first characters, to tell it apart (never the token)")
    label: str | None
    created_at: str | None
    expires_at: str | None
    last_used_at: str | None = Field(description="Noted at most once a minute")
    revoked_at: str | None
    live: bool


class UserDetails(UserInfo):
    tokens: list[TokenInfo] = Field(description="Every token of the user, oldest first (never its secret)")


class UserListResponse(BaseModel):
    users: list[UserInfo]
    total: int


class CreateUserResponse(BaseModel):
    user: UserInfo
    token: str = Field(description="The user's API token: shown this once, never again")
    token_info: TokenInfo
    note: str


class UserChangeResponse(BaseModel):
    user: UserInfo
    message: str


class DeleteUserResponse(BaseModel):
    deleted: UserInfo
    tokens_deleted: int
    message: str


def user_info(user: dict[str, Any], activity: UserActivity | None = None) -> dict[str, Any]:
    """A store user dict (store/users.py) in the tools' shape."""
    return {"handle": user["name"], "role": user["role"], "permissions": user["permissions"],
            "granted": user["granted"], "revoked": user["revoked"], "roots": user["roots"],
            "created_at": iso(user["created_at"]), "live_tokens": user["tokens"], "activity": activity}


def token_info(token: dict[str, Any]) -> TokenInfo:
    return TokenInfo(id=token["id"], prefix=token["prefix"], label=token["label"],
                     created_at=iso(token["created_at"]), expires_at=iso(token["expires_at"]),
                     last_used_at=iso(token["last_used_at"]), revoked_at=iso(token["revoked_at"]),
                     live=token["live"])


def activities(app: AssayApp, names: list[str]) -> dict[str, UserActivity]:
    """What the server's guard saw of each user in ``names``: the last request (of its recent requests and its
    sessions) and its rate-limit usage; empty when the server has no guard."""
    guard = app.guard
    if guard is None:
        return {}
    last: dict[str, float] = {}
    for request in guard.activity.recent_requests(MAX_REQUESTS):
        last[request["user"]] = max(last.get(request["user"], 0.0), request["time"])
    for session in guard.activity.session_list(idle_after=0.0):
        last[session["user"]] = max(last.get(session["user"], 0.0), session["last_seen"])
    limiter = guard.limiter
    return {name: UserActivity(last_request_at=iso(last.get(name)), requests_in_window=limiter.usage(name),
                               limits=dict(limiter.limits), window_seconds=limiter.window)
            for name in names}


def check_not_caller(handle: str) -> None:
    """Conflict when ``handle`` names the user making this request: an operator must not lock itself out."""
    current = callers.current()
    if current is not None and current.user.lower() == handle.strip().lower():
        raise Conflict(f"{handle!r} is the user making this request: a user cannot delete itself (another admin "
                       "can, or `assay users remove` on the server's machine)", field="handle")


def check_no_count(count: int | None) -> None:
    """InvalidInput for a count-limited grant, which assay does not have."""
    if count is not None:
        raise InvalidInput(f"count={count} refused: assay has no count-limited grants; a permission is granted until "
                           "revoke_permission takes it back. Call grant_permission without count", field="count")


def register(tools: ToolSet, app: AssayApp) -> None:
    @tool(tools, "list_users", READ_ONLY)
    def list_users(
        include_activity: Annotated[bool, Field(description="Add each user's last request and its calls in the "
                                                            "current rate-limit window")] = False,
    ) -> UserListResponse:
        """All users with their role, effective permissions, roots and number of live API tokens."""
        found = store_users.list_users(app.engine)
        seen = activities(app, [u["name"] for u in found]) if include_activity else {}
        users = [UserInfo.model_validate(user_info(u, seen.get(u["name"]))) for u in found]
        return UserListResponse(users=users, total=len(users))

    @tool(tools, "get_user", READ_ONLY)
    def get_user(handle: Handle) -> UserDetails:
        """One user's details: role, permissions, roots, API tokens (never their secrets) and activity. The
        permissions granted and revoked beyond the role are listed apart; each token has its prefix, label and
        times; the activity is the last request this server saw and the calls in the rate-limit window."""
        user = store_users.get_user(app.engine, handle)
        tokens = [token_info(t) for t in store_users.list_tokens(app.engine, user["name"])]
        return UserDetails.model_validate(
            {**user_info(user, activities(app, [user["name"]]).get(user["name"])), "tokens": tokens})

    @tool(tools, "create_user", WRITES)
    def create_user(
        handle: Handle,
        role: Role,
        password: Annotated[str | None, Field(description="Not used: assay authenticates with API tokens. A "
                                                          "password given is not stored; the result holds the "
                                                          "user's token instead")] = None,
        roots: Annotated[StrList | None, Field(description="Absolute paths the user is limited to; none: every "
                                                           "root the server has")] = None,
    ) -> CreateUserResponse:
        """Create a user with a role and one API token, returned once in the result (assay has no passwords).
        Names are unique whatever their case."""
        current = callers.current()
        user = store_users.create_user(app.engine, handle, role=role, roots=roots)
        label = f"made by create_user ({current.user})" if current is not None else "made by create_user"
        token, row = store_users.create_token(app.engine, user["name"], label=label)
        user = store_users.get_user(app.engine, user["name"])  # with its token counted
        note = TOKEN_NOTE + (PASSWORD_NOTE if password is not None else "")
        return CreateUserResponse(user=UserInfo.model_validate(user_info(user)), token=token,
                                  token_info=token_info(row), note=note)

    @tool(tools, "delete_user", DESTRUCTIVE)
    def delete_user(handle: Annotated[str, Field(description="The user to remove, with all its tokens")]
                    ) -> DeleteUserResponse:
        """Remove a user and all its API tokens (callers using them are refused from now on). The calling user
        cannot delete itself."""
        check_not_caller(handle)
        gone = store_users.delete_user(app.engine, handle)
        return DeleteUserResponse(deleted=UserInfo.model_validate(user_info(gone)),
                                  tokens_deleted=gone["tokens_deleted"],
                                  message=f"Deleted user '{gone['name']}' and {gone['tokens_deleted']} token(s)")

    @tool(tools, "set_user_role", IDEMPOTENT_WRITE)
    def set_user_role(handle: Handle, role: Role) -> UserChangeResponse:
        """Give a user another role; permissions granted or revoked beyond the role stay as they are."""
        before = store_users.get_user(app.engine, handle)
        user = store_users.set_role(app.engine, handle, role)
        return UserChangeResponse(user=UserInfo.model_validate(user_info(user)),
                                  message=f"'{user['name']}' is now {user['role']} (was {before['role']})")

    @tool(tools, "grant_permission", IDEMPOTENT_WRITE)
    def grant_permission(
        handle: Handle,
        permission: Permission,
        count: Annotated[int | None, Field(description="Not supported: assay's grants last until revoked; leave "
                                                       "it out")] = None,
    ) -> UserChangeResponse:
        """Give a user a permission beyond its role (or give back one revoked from it); lasts until revoked."""
        check_no_count(count)
        user = store_users.grant_permission(app.engine, handle, permission)
        return UserChangeResponse(user=UserInfo.model_validate(user_info(user)),
                                  message=f"'{user['name']}' has the permissions: {', '.join(user['permissions'])}")

    @tool(tools, "revoke_permission", IDEMPOTENT_WRITE)
    def revoke_permission(handle: Handle, permission: Permission) -> UserChangeResponse:
        """Take a permission from a user, whether granted to it or given by its role (a revocation of a role's
        permission is kept until the permission is granted again)."""
        user = store_users.revoke_permission(app.engine, handle, permission)
        return UserChangeResponse(user=UserInfo.model_validate(user_info(user)),
                                  message=f"'{user['name']}' has the permissions: "
                                          f"{', '.join(user['permissions']) or 'none'}")
