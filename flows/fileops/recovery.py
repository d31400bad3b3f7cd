"""At server start: the renames and moves a dead process left in flight (flows/fileops/journal.py) are finished or
undone, by what the disk shows.

- The source is gone and the target is there: the disk moved, so the store follows (the subtree's entries keep
  their ids, hence their set memberships), as the call would have done next.
- Both are there and the item was a copy across filesystems: the copy was renamed into place whole, and the removal
  of the source was cut short; the rest of the source is removed, then the store follows.
- The source is there and the target is not: the disk did not change; a partial copy beside the target and the
  folders made for it (when empty) are removed, and the store is left as it is.
- Anything else (neither is there; both without a copy): something else changed the disk since; nothing is touched,
  and the next index of the folders brings the store in step.

What was done is written on the move's run (its ``error_message``) and logged.
"""

from __future__ import annotations

import glob
import logging
import os
import posixpath
from typing import Any

from sqlalchemy.engine import Engine

from flows.fileops import disk as diskops
from flows.fileops.journal import interrupted, record_outcome
from flows.fileops.operations import sync_move

log = logging.getLogger(__name__)


def recover_moves(engine: Engine) -> list[str]:
    """Settle every item a dead process left in flight; returns what was done with each."""
    done = []
    for job_id, intent in interrupted(engine):
        message = _settle(engine, job_id, intent)
        log.warning("move run %d: %s", job_id, message)
        done.append(message)
    return done


def recover_at_start(engine: Engine) -> None:
    """The fileops capability's start-up hook: a failure is logged, the server starts anyway."""
    try:
        recover_moves(engine)
    except Exception:
        log.exception("settling interrupted moves failed; re-index the folders they touched")


def _settle(engine: Engine, job_id: int, intent: dict[str, Any]) -> str:
    src, dst, made = intent["from"], intent["to"], list(intent.get("made") or [])
    at_src, at_dst = os.path.lexists(src), os.path.lexists(dst)
    what = f"{intent.get('mode', 'move')} {src} -> {dst}"
    if at_dst and at_src and intent.get("copying"):
        failures = diskops.rmtree(src) if os.path.isdir(src) and not os.path.islink(src) else _unlink(src)
        if failures:
            message = (f"interrupted {what}: the copy is in place but the source could not be removed "
                       f"({'; '.join(failures[:3])}); delete what is left of it with delete-files")
        else:
            message = f"interrupted {what}: the copy was in place; the source is removed and the store follows"
        sync_move(engine, src=src, dst=dst, created=made, settle=lambda conn: record_outcome(conn, job_id, message))
        return message
    if at_dst and not at_src:
        message = f"interrupted {what}: the disk had moved; the store follows"
        sync_move(engine, src=src, dst=dst, created=made, settle=lambda conn: record_outcome(conn, job_id, message))
        return message
    if at_src and not at_dst:
        for partial in glob.glob(posixpath.join(glob.escape(posixpath.dirname(dst)),
                                                f".{glob.escape(posixpath.basename(dst))}.assay-partial-*")):
            diskops.remove(partial)
        for folder in reversed(made):
            try:
                os.rmdir(folder)
            except OSError:
                break  # not empty (or gone): what is in it is not ours
        message = f"interrupted {what}: the disk had not changed; nothing was moved"
    else:
        message = (f"interrupted {what}: the disk changed since (source {'there' if at_src else 'gone'}, target "
                   f"{'there' if at_dst else 'gone'}); left as found: index the folders to bring the store in step")
    with engine.begin() as conn:
        record_outcome(conn, job_id, message)
    return message


def _unlink(path: str) -> list[str]:
    try:
        os.unlink(path)
    except OSError as exc:
        return [f"{path}: {diskops.reason(exc)}"]
    return []
