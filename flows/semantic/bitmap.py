"""The vector index's sets of chunk ids (labels in the index, live labels, labels a filter permits) as bitmaps."""

from __future__ import annotations

import numpy as np

GROWTH = 1.5  # a bitmap too small for a label grows to at least this many times its size
MIN_BITS = 1024


class LabelBitmap:
    """A growable bitmap of labels (chunk ids): membership of many ids at once with numpy."""

    def __init__(self) -> None:
        self.bits = np.zeros(0, dtype=bool)

    def _grow(self, top: int) -> None:
        if top >= len(self.bits):
            bigger = np.zeros(max(top + 1, int(len(self.bits) * GROWTH), MIN_BITS), dtype=bool)
            bigger[:len(self.bits)] = self.bits
            self.bits = bigger

    def set(self, ids: np.ndarray, value: bool) -> None:
        if len(ids):
            self._grow(int(ids.max()))
            self.bits[ids] = value

    def has(self, ids: np.ndarray) -> np.ndarray:
        out = np.zeros(len(ids), dtype=bool)
        inside = (ids >= 0) & (ids < len(self.bits))
        out[inside] = self.bits[ids[inside]]
        return out

    def ids(self) -> np.ndarray:
        return np.flatnonzero(self.bits).astype(np.int64)
