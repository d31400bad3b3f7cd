"""`assay users add|list|show|remove|set-role|grant|revoke|roots`: the local users of a guarded server, kept in the
store (store/users.py), with the role and permissions of store/access.py.

These commands, and `assay tokens` (mcp_server/cli/tokens.py, which shares the store opening and the table here),
need only the store: they open its engine (``store.engine.get_engine``), not the application, so they start fast
and work beside a running server. Scripts call them: one line (or ``--json``) on stdout, messages on stderr, exit
status 2 for bad input (its message on stderr) and 1 when the store itself fails.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from mcp_server.cli.common import NOTHING, OK, out, say
from mcp_server.cli.settings import settings_from
from store import users as store_users
from store.access import PERMISSIONS, ROLES
from store.engine import get_engine

EPILOG = f"""examples:
  assay users add alice --role editor           # every root the server has
  assay users add bob --role viewer --root ~/Photos --root /srv/shared
  assay users revoke alice run                  # alice keeps editor's other permissions
  assay users list --json
  assay tokens create alice                     # the token, once, on stdout

roles: {'; '.join(f"{role}: {', '.join(sorted(ROLES[role]))}" for role in ROLES)}
permissions: {', '.join(PERMISSIONS)}"""


def add_parser(sub, common, summary: str) -> argparse.ArgumentParser:
    users = sub.add_parser("users", help=summary, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
                           description="Manage the local users of a guarded server: their role, the permissions "
                                       "granted beyond it or revoked from it, and the roots they may reach. Their "
                                       "API tokens: `assay tokens`.")
    usub = users.add_subparsers(dest="users_command", metavar="ACTION", required=True)
    roles = "|".join(ROLES)

    # its --root is the user's roots, in place of the server's (not needed here: the store is all these work on)
    a = usub.add_parser("add", help="add a user", conflict_handler="resolve")
    a.add_argument("name", metavar="NAME", help="1-64 letters, digits, '.', '_', '@', '-' (unique whatever its case)")
    a.add_argument("--role", required=True, metavar=roles, help="its role")
    common(a)
    a.add_argument("--root", action="append", metavar="PATH", dest="user_roots",
                   help="a root the user may reach (repeatable; default: every root the server has)")
    a.set_defaults(roots=None)

    lst = usub.add_parser("list", help="list the users: role, permissions, roots, live tokens")
    lst.add_argument("--json", action="store_true", help="print the users as JSON")
    common(lst)

    s = usub.add_parser("show", help="one user")
    s.add_argument("name", metavar="NAME")
    s.add_argument("--json", action="store_true", help="print the user as JSON")
    common(s)

    r = usub.add_parser("remove", help="remove a user and all its tokens")
    r.add_argument("name", metavar="NAME")
    common(r)

    sr = usub.add_parser("set-role", help="give a user another role (its grants and revocations stay)")
    sr.add_argument("name", metavar="NAME")
    sr.add_argument("role", metavar="ROLE", help=f"one of {', '.join(ROLES)}")
    common(sr)

    for action, text in (("grant", "give a user a permission its role does not give it"),
                         ("revoke", "take from a user a permission (of its role, or granted)")):
        p = usub.add_parser(action, help=text)
        p.add_argument("name", metavar="NAME")
        p.add_argument("permission", metavar="PERMISSION", help=f"one of {', '.join(PERMISSIONS)}")
        common(p)

    ro = usub.add_parser("roots", help="the roots a user may reach (no PATH: every root the server has)")
    ro.add_argument("name", metavar="NAME")
    ro.add_argument("paths", nargs="*", metavar="PATH", help="absolute, or from the current directory")
    common(ro)
    return users


def run(args: argparse.Namespace) -> int:
    return on_store(args, users_action)


def users_action(engine: Engine, args: argparse.Namespace) -> None:
    action = args.users_command
    if action == "add":
        user = store_users.create_user(engine, args.name, role=args.role, roots=absolute(args.user_roots))
        out(f"added user {user['name']}: {describe(user)}")
    elif action == "list":
        found = store_users.list_users(engine)
        out(json.dumps(found, indent=2) if args.json else user_table(found))
        if not found and not args.json:
            say("no users yet: assay users add NAME --role viewer|editor|admin")
    elif action == "show":
        user = store_users.get_user(engine, args.name)
        out(json.dumps(user, indent=2) if args.json else show_user(user))
    elif action == "remove":
        user = store_users.delete_user(engine, args.name)
        out(f"removed user {user['name']} and its {plural(user['tokens_deleted'], 'token')}")
    else:
        change: dict[str, Callable[[], dict[str, Any]]] = {
            "set-role": lambda: store_users.set_role(engine, args.name, args.role),
            "grant": lambda: store_users.grant_permission(engine, args.name, args.permission),
            "revoke": lambda: store_users.revoke_permission(engine, args.name, args.permission),
            "roots": lambda: store_users.set_roots(engine, args.name, absolute(args.paths or None)),
        }
        user = change[action]()
        out(f"{user['name']}: {describe(user)}")


# --- shared with `assay tokens` -----------------------------------------------------------------------------------


def on_store(args: argparse.Namespace, work: Callable[[Engine, argparse.Namespace], None]) -> int:
    """Run ``work`` on the store engine of the command's settings (``--data-dir``, ``--database-url``,
    ``--config``, the environment); its exit status: 0, or 1 when the store itself failed (unreachable, locked,
    broken: said on stderr). Bad input (an AssayError) goes up to `assay`, which says it and exits with 2."""
    settings = settings_from(args)
    try:
        engine = get_engine(settings.db_url)
        try:
            work(engine, args)
        finally:
            engine.dispose()
    except SQLAlchemyError as exc:
        say(f"assay: the store failed: {exc.__class__.__name__}: {getattr(exc, 'orig', None) or exc}")
        return NOTHING
    return OK


def absolute(paths: Sequence[str] | None) -> list[str] | None:
    """Paths from the command line made absolute (``~`` expanded, relative ones from the current directory)."""
    return None if paths is None else [os.path.abspath(os.path.expanduser(p)) for p in paths]


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Rows under their headers, in columns as wide as their widest cell (the last one not padded)."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows)]
    return [" ".join(str(cell).ljust(width) for cell, width in zip(line, widths)).rstrip()
            for line in (headers, *rows)]


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


# --- how a user is shown ------------------------------------------------------------------------------------------


def roots_text(user: dict[str, Any]) -> str:
    return "every root" if user["roots"] is None else ", ".join(user["roots"])


def describe(user: dict[str, Any]) -> str:
    """A user on one line: role, permissions, roots."""
    return (f"role {user['role']}, permissions {', '.join(user['permissions']) or 'none'}; "
            f"roots {roots_text(user)}")


def user_table(users: list[dict[str, Any]]) -> list[str]:
    if not users:
        return []
    return table(("NAME", "ROLE", "PERMISSIONS", "ROOTS", "TOKENS"),
                 [(u["name"], u["role"], ",".join(u["permissions"]) or "-", roots_text(u), str(u["tokens"]))
                  for u in users])


def show_user(user: dict[str, Any]) -> list[str]:
    return [f"name:        {user['name']}",
            f"role:        {user['role']}",
            f"permissions: {', '.join(user['permissions']) or 'none'}",
            f"granted:     {', '.join(user['granted']) or 'none'}",
            f"revoked:     {', '.join(user['revoked']) or 'none'}",
            f"roots:       {roots_text(user)}",
            f"tokens:      {user['tokens']} live"]
