"""The `assay` command line: `assay serve` runs the MCP server; `assay index`, `classify`, `search`, `ask`, `cite`,
`map` and `plan` do on the command line what the MCP tools do, through the same application object
(mcp_server.app.AssayApp) and the same service functions.

One module per command (its options in ``add_parser``, its work in ``run``), named in the command table
(:mod:`.commands`) and imported only when it is the command being run; the parser in :mod:`.parser`. What every
command shares is in :mod:`.common` (the terminal, the exit codes: the standard library only) and :mod:`.settings`
(its settings); what the commands working through the app share in :mod:`.app`. `assay index` and `assay classify`
hand their job to a running server through :mod:`.handoff` and run it here through :mod:`.local` only when none
takes it; `assay plan` opens the app only for the actions on the store (:mod:`.plan_app`). This package is the only
place that writes to the terminal: results on stdout, progress and messages on stderr; everything else logs (to
stderr).
"""

from __future__ import annotations

import gc
import sys

from mcp_server.cli.common import ERROR, say, set_log_level, setup_logging
from mcp_server.cli.parser import build_parser, command_in
from store.errors import AssayError

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run one `assay` command; its exit status (0 done, 1 nothing found or not completed, 2 an error)."""
    words = sys.argv[1:] if argv is None else argv
    ours = setup_logging()  # before the command's module is imported (see setup_logging)
    parser = build_parser(command_in(words))
    args = parser.parse_args(words)
    if args.command is None:
        parser.print_help()
        return ERROR
    if ours:
        set_log_level(args.log_level)
    try:
        code = args.run(args)
    except AssayError as exc:
        say(f"assay: {exc}")
        code = ERROR
    if argv is None:  # the program itself, about to exit (not a caller such as a test)
        gc.freeze()  # see below
    return code


# Why gc.freeze() at the end: a command that built the app or ran a flow has imported Prefect, the MCP SDK, SQLAlchemy
# and pydantic (~1,800 modules, ~235,000 objects the garbage collector tracks). After the atexit handlers, Python's
# finalization clears the modules and collects garbage over all of those objects more than once: 1-1.5 s on a busy
# 2-core machine (0.1 s with them frozen; gc.disable() does not help, finalization collects regardless). Frozen
# objects are still freed by reference counting as the modules go; the cycles among them go with the process. The
# exit is otherwise the ordinary one: non-daemon threads joined, threading's exit hooks (Prefect drains its event and
# log queues there) and the atexit handlers (our Prefect API child stopped) run, the streams flushed.
