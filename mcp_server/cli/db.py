"""`assay db upgrade | current | history` (and `backup | restore`, mcp_server/cli/db_backup.py): the store's schema
revision for the operator who migrates by hand (store.migrate).

`assay serve` and every command upgrade an older store when they open it; `assay db upgrade` does it alone, with no
server (a SQLite file is copied beside itself first, ``<db>.before-<revision>-<time>.bak``), printing from which
revision to which. `assay db current` prints the store's revision and whether it is the newest this assay knows
(exit status 1 when not: an older store to upgrade, or one a newer assay upgraded); `assay db history` lists the
revisions, newest first. Only the store is opened, never migrated by the opening itself. Exit status 0 done, 1 when
the store itself failed (unreachable, locked) or a SQLite store is not there (said so, not made empty by opening
it), 2 for a store this assay cannot open (its message on stderr).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from mcp_server.cli import db_backup
from mcp_server.cli.common import NOTHING, OK, out, say
from mcp_server.cli.settings import settings_from
from store import migrate
from store.engine import make_engine

EPILOG = """examples:
  assay db current                              # e.g. 0003_kept_on_trash (head); exit 1 when not the newest
  assay db upgrade                              # the store migrated to the newest revision, no server running
  assay db upgrade --database-url postgresql+psycopg://assay@db-host/assay
  assay db history                              # every revision, newest first
  assay db backup ~/backups/                    # see `assay db backup --help`"""


def add_parser(sub, common, summary: str) -> argparse.ArgumentParser:
    db = sub.add_parser("db", help=summary, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
                        description="The store itself: its schema revision (upgrade, current, history) and its "
                                    "backups (backup, restore).")
    actions = db.add_subparsers(dest="db_action", metavar="ACTION", required=True)
    up = actions.add_parser("upgrade", help="migrate the store to the newest schema revision (or --revision)",
                            description="Run the store's migrations up to the newest revision (or REV), in one "
                                        "transaction under the store's lock; a SQLite store is copied beside itself "
                                        "first (<db>.before-<revision>-<time>.bak). A store at or past it is left "
                                        "as it is.")
    up.add_argument("--revision", default="head", metavar="REV", help="the revision to reach (default: head)")
    common(up)
    cur = actions.add_parser("current", help="the store's schema revision, and whether it is the newest")
    common(cur)
    hist = actions.add_parser("history", help="the schema revisions this assay knows, newest first")
    common(hist)
    db_backup.add_parsers(actions, common)
    return db


def run(args: argparse.Namespace) -> int:
    done = db_backup.run(args)
    if done is not None:
        return done
    if args.db_action == "history":
        out(f"{r.revision}{' (head)' if r.is_head else ''}  {r.message}" for r in migrate.history())
        return OK
    settings = settings_from(args)
    missing = missing_store(settings.db_url)
    if missing is not None:
        say(f"assay: there is no store at {missing}: nothing to {'read' if args.db_action == 'current' else 'upgrade'}"
            f" (assay serve or assay index makes one; is --data-dir or --database-url the server's?)")
        return NOTHING
    try:
        engine = make_engine(settings.db_url, statement_timeout=None, prepare_schema=False)
        try:
            if args.db_action == "current":
                return current(migrate.current(engine))
            report = migrate.upgrade(engine, args.revision)
        finally:
            engine.dispose()
    except SQLAlchemyError as exc:
        say(f"assay: the store failed: {exc.__class__.__name__}: {getattr(exc, 'orig', None) or exc}")
        return NOTHING
    if report.action == "current":
        out(f"{report.to_revision}: already there, nothing to do")
    else:
        out(f"{report.from_revision or '(none)'} -> {report.to_revision}")
        if report.backup is not None:
            say(f"the store as it was: {report.backup}")
    return OK


def missing_store(url: str) -> Path | None:
    """The file of a SQLite store at ``url`` that does not exist (None when it does, or for another store): opening
    it would make an empty database where the operator mistyped a path."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    path = Path(parsed.database)
    return None if path.exists() else path


def current(revision: str | None) -> int:
    """Print the store's revision as `assay db current` shows it; its exit status (0 at the newest)."""
    head = migrate.head()
    if revision == head:
        out(f"{revision} (head)")
        return OK
    if revision is None:
        out(f"(none): no revision recorded (an empty store, or one made before migrations); assay db upgrade "
            f"brings it to {head}")
    elif migrate.is_known(revision):
        out(f"{revision} (not head: the newest is {head}; assay db upgrade)")
    else:
        out(f"{revision} (unknown to this assay, whose newest is {head}: a newer assay upgraded this store)")
    return NOTHING
