"""A segment lives as long as the index or a search holds it: what searches remember about a segment (its tokens
found, the documents in a scope, each line's document) goes with it, so a segment a merge replaced is let go, its
file unmapped and its descriptor closed. (A module-level cache keyed by segments kept every replaced segment alive:
a soak of the server ended with hundreds of replaced segment files open, deleted ones among them.)"""

from __future__ import annotations

import gc
import os
import weakref
from pathlib import Path

from store.textindex import Leaf, Scope, search
from store.textindex.segment import DocIn
from tests.store.textindex.support import snapshot_of, write_segment

DOCS = [DocIn(1, 1, "/lib/a.txt", "text", ["alpha beta", "gamma alpha"]),
        DocIn(2, 1, "/lib/sub/b.txt", "text", ["beta only", "alpha again"])]


def descriptors_of(path: Path) -> int:
    """This process's open file descriptors on ``path``."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}") == str(path)
        except OSError:
            pass
    return count


def test_a_searched_segment_is_released_with_its_file_once_nothing_holds_it(tmp_path):
    seg = write_segment(tmp_path, DOCS)
    path = seg.path
    snap = snapshot_of([seg])
    for scope in (Scope(), Scope(under=("/lib/sub",))):  # every answer a search remembers about the segment
        for sort in ("relevance", "path"):
            result = search(snap, Leaf("alpha"), lambda line: "alpha" in line, scope=scope, sort=sort)
            assert result.total == (3 if scope.under is None else 1)
    assert descriptors_of(path) == 1  # the map's own descriptor
    held = weakref.ref(seg)
    del seg, snap, result
    gc.collect()
    assert held() is None
    assert descriptors_of(path) == 0


def test_a_segment_answers_the_same_from_its_memo(tmp_path):
    seg = write_segment(tmp_path, DOCS)
    snap = snapshot_of([seg])
    first = search(snap, Leaf("alpha"), lambda line: "alpha" in line)
    again = search(snap, Leaf("alpha"), lambda line: "alpha" in line)
    assert [(h.path, h.line) for h in again.hits] == [(h.path, h.line) for h in first.hits]
    assert again.total == first.total == 3
