"""The index walk's percent reads true (flows/index/progress.py): a job stopped a sixth of the way through a tree
shows about a sixth, not 99; the percent never goes down; 100 comes only with the end of the walk; a re-index
measures against what the store held, unless the store held less than the tree (a cancelled walk, new folders)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from flows.index.flow import run_index_job
from flows.index.indexer import Cancelled, IndexProgress, index_tree
from store import entries, jobs

TOP, MIDDLE, FILES = 6, 5, 100  # six top-level folders of five folders of 100 files: 3,000 files, 37 folders
ALL_FILES = TOP * MIDDLE * FILES
ENTRIES = 1 + TOP + TOP * MIDDLE + ALL_FILES  # the root included


def make_tree(root: Path, tops: range = range(TOP)) -> Path:
    for t in tops:
        for m in range(MIDDLE):
            folder = root / f"top{t}" / f"mid{m}"
            folder.mkdir(parents=True)
            for f in range(FILES):
                (folder / f"{f:03}.txt").write_bytes(b"x" * (f % 7))
    return root


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return make_tree(tmp_path / "tree")


class Watch:
    """The progress reports of one walk; asks it to stop once it has listed ``stop_at`` files."""

    def __init__(self, stop_at: int | None = None) -> None:
        self.stop_at = stop_at
        self.reports: list[IndexProgress] = []
        self.event = threading.Event()

    def __call__(self, p: IndexProgress) -> None:
        self.reports.append(IndexProgress(**vars(p)))
        if self.stop_at is not None and p.files >= self.stop_at:
            self.event.set()

    @property
    def percents(self) -> list[float]:
        return [r.percent for r in self.reports]

    def walk(self, engine, root: Path, scan_id: int, batch_size: int = 50):
        """index_tree with these reports; the result, or the Cancelled's result."""
        try:
            return index_tree(engine, str(root), scan_id=scan_id, batch_size=batch_size, progress=self,
                              should_cancel=self.event.is_set)
        except Cancelled as stop:
            return stop.result


def assert_reads_true(percents: list[float], *, finished: bool) -> None:
    assert percents and percents == sorted(percents), "the percent went down"
    if finished:
        assert percents[-1] == 100.0 and all(p <= 99.0 for p in percents[:-1])
    else:
        assert all(p <= 99.0 for p in percents)


def files_stored(engine, root: Path) -> int:
    return sum(r["kind"] == "file" for r in entries.list_within(engine, roots=[str(root)], limit=10 ** 6)[0])


def test_a_first_index_cancelled_after_a_sixth_of_the_tree_shows_about_a_sixth(engine, tree):
    job_id = jobs.create_job(engine, root=str(tree))
    watch = Watch(stop_at=ALL_FILES // 6)
    job = run_index_job(engine, job_id=job_id, root=str(tree), cancel_event=watch.event, on_progress=watch,
                        batch_size=50)
    assert job["status"] == "cancelled"
    covered = 100 * files_stored(engine, tree) / ALL_FILES  # what the walk truly covered: about a sixth
    assert 15 <= covered <= 22
    # the job keeps the percent it had truly covered (within a folder of 100 files: 3.3%), not 99
    assert covered - 5 <= job["progress"] <= covered, (job["progress"], covered)
    assert_reads_true(watch.percents, finished=False)
    assert job["progress"] == watch.percents[-1]


def test_the_percent_never_goes_down_and_is_100_only_at_the_end(engine, tree):
    watch = Watch()
    result = watch.walk(engine, tree, scan_id=1, batch_size=20)
    assert result.files == ALL_FILES and result.percent == 100.0
    assert len(watch.percents) > 100
    assert_reads_true(watch.percents, finished=True)
    # as the walk goes, the percent follows what it has covered: never ahead of the files listed by more than a
    # leaf folder's worth (the tree is even; 1/30 of it per leaf folder)
    for report in watch.reports[:-1]:
        assert report.percent <= 100 * report.files / ALL_FILES + 100 / (TOP * MIDDLE) + 0.01, report


def test_a_reindex_of_an_unchanged_tree_counts_against_the_stored_entries(engine, tree):
    Watch().walk(engine, tree, scan_id=1)
    assert entries.count_subtree(engine, root=str(tree)) == ENTRIES
    full = Watch()
    result = full.walk(engine, tree, scan_id=2, batch_size=20)
    assert result.written == 0 and result.percent == 100.0  # nothing changed, nothing written
    assert_reads_true(full.percents, finished=True)
    for report in full.reports[:-1]:  # entry for entry: the files and folders finished over the stored entries
        assert report.percent == pytest.approx(min(99.0, 100 * (report.files + report.directories) / ENTRIES),
                                               abs=1e-6), report
    stopped = Watch(stop_at=ALL_FILES // 6)
    result = stopped.walk(engine, tree, scan_id=3)
    assert result.percent < 100 and abs(result.percent - 100 / 6) < 3, result.percent
    assert_reads_true(stopped.percents, finished=False)


def test_a_reindex_after_a_cancelled_first_index_does_not_trust_the_partial_store(engine, tree):
    Watch(stop_at=ALL_FILES // 6).walk(engine, tree, scan_id=1)  # the store holds a sixth of the tree
    assert files_stored(engine, tree) < ALL_FILES // 4
    again = Watch(stop_at=ALL_FILES // 3)
    result = again.walk(engine, tree, scan_id=2)
    assert result.percent < 100
    assert 100 / 3 - 5 <= result.percent <= 100 / 3 + 3.4, result.percent  # about a third, not 99
    assert_reads_true(again.percents, finished=False)
    done = Watch()
    assert done.walk(engine, tree, scan_id=3).percent == 100.0
    assert_reads_true(done.percents, finished=True)


def test_a_reindex_of_a_tree_that_grew_does_not_run_ahead(engine, tmp_path):
    root = make_tree(tmp_path / "tree", tops=range(1))  # the store holds one top-level folder of six
    Watch().walk(engine, root, scan_id=1)
    make_tree(root, tops=range(1, TOP))
    grown = Watch(stop_at=ALL_FILES // 3)
    result = grown.walk(engine, root, scan_id=2)
    assert result.percent < 100
    covered = 100 * result.files / ALL_FILES
    assert covered - 5 <= result.percent <= covered + 3.4, (result.percent, covered)  # not 99
    assert_reads_true(grown.percents, finished=False)


def test_new_files_in_known_folders_are_counted_in(engine, tree):
    Watch().walk(engine, tree, scan_id=1)
    for t in range(TOP):  # a tenth more files, in folders the store holds
        for m in range(MIDDLE):
            for f in range(FILES // 10):
                (tree / f"top{t}" / f"mid{m}" / f"new{f}.txt").write_text("n")
    watch = Watch()
    result = watch.walk(engine, tree, scan_id=2, batch_size=20)
    assert result.percent == 100.0 and result.files == ALL_FILES * 11 // 10
    assert_reads_true(watch.percents, finished=True)
    total = ENTRIES + ALL_FILES // 10
    for report in watch.reports[:-1]:  # the new files found so far move the end out: no early 99 (they are spread
        # evenly here, so the estimate stays within a few points of the truth; without them it read 99 at 91%)
        assert report.percent <= 100 * (report.files + report.directories) / total + 3, report
