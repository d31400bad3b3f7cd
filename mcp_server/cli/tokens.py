"""`assay tokens create|list|revoke`: the API tokens of the local users (store/users.py), on the store alone as
`assay users` works (mcp_server/cli/users.py).

``create`` prints only the token on stdout, for a script to capture (``TOKEN=$(assay tokens create alice)``); that
it is shown this once goes to stderr. The store keeps its hash, so it cannot be shown again: a lost token is revoked
and another made.
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import datetime, timezone
from typing import Any

from sqlalchemy.engine import Engine

from mcp_server.cli.common import out, say
from mcp_server.cli.users import on_store, table
from store import users as store_users
from store.errors import InvalidInput

DAY = 86400.0

EPILOG = """examples:
  TOKEN=$(assay tokens create alice --label laptop --expires-days 90)
  assay tokens list alice
  assay tokens revoke assay_Xq3f9a              # by the prefix the list shows, or by its id"""


def add_parser(sub, common, summary: str) -> argparse.ArgumentParser:
    tokens = sub.add_parser("tokens", help=summary, epilog=EPILOG,
                            formatter_class=argparse.RawDescriptionHelpFormatter,
                            description="Make, list and revoke the API tokens of the local users (`assay users`). "
                                        "A caller presents one as a bearer token; the store keeps only its hash.")
    tsub = tokens.add_subparsers(dest="tokens_command", metavar="ACTION", required=True)

    c = tsub.add_parser("create", help="make a token for a user and print it (only it, on stdout): shown once")
    c.add_argument("name", metavar="NAME", help="the user")
    c.add_argument("--label", metavar="TEXT", help="what the token is for (shown in the list)")
    c.add_argument("--expires-days", type=float, metavar="N",
                   help="the token stops working N days from now (default: it does not expire)")
    common(c)

    lst = tsub.add_parser("list", help="list the tokens (of one user): id, prefix, label, dates, state")
    lst.add_argument("name", nargs="?", metavar="NAME", help="only this user's tokens")
    lst.add_argument("--json", action="store_true", help="print the tokens as JSON")
    common(lst)

    r = tsub.add_parser("revoke", help="revoke a token: it stops working at once")
    r.add_argument("token", metavar="ID_OR_PREFIX", help="its id or its prefix, as the list shows them")
    common(r)
    return tokens


def run(args: argparse.Namespace) -> int:
    return on_store(args, tokens_action)


def tokens_action(engine: Engine, args: argparse.Namespace) -> None:
    action = args.tokens_command
    if action == "create":
        if args.expires_days is not None and not args.expires_days > 0:
            raise InvalidInput("--expires-days takes a number of days above 0", field="--expires-days")
        expires = None if args.expires_days is None else time.time() + args.expires_days * DAY
        token, row = store_users.create_token(engine, args.name, label=args.label, expires_at=expires)
        out(token)
        say(f"token {row['id']} ({row['prefix']}) of {row['user']}"
            + (f", expiring {when(row['expires_at'])}" if row["expires_at"] is not None else "")
            + ": it is shown only this once, keep it now")
    elif action == "list":
        found = store_users.list_tokens(engine, args.name)
        out(json.dumps(found, indent=2) if args.json else token_table(found))
        if not found and not args.json:
            say(f"no tokens{' of ' + args.name if args.name else ''}: assay tokens create NAME")
    else:
        row = store_users.revoke_token(engine, args.token)
        out(f"revoked token {row['id']} ({row['prefix']}) of {row['user']}")


def when(stamp: float | None) -> str:
    """A time for the table: UTC, to the minute; ``-`` for none."""
    if stamp is None:
        return "-"
    return datetime.fromtimestamp(stamp, tz=timezone.utc).strftime("%Y-%m-%d %H:%MZ")


def state(token: dict[str, Any]) -> str:
    return "live" if token["live"] else "revoked" if token["revoked_at"] is not None else "expired"


def token_table(tokens: list[dict[str, Any]]) -> list[str]:
    if not tokens:
        return []
    return table(("ID", "USER", "PREFIX", "STATE", "CREATED", "EXPIRES", "LAST USED", "LABEL"),
                 [(str(t["id"]), t["user"], t["prefix"], state(t), when(t["created_at"]), when(t["expires_at"]),
                   when(t["last_used_at"]), t["label"] or "") for t in tokens])
