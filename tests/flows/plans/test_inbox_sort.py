"""An inbox that sorts itself (issue 26): a continuous plan with move outcomes over a watched folder, with a real
watcher and real files. Each settled file is moved once, to a sibling folder by type and year or to a subfolder of
the watched folder itself; a file the plan moved there is not moved again (no loops); partial downloads are never
moved, and once renamed to their final name are moved once; pausing the plan stops its watcher.

One plan and one watcher per store (SQLite; PostgreSQL unless ``-m "not postgres"``); each test drops files of its
own names. The loop rule's template gives a moved file a new place every time (``from-{parent}``), so only the
rule's memory of its work (work keys without the path) stops a loop; the folder it lands in exists beforehand, so the
watcher sees the file land there. Every other file matches a rule, partial downloads' names included: only their
being left alone keeps them where they are.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from dsl.model import Plan
from flows.core.roots import Roots
from flows.plans.service import PlanService
from flows.plans.watch import PlanWatchers
from store import file_journal
from tests.conftest import BACKENDS, backend_engine, wait_for
from tests.flows.index.checks import assert_store_consistent

NAME = "inbox-sort"
DEBOUNCE_MS = 100
YEAR_2022 = time.mktime((2022, 3, 4, 12, 0, 0, 0, 0, -1))
YEAR_2023 = time.mktime((2023, 7, 14, 12, 0, 0, 0, 0, -1))


def sort_plan(inbox: Path) -> Plan:
    """PDFs go to a folder inside the watched inbox named for the folder they came from; every other file (a
    partial download's name too, were it not left alone) to a sibling folder by media type and year, a taken name
    giving ``name (2).ext``."""
    return Plan.from_object({"name": NAME, "mode": "continuous", "sources": [
        {"name": "inbox", "type": "filesystem.watch", "config": {"path": str(inbox), "debounce_ms": DEBOUNCE_MS}}],
        "rules": [
            {"name": "file-pdfs", "when": "extension = .pdf",
             "outcomes": [{"type": "move", "to": "inbox/filed/from-{parent}/"}]},
            {"name": "by-type-and-year", "when": "extension != .pdf",
             "outcomes": [{"type": "move", "to": "sorted/{media_type|other}/{mtime:%Y}/",
                           "conflict": "rename_new"}]}]})


class Inbox:
    """The tree (``root``: the only root; ``inbox``: the watched folder; ``staging``: outside the roots, where
    files are written before they are renamed into the inbox, as a download finishes) and the running service."""

    def __init__(self, base: Path, engine, service: PlanService) -> None:
        self.root = base / "home"
        self.inbox = self.root / "inbox"
        self.filed = self.inbox / "filed" / "from-inbox"
        self.sorted = self.root / "sorted"
        self.staging = base / "staging"
        self.engine = engine
        self.service = service

    def drop(self, name: str, data: bytes, mtime: float = YEAR_2023) -> Path:
        """A finished file appears in the inbox at once (renamed in from outside the roots)."""
        staged = self.staging / name
        staged.write_bytes(data)
        os.utime(staged, (mtime, mtime))
        os.rename(staged, self.inbox / name)
        return self.inbox / name

    def moves(self, path: Path) -> list[tuple[str, str, str, str]]:
        """The journal's operations into or out of ``path``, oldest first: (op, from, to, state)."""
        rows = file_journal.history(self.engine, path=str(path))
        return [(r["op"], r["src"], r["dst"], r["state"]) for r in reversed(rows)]

    def wait_moved(self, src: Path, dst: Path) -> None:
        wait_for(lambda: dst.is_file() and self.moves(dst) == [("move", str(src), str(dst), "done")],
                 what=f"{src.name} moved to {dst}")

    def settle(self, marker: str) -> None:
        """Let the watcher act on everything that happened so far: a file dropped now is moved only after the
        events before it were handled (one watcher, events in order); then two debounce periods more."""
        src = self.drop(marker, marker.encode())
        self.wait_moved(src, self.sorted / "text" / "2023" / marker)
        time.sleep(2 * DEBOUNCE_MS / 1000)

    def watcher_threads(self) -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name.startswith(f"assay-watch {NAME}/") and t.is_alive()]


@pytest.fixture(scope="module", params=BACKENDS)
def box(request, tmp_path_factory):
    base = tmp_path_factory.mktemp("inbox-sort")
    root = base / "home"
    (root / "inbox" / "filed" / "from-inbox").mkdir(parents=True)
    (base / "staging").mkdir()
    (root / "inbox" / "early.pdf.part").write_bytes(b"%PDF- half of it")  # there before: the catch-up indexes it
    (root / "inbox" / "early.crdownload").write_bytes(b"half of a download")
    with backend_engine(request, tmp_path_factory, "inbox_sort") as engine:
        service = PlanService(engine, Roots.of([str(root)]), use_prefect=False)
        service.watching = PlanWatchers(service)
        try:
            plan = sort_plan(root / "inbox")
            service.save(plan, create=True)
            row = service.execute(plan, wait=True)
            assert row["status"] in ("success", "partial"), row["error_message"]
            assert service.watching.is_watching(NAME)
            yield Inbox(base, engine, service)
        finally:
            service.shutdown()


