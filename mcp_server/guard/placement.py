"""Where every tool and resource sits: the permission it needs (store/access.py) and the rate-limit category it counts
in. One table, read by the guard, the README's table and a test that fails when a tool is added without a place.

Reference 004 gates each tool by one permission of its group; so does assay, with one exception that depends on the
arguments: ``resolve`` reads (a virtual resolution only checks an address) unless it writes a file under the data
dir (``virtual: false``), which is running work.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

READ, CHANGE, RUN, FILES, ADMIN = "read", "change", "run", "file_operations", "admin"

_GROUPS: dict[str, tuple[str, ...]] = {
    READ: (
        # navigation and inspection, jobs followed
        "navigate", "inspect", "job-progress", "list-jobs", "classifier-job-progress", "list-classifier-jobs",
        "db-diagnose", "session-info", "cluster-status", "file-history", "trash-list",
        # saved queries, sets and resource queries, read
        "query-execute", "query-list", "query-get", "resource-set-list", "resource-set-get", "resource-children",
        "resource-parent", "resource-sum", "resource-time-range", "resource-metric-range", "resource-is",
        "resource-fuzzy-match", "resource-search",
        # plans and sources, read
        "plan-list", "plan-get", "plan-validate", "plan-preview", "plan-explain", "source-list", "source-get",
        "source-stats",
        # documents and semantic search
        "list_collections", "find_document", "search_documents", "search_multiple", "read_document",
        "get_document_info", "search", "get_file_details",
        # citations read, and resolved virtually
        "listResources", "getStructure", "getNode", "resolve",
    ),
    CHANGE: (
        "query-create", "query-update", "query-delete", "resource-set-create", "resource-set-modify",
        "resource-set-delete", "resource-set-add-child", "resource-set-remove-child", "plan-create", "plan-update",
        "plan-delete", "source-create", "source-delete", "map-put", "map-delete", "session-set-preferences",
    ),
    RUN: (
        "index", "index-cancel", "cancel-job", "plan-execute", "rerun-classifier", "index_files", "update_index",
        "map-build", "source-start", "source-stop",
    ),
    FILES: ("rename-files", "move-files", "delete-files", "undo", "trash-empty"),
    ADMIN: (
        # reference 004's operator tools
        "get_server_info", "get_memory_stats", "list_active_sessions", "get_recent_requests", "list_jobs",
        "get_job_history", "trigger_job", "enable_job", "disable_job", "get_recent_errors", "check_integrity",
        "reload_search_index", "clear_cache", "get_config", "query_sql",
        # ... and its user tools
        "list_users", "get_user", "create_user", "delete_user", "set_user_role", "grant_permission",
        "revoke_permission",
    ),
}

TOOL_PERMISSIONS: Mapping[str, str] = MappingProxyType(
    {tool: permission for permission, tools in _GROUPS.items() for tool in tools})

# admin tools that only read: they count as reads against the rate limits
_ADMIN_READS = frozenset({"get_server_info", "get_memory_stats", "list_active_sessions", "get_recent_requests",
                          "list_jobs", "get_job_history", "get_recent_errors", "get_config", "list_users",
                          "get_user"})

# resource URI schemes -> permission; reference 004's operator resources are administration
RESOURCE_PERMISSIONS: Mapping[str, str] = MappingProxyType({
    "synthesis": READ, "logs": ADMIN, "jobs": ADMIN, "changelog": ADMIN})

CATEGORIES = ("read", "write", "sql")  # rate-limit categories (reference 004's table)


def tool_permissions(name: str, arguments: Mapping[str, Any] | None = None) -> frozenset[str] | None:
    """The permissions a call of tool ``name`` with ``arguments`` needs; None for a tool that has no place (which
    the guard treats as unknown: no caller sees it)."""
    permission = TOOL_PERMISSIONS.get(name)
    if permission is None:
        return None
    if name == "resolve" and arguments is not None and arguments.get("virtual") in (False, "false"):
        return frozenset({READ, RUN})
    return frozenset({permission})


def visible(name: str, permissions: frozenset[str]) -> bool:
    """Whether a caller with ``permissions`` sees tool ``name`` in tools/list (and may call it)."""
    permission = TOOL_PERMISSIONS.get(name)
    return permission is not None and permission in permissions


def category(name: str) -> str:
    """The rate-limit category of a call of tool ``name``: sql, read or write."""
    if name == "query_sql":
        return "sql"
    permission = TOOL_PERMISSIONS.get(name)
    if permission == READ or name in _ADMIN_READS:
        return "read"
    return "write"


def resource_permission(uri: str) -> str | None:
    """The permission reading resource ``uri`` (or listing its template) needs; None for an unknown scheme."""
    scheme, sep, _ = uri.partition("://")
    return RESOURCE_PERMISSIONS.get(scheme.lower()) if sep else None
