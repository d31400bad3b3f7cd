"""Reading the store's change log (``document_changes``) without missing a change that commits late.

A change's number is drawn when its row is inserted; the row is seen once its transaction commits. On SQLite one
writer commits at a time, so changes appear in the order of their numbers. On PostgreSQL two writers commit in either
order: the index can see change 11 while change 10 is still to commit, and having applied 11 it would never read
below it again, so a document that transaction deleted or rewrote would stay in the index as it was. A number skipped
between the last change applied and the newest one read is therefore a hole, looked for again at every catch-up
until its change appears (applied then: the entry read again) or ``HOLE_SECONDS`` have passed (a rolled-back insert
leaves its number unused for good). A rebuild, which starts from the newest number, takes the numbers missing just
below it as holes too. The manifest keeps the holes (``holes``: [number, since when (epoch seconds)]).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Engine

from store.textindex.source import C, changes_after

log = logging.getLogger(__name__)

HOLE_SECONDS = 600.0  # a transaction writing documents commits within this, or it rolled back
MAX_HOLES = 10_000  # more numbers missing than this at once: a sequence moved on (not open transactions)
REBUILD_WINDOW = 10_000  # a rebuild looks for holes among this many numbers below the newest


@dataclass(frozen=True)
class Caught:
    """What one catch-up read: the changes after the last applied, in order; the changes of holes that appeared
    (late commits); the holes still open; and the new last change applied."""

    changes: list[tuple[int, int]]
    late: list[tuple[int, int]]
    holes: dict[int, float]
    applied: int
    holes_moved: bool  # a hole opened, filled or given up

    @property
    def moved(self) -> bool:
        """Whether there is anything to apply or write down."""
        return bool(self.changes or self.late or self.holes_moved)


def holes_of(manifest: dict[str, Any]) -> dict[int, float]:
    return {int(seq): float(since) for seq, since in manifest.get("holes", ())}


def as_manifest(holes: dict[int, float]) -> list[list[float]]:
    return [[seq, since] for seq, since in sorted(holes.items())]


def changes_at(engine: Engine, seqs: list[int]) -> list[tuple[int, int]]:
    """(change number, entry id) of those of ``seqs`` that are in the log now, oldest first."""
    found: list[tuple[int, int]] = []
    with engine.connect() as conn:
        for i in range(0, len(seqs), 900):
            found.extend((int(s), int(e)) for s, e in conn.execute(
                select(C.c.seq, C.c.entry_id).where(C.c.seq.in_(seqs[i:i + 900]))))
    return sorted(found)


def _skipped(after: int, seen: list[int]) -> list[int]:
    """The numbers between ``after`` and the last of ``seen`` (ascending) that ``seen`` lacks."""
    missing: list[int] = []
    previous = after
    for seq in seen:
        missing.extend(range(previous + 1, seq))
        if len(missing) > MAX_HOLES:
            log.warning("text index: %d change numbers skipped after %d; not waiting for them", len(missing), after)
            return []
        previous = seq
    return missing


def catch_up(engine: Engine, applied: int, holes: dict[int, float], now: float) -> Caught:
    """Read the changes after ``applied`` and those of the open ``holes``; the holes left (new ones opened at
    ``now``, those older than HOLE_SECONDS closed)."""
    left = {seq: since for seq, since in holes.items() if now - since <= HOLE_SECONDS}
    late = changes_at(engine, sorted(left)) if left else []
    changes = changes_after(engine, applied)
    for seq, _ in late:
        del left[seq]
    left.update((seq, now) for seq in _skipped(applied, [s for s, _ in changes]))
    return Caught(changes, late, left, changes[-1][0] if changes else applied, left != holes)


def holes_below(engine: Engine, newest: int, now: float) -> dict[int, float]:
    """The numbers missing among the REBUILD_WINDOW below ``newest`` (a rebuild's start), as holes opened ``now``."""
    low = max(0, newest - REBUILD_WINDOW)
    with engine.connect() as conn:
        seen = [int(s) for s in conn.execute(select(C.c.seq).where(C.c.seq > low, C.c.seq <= newest)
                                             .order_by(C.c.seq)).scalars()]
    return {seq: now for seq in _skipped(low, seen)}