def test_each_settled_file_moves_once_to_a_sibling_folder_by_type_and_year(box):
    note = box.drop("note.txt", b"first note")
    photo = box.drop("photo.jpg", b"\xff\xd8 not much of a photo", mtime=YEAR_2022)
    odd = box.drop("data.xyz", b"of no known type")
    box.wait_moved(note, box.sorted / "text" / "2023" / "note.txt")
    box.wait_moved(photo, box.sorted / "image" / "2022" / "photo.jpg")
    box.wait_moved(odd, box.sorted / "other" / "2023" / "data.xyz")

    again = box.drop("note.txt", b"a second note of the same name")  # the name is taken there: rename_new
    box.wait_moved(again, box.sorted / "text" / "2023" / "note (2).txt")
    box.settle("after-siblings.txt")

    assert (box.sorted / "text" / "2023" / "note.txt").read_bytes() == b"first note"
    assert (box.sorted / "text" / "2023" / "note (2).txt").read_bytes() == b"a second note of the same name"
    for dst in ("text/2023/note.txt", "text/2023/note (2).txt", "image/2022/photo.jpg", "other/2023/data.xyz"):
        assert [op for op, *_ in box.moves(box.sorted / dst)] == ["move"], dst  # once, and never out again
    assert not [p.name for p in box.inbox.iterdir() if p.suffix in (".txt", ".jpg", ".xyz")]


def test_a_file_moved_into_the_watched_folder_is_not_moved_again(box):
    report = box.drop("report.pdf", b"%PDF- a report")
    landed = box.filed / "report.pdf"
    box.wait_moved(report, landed)
    box.settle("after-report.txt")  # the watcher saw it land in the inbox's subfolder, and left it there

    assert landed.read_bytes() == b"%PDF- a report"
    assert box.moves(landed) == [("move", str(report), str(landed), "done")]
    assert not (box.filed.parent / "from-from-inbox").exists()  # where a second move would have put it


def test_partial_downloads_are_never_moved_and_move_once_when_renamed(box):
    part = box.inbox / "x.pdf.part"
    part.write_bytes(b"%PDF- the first half")  # written in place, as a browser does
    crdownload = box.inbox / "y.pdf.crdownload"
    crdownload.write_bytes(b"%PDF- a chromium download")
    tmp = box.inbox / "z.pdf.tmp"
    tmp.write_bytes(b"%PDF- an editor's temporary file")
    box.settle("after-partials.txt")

    for unfinished in (part, crdownload, tmp, box.inbox / "early.pdf.part", box.inbox / "early.crdownload"):
        assert unfinished.is_file(), unfinished
        assert box.moves(unfinished) == [], unfinished

    with part.open("ab") as f:
        f.write(b" and the rest")
    part.rename(box.inbox / "x.pdf")  # finished: now it is the inbox's
    (box.inbox / "early.pdf.part").rename(box.inbox / "early.pdf")  # one the catch-up indexed: its entry moves
    box.wait_moved(box.inbox / "x.pdf", box.filed / "x.pdf")
    box.wait_moved(box.inbox / "early.pdf", box.filed / "early.pdf")
    box.settle("after-renames.txt")

    assert (box.filed / "x.pdf").read_bytes() == b"%PDF- the first half and the rest"
    for name in ("x.pdf", "early.pdf"):
        assert box.moves(box.filed / name) == [("move", str(box.inbox / name), str(box.filed / name), "done")]
    assert box.moves(crdownload) == [] and box.moves(tmp) == [] and crdownload.is_file() and tmp.is_file()


def test_pausing_the_plan_stops_its_watcher_and_resuming_moves_only_what_came_meanwhile(box):
    plan = box.service.load(NAME)
    assert box.watcher_threads()
    box.service.save(plan.model_copy(update={"status": "paused"}), create=False)
    assert not box.service.watching.is_watching(NAME) and box.watcher_threads() == []
    assert_store_consistent(box.engine, str(box.inbox))  # nothing watches now: the inbox's entries are whole

    before = {str(p): box.moves(p) for p in [*box.sorted.rglob("*.*"), *box.filed.glob("*")]}
    paused = box.drop("while-paused.txt", b"dropped while nobody watched")
    time.sleep(2 * DEBOUNCE_MS / 1000 + 0.5)  # time enough for a watcher that was still running to act
    assert paused.is_file() and box.moves(paused) == []

    box.service.save(plan, create=False)  # active again: the catch-up runs the rules over the whole inbox
    assert box.service.watching.is_watching(NAME)
    box.wait_moved(paused, box.sorted / "text" / "2023" / "while-paused.txt")
    box.settle("after-resume.txt")
    assert {p: box.moves(Path(p)) for p in before} == before  # what was moved before stays where it went
