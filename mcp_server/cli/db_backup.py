"""`assay db backup PATH` and `assay db restore PATH`: a copy of the store taken while the server runs, and putting one
back with the server stopped (store/backup.py does both).

SQLite is copied with its online backup API (the server goes on writing); PostgreSQL with ``pg_dump`` (restored with
``pg_restore``: the PostgreSQL client tools must be installed). A restore keeps the SQLite store it replaces beside
it (``assay.db.replaced-<time>``) and moves the search indexes' files away with it, so the server rebuilds them from
the restored store when it next starts or searches.

Only the store is opened (not the application): these work beside a running server, or with none. Exit status 0
done, 1 when the store itself failed, 2 for bad input (a running server for a restore, a file that is not a
backup; the message on stderr).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine
from sqlalchemy.exc import SQLAlchemyError

from mcp_server.cli.common import NOTHING, OK, out, say
from mcp_server.cli.settings import settings_from
from store.backup import backup, restore

EPILOG = """examples:
  assay db backup ~/backups/                    # ~/backups/assay-<time>.db (PostgreSQL: <database>-<time>.dump)
  assay db backup /mnt/usb/assay.db             # while the server runs: it is not stopped or slowed
  assay db restore ~/backups/assay-20250101-120000.db   # the server stopped; the store replaced is kept beside it
  assay db backup pg.dump --database-url postgresql+psycopg://assay@db-host/assay   # pg_dump --format=custom"""

ACTIONS = ("backup", "restore")


def add_parsers(actions: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add ``backup PATH`` and ``restore PATH`` to the `db` command's sub-parsers ``actions`` (their ``dest`` is
    ``db_action``), each with the options every command takes (``common``)."""
    b = actions.add_parser("backup", help="copy the store to PATH while the server runs",
                           epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
                           description="Copy the store to PATH (a directory: a file named for the store and the "
                                       "time in it). SQLite: SQLite's online backup API, a snapshot taken while the "
                                       "server goes on writing, integrity-checked before it is put at PATH. "
                                       "PostgreSQL: pg_dump --format=custom --no-owner.")
    b.add_argument("path", metavar="PATH", help="the file to write, or a directory to write it in (made when PATH "
                                                "ends with /)")
    b.add_argument("--json", action="store_true", help="print what was written as JSON")
    common(b)
    r = actions.add_parser("restore", help="replace the store with the backup PATH (server stopped)",
                           epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
                           description="Replace the store with the backup at PATH; the server on this data dir must "
                                       "be stopped. SQLite: the backup must be an assay store passing its "
                                       "integrity check; the store replaced is kept beside it "
                                       "(assay.db.replaced-<time>). PostgreSQL: pg_restore --clean --if-exists "
                                       "--no-owner in one transaction. The text and vector indexes are rebuilt "
                                       "from the restored store when the server next starts or searches.")
    r.add_argument("path", metavar="PATH", help="a file `assay db backup` wrote")
    r.add_argument("--json", action="store_true", help="print what was restored as JSON")
    common(r)


def run(args: argparse.Namespace) -> int | None:
    """Run ``args.db_action`` when it is ``backup`` or ``restore`` (its exit status); None for any other action."""
    if getattr(args, "db_action", None) not in ACTIONS:
        return None
    settings = settings_from(args)
    path = Path(os.path.abspath(os.path.expanduser(args.path)))
    if args.db_action == "backup" and args.path.endswith(("/", os.sep)):
        path.mkdir(parents=True, exist_ok=True)  # PATH/ names a directory: made if missing
    try:
        if args.db_action == "backup":
            engine = create_engine(settings.db_url)  # the store as it is: no schema made, nothing migrated
            try:
                result = backup(engine, path)
            finally:
                engine.dispose()
        else:
            result = restore(path, settings.db_url, settings.data_dir)
    except SQLAlchemyError as exc:
        say(f"assay: the store failed: {exc.__class__.__name__}: {getattr(exc, 'orig', None) or exc}")
        return NOTHING
    out(json.dumps(result, indent=2) if args.json else
        backed_up(result) if args.db_action == "backup" else restored(result))
    return OK


def backed_up(result: dict[str, Any]) -> list[str]:
    """What `assay db backup` wrote, as a person reads it."""
    return [f"backed up the {result['backend']} store to {result['path']}: {size(result['bytes'])} in "
            f"{result['seconds']:.1f} s (revision {result['revision'] or 'none: made before migrations'})"]


def restored(result: dict[str, Any]) -> list[str]:
    """What `assay db restore` did, as a person reads it."""
    lines = [f"restored {result['source']} into the {result['backend']} store {result['path']}: "
             f"{size(result['bytes'])} (revision {result['revision'] or 'none: made before migrations'})"]
    if result["replaced"]:
        lines.append(f"the store it replaced is kept at {result['replaced']} (with its index files)")
    lines.append("the text and vector indexes will be rebuilt from the restored store when the server next starts "
                 "or searches" + (f" (their old files moved away: {', '.join(result['indexes'])})"
                                  if result["indexes"] else ""))
    return lines


def size(n: int) -> str:
    """``n`` bytes as a person reads them (``512 bytes``, ``1.5 MB``)."""
    if n < 1000:
        return f"{n} bytes"
    value, units = n / 1000, ["kB", "MB", "GB", "TB"]
    while value >= 1000 and len(units) > 1:
        value, units = value / 1000, units[1:]
    return f"{value:.1f} {units[0]}"
