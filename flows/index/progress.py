"""How far an index walk is: a percent that does not claim work the walk has not seen.

Nobody knows how big a tree is before it has been walked, so the percent is an estimate, kept to what reads true:
it never goes down, it stays below 100 until the walk has finished (100 then, and only then), and a walk that stops
(cancelled, killed) keeps the percent it had, which is what it had covered (the job row keeps the last one written).
(Counting finished entries over entries found so far, as it once did, read 99% a sixth of the way through a first
index: a walk lists a folder's files long before it has seen the subfolders it pushed.) What it is measured by
depends on what the store knows:

- **Re-index of a tree the store holds** (its root's row was left by a walk that finished, not marked
  ``incomplete`` / ``not scanned`` by a cancelled one): entries finished over the entries the store held under the
  root before the walk, plus the new files the walk has found on its way (or the entries it has found, if more). On
  an unchanged tree that is the true fraction, entry for entry.
- **Anything else**: a first index, a re-index after a cancelled walk, and a re-index that finds a folder the store
  did not hold (a subtree of unknown size) or held unfinished (from then on, with the percent it had kept until the
  walk catches up): the share of the tree whose folders are finished, sibling folders counted alike. The root is the
  whole; a folder's share is split evenly among its subfolders once it is listed; a folder without subfolders adds
  its share once listed (its files are then done), and so does one that cannot be read. A root of six folders reads
  16.7% when one of them is finished, however many files the walk has listed: the percent grows only as the
  known-but-unvisited folders are walked, and never runs ahead of the share of the top-level folders finished plus
  the finished part of the one the walk is in. A tree whose folders differ much in size moves unevenly (quickly
  through small folders, slowly through a big one): without a count, no estimate can know better.

``IndexProgress`` carries the counters and the percent to whoever watches (the job row, MCP progress, a progress
bar); ``ProgressEstimate`` is the walk's bookkeeping.
"""

from __future__ import annotations

from dataclasses import dataclass

UNFINISHED = ("incomplete:", "not scanned:")  # a stored folder's scan_error when a cancelled walk left it unfinished


@dataclass
class IndexProgress:
    """Counters of a walk, and its percent (see the module docstring): below 100 until the walk has finished,
    never decreasing."""

    files: int = 0
    directories: int = 0
    total_size: int = 0
    written: int = 0
    removed: int = 0
    current_path: str | None = None
    percent: float = 0.0


def unfinished(scan_error: str | None) -> bool:
    """Whether a stored folder was left unfinished by a cancelled walk (so what is stored under it is partial)."""
    return bool(scan_error and scan_error.startswith(UNFINISHED))


class ProgressEstimate:
    """The bookkeeping of one walk's percent: the stored count it may trust, and the finished share of the tree."""

    def __init__(self, *, expected: int, root_state: tuple | None) -> None:
        self.expected = expected  # entries stored at or under the root before the walk
        # the stored count is the tree's size only if an index of the root was finished (no cancelled walk's mark)
        self.trusted = expected > 0 and root_state is not None and not unfinished(root_state[-1])
        self.covered = 0.0  # share of the tree whose folders are finished (the first-index measure)
        self.added = 0  # files (and links) the walk found that the store did not hold: the tree has them too

    def distrust(self) -> None:
        """A folder the store did not hold, or held unfinished: the stored count undercounts the tree by a subtree
        of unknown size."""
        self.trusted = False

    def split(self, share: float, subfolders: int) -> float:
        """A folder of ``share`` listed, with ``subfolders`` to walk: the share of each (its own, when none is
        left to walk, counts as finished now)."""
        if subfolders:
            return share / subfolders
        self.covered += share
        return 0.0

    def finished(self, share: float) -> None:
        """A folder that will not be walked (unreadable, vanished) counts as finished."""
        self.covered += share

    def percent(self, *, done: int, listed: int) -> float:
        """The percent for ``done`` entries finished of ``listed`` found so far (capped at 99: the walk is not
        over)."""
        if self.trusted:
            fraction = done / max(self.expected + self.added, listed)
        else:
            fraction = self.covered
        return min(99.0, 100.0 * fraction)
