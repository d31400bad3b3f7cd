"""Reading the change log with its holes (store.textindex.changes): numbers skipped after the last change applied are
held open until their change appears or HOLE_SECONDS pass, a rebuild takes the numbers missing below its start as
holes, and a jump too large to be open transactions is not waited for. (How the index applies a late change, on
PostgreSQL where writers commit out of order: test_index.py.)"""

from __future__ import annotations

from sqlalchemy import text

from store.textindex import changes
from store.textindex.changes import HOLE_SECONDS, MAX_HOLES, catch_up, holes_below


def log(engine, *numbers: int) -> None:
    """Change rows under these numbers (entry id = the number), as writers that drew them and committed."""
    with engine.begin() as conn:
        for seq in numbers:
            conn.execute(text("INSERT INTO document_changes (seq, entry_id) VALUES (:s, :s)"), {"s": seq})


def test_skipped_numbers_are_holes_until_their_change_appears(engine):
    log(engine, 1, 2, 5)
    first = catch_up(engine, 0, {}, now=100.0)
    assert (first.changes, first.late, first.applied) == ([(1, 1), (2, 2), (5, 5)], [], 5)
    assert first.holes == {3: 100.0, 4: 100.0} and first.moved
    log(engine, 4, 6)
    second = catch_up(engine, first.applied, first.holes, now=101.0)
    assert (second.changes, second.late, second.applied) == ([(6, 6)], [(4, 4)], 6)
    assert second.holes == {3: 100.0}
    idle = catch_up(engine, second.applied, second.holes, now=102.0)
    assert not idle.moved and idle.holes == {3: 100.0}


def test_a_hole_older_than_the_limit_is_given_up(engine):
    log(engine, 1, 3)
    caught = catch_up(engine, 0, {}, now=0.0)
    assert caught.holes == {2: 0.0}
    later = catch_up(engine, caught.applied, caught.holes, now=HOLE_SECONDS + 1)
    assert later.holes == {} and later.moved and later.changes == []  # written down once, then forgotten
    log(engine, 2)  # a change under it now is not read: older than any open transaction
    assert catch_up(engine, later.applied, later.holes, now=HOLE_SECONDS + 2).late == []


def test_a_rebuild_takes_the_numbers_missing_below_its_start_as_holes(engine):
    log(engine, 1, 2, 4, 7)
    assert holes_below(engine, 7, now=5.0) == {3: 5.0, 5: 5.0, 6: 5.0}


def test_a_jump_too_large_for_open_transactions_opens_no_holes(engine):
    log(engine, 1, MAX_HOLES + 10)
    caught = catch_up(engine, 0, {}, now=0.0)
    assert caught.applied == MAX_HOLES + 10 and caught.holes == {}
    assert changes.as_manifest({3: 1.5}) == [[3, 1.5]] and changes.holes_of({"holes": [[3, 1.5]]}) == {3: 1.5}
