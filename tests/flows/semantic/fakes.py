"""A stand-in for the embedding model in unit tests: hashed bag-of-words vectors.

Each lower-cased word (letters and digits) adds 1 to one of ``dim`` dimensions (a stable hash of the word); the
vector is L2-normalised. So texts sharing words are similar, texts sharing none have similarity 0, and the same
text always gives the same vector: enough to check ranking, filters and incremental updates without the real
model's seconds of loading. End-to-end tests use the real model.
"""

from __future__ import annotations

import re
import threading
import zlib
from typing import Sequence

import numpy as np

WORD = re.compile(r"[a-z0-9]+")


class FakeEncoder:
    def __init__(self, model: str = "fake-bow", backend: str = "torch", dim: int = 64) -> None:
        self.model, self.backend, self.dim = model, backend, dim
        self.calls = 0  # encode calls
        self.encoded: list[str] = []  # every text encoded, in order
        self._lock = threading.Lock()

    def _vector(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, dtype=np.float32)
        for word in WORD.findall(text.lower()):
            v[zlib.crc32(word.encode()) % self.dim] += 1.0
        norm = float(np.linalg.norm(v))
        return v / norm if norm else v

    def encode(self, texts: Sequence[str], *, batch_size: int | None = None) -> np.ndarray:
        with self._lock:
            self.calls += 1
            self.encoded.extend(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._vector(t) for t in texts])

    def encode_query(self, text: str) -> np.ndarray:
        return self._vector(text)
