"""Who may do what: the permissions of a guarded server and the roles that bundle them (reference 004's model).

A caller needs ``mcp_access`` to connect at all; then each tool needs one permission, the one of its group (the
server's placement of every tool is mcp_server/guard/placement.py). Roles bundle permissions; a user has a role, plus
permissions granted to it and minus permissions revoked from it (``effective_permissions``). Kept in the store layer
because users, their grants and their tokens are store rows; nothing here depends on the server.
"""

from __future__ import annotations

from collections.abc import Iterable
from types import MappingProxyType

from store.errors import InvalidInput

# permission -> what it allows, in the order the README lists them
PERMISSIONS: MappingProxyType[str, str] = MappingProxyType({
    "mcp_access": "connect to the MCP server at all (reference 004's McpAccess)",
    "read": "reading: navigation, saved queries and sets, resource queries, documents, semantic search, citations "
            "read and resolved virtually",
    "change": "changing sets, saved queries, plans, sources and agent maps",
    "run": "running work: index, plan-execute, classifier reruns, index_files / update_index, map builds, physical "
           "resolution (files written under the data dir)",
    "file_operations": "renaming, moving and deleting files (destructive)",
    "admin": "administration: users and tokens, query_sql, the operator tools and resources",
})

# role -> its permissions
ROLES: MappingProxyType[str, frozenset[str]] = MappingProxyType({
    "viewer": frozenset({"mcp_access", "read"}),
    "editor": frozenset({"mcp_access", "read", "change", "run"}),
    "admin": frozenset(PERMISSIONS),
})

ALL_PERMISSIONS: frozenset[str] = frozenset(PERMISSIONS)


def check_role(role: str, *, field: str = "role") -> str:
    """``role`` if it is one (case-insensitive, returned in lower case); InvalidInput naming the roles otherwise."""
    name = role.strip().lower() if isinstance(role, str) else role
    if name not in ROLES:
        raise InvalidInput(f"unknown role {role!r}; roles: {', '.join(ROLES)}", field=field)
    return name


def check_permission(permission: str, *, field: str = "permission") -> str:
    """``permission`` if it is one (case-insensitive); InvalidInput naming the permissions otherwise."""
    name = permission.strip().lower() if isinstance(permission, str) else permission
    if name not in PERMISSIONS:
        raise InvalidInput(f"unknown permission {permission!r}; permissions: {', '.join(PERMISSIONS)}", field=field)
    return name


def effective_permissions(role: str | None, granted: Iterable[str] = (), revoked: Iterable[str] = ()) -> frozenset[str]:
    """The permissions of a user with ``role`` (none: no role's), plus ``granted``, minus ``revoked``; names that
    are not permissions (a store written by a later version) are ignored."""
    base = ROLES.get(role or "", frozenset())
    return frozenset((base | set(granted)) - set(revoked)) & ALL_PERMISSIONS
