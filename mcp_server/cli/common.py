"""What every command shares: the exit codes, the options every command takes, the logging, and how it writes to the
terminal (results on stdout, progress and messages on stderr). A command's settings are read in
mcp_server/cli/settings.py, the application object the commands work through opened in mcp_server/cli/app.py.

Only the standard library is imported here: the program's own start (`assay --help`) and `assay index` beside a
running server (mcp_server/cli/handoff.py) load it.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

OK = 0  # done; something found
NOTHING = 1  # nothing found, or the job did not complete, or a plan has problems
ERROR = 2  # an error (its message on stderr) or a usage error

# libraries whose INFO lines say nothing to a person at a terminal; their WARNINGs still show. alembic: a "setup
# plugin ..." line per autogenerate plugin each time it is imported (the store's own lines say what migrating did)
NOISY_LOGGERS = ("httpx", "httpcore", "uvicorn.access", "sqlalchemy", "mcp.server.lowlevel", "alembic")


def setup_logging() -> bool:
    """Logs on stderr, through a handler of ours on the root logger unless logging is set up already (by a caller
    such as a test): whether ours was installed, its level to be set once the command line is parsed
    (:func:`set_log_level`). `assay` calls it before it imports the command's module: Prefect, which most commands
    import, configures the root logger when it is imported unless the root has a handler, and its console handler
    (level WARNING) would drop our INFO lines."""
    installed = not logging.getLogger().handlers
    logging.basicConfig(stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in NOISY_LOGGERS:
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return installed


def set_log_level(level: str) -> None:
    """The level of the root logger: ``--log-level``'s (DEBUG, INFO, WARNING, ERROR)."""
    logging.getLogger().setLevel(getattr(logging, level))


def from_cwd(path: str) -> str:
    """A command-line habit: a relative path that exists from the current directory is taken from there (made
    absolute); anything else is returned as given (``~`` expanded), for the roots to resolve."""
    if not os.path.isabs(os.path.expanduser(path)) and os.path.exists(path):
        return os.path.abspath(path)
    return os.path.expanduser(path)


# --- the terminal ---------------------------------------------------------------------------------------------------


def out(lines: str | Iterable[str]) -> None:
    """Result lines on stdout."""
    for line in [lines] if isinstance(lines, str) else lines:
        print(line)
    sys.stdout.flush()


def say(message: str) -> None:
    """A message for the person at the terminal, on stderr."""
    print(message, file=sys.stderr)


def progress_bar(percent: Callable[[Any], float], describe: Callable[[Any], str]) -> Callable[[Any], None]:
    """A progress bar on stderr, redrawn at most ten times a second (and at 100%): ``percent(p)`` and
    ``describe(p)`` read a progress report."""
    width = 30
    last = [0.0]

    def show(p: Any) -> None:
        now = time.monotonic()
        done = percent(p)
        if now - last[0] < 0.1 and done < 100:
            return
        last[0] = now
        filled = int(width * done / 100)
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done:5.1f}%  {describe(p)}")
        sys.stderr.flush()

    return show


def end_bar() -> None:
    """The line after a progress bar."""
    sys.stderr.write("\n")


def common_options(p: argparse.ArgumentParser) -> None:
    """The options every command takes."""
    p.add_argument("--root", action="append", metavar="DIR", dest="roots",
                   help="a directory callers may touch (repeatable; default: ASSAY_ROOTS or your home directory)")
    p.add_argument("--data-dir", metavar="DIR", help="where the store and caches live (default: ~/.assay)")
    p.add_argument("--config", metavar="FILE", help="YAML settings file")
    p.add_argument("--database-url", metavar="URL",
                   help="SQLAlchemy URL of the store (default: SQLite in the data dir); e.g. postgresql+psycopg://...")
    p.add_argument("--log-level", default=os.environ.get("ASSAY_LOG_LEVEL", "INFO"),
                   choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="log level (logs go to stderr)")
