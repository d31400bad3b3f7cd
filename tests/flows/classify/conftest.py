"""Shared by the classify tests: a fake worker at the pool's seam, counting the files it is given."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from flows.classify import executor as cx
from flows.classify.model import ArtifactOut, FileResult, FileTask
from store import cache


class FakeClassifier:
    """Stands in for the worker: a thumbnail made of the file's bytes, width/height metadata, a hash; files named
    bad* fail, .txt files have no thumbnail. Counts the files it was given."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.lock = threading.Lock()
        self.gate: threading.Event | None = None  # when set, each call waits for it (cancel tests)

    def __call__(self, task: FileTask) -> FileResult:
        with self.lock:
            self.calls.append(Path(task.path).name)
        if self.gate is not None:
            self.gate.wait(10)
        name = Path(task.path).name
        res = FileResult(entry_id=task.entry_id, path=task.path)
        if name.startswith("bad"):
            res.errors = {op: "cannot identify image file (truncated JPEG?)" for op in task.operations}
            return res
        data = Path(task.path).read_bytes()
        if "thumbnail" in task.operations:
            if task.extension == ".txt":
                res.not_applicable["thumbnail"] = "a text file has no picture"
            else:
                rel = cache.put(task.cache_root, b"thumb:" + data + str(task.params.max_width).encode())
                res.artifacts.append(ArtifactOut("thumbnail", rel, value={"width": 32, "height": 24}))
        if "timeline" in task.operations:
            res.not_applicable["timeline"] = "not a video"
        if "metadata" in task.operations:
            res.metadata = {"width": 100 + len(data), "height": 50, "format": "JPEG"}
            res.details = {"format": "JPEG"}
            res.hash = "xxh128:" + cache.xxhash.xxh3_128_hexdigest(data)
        res.done = tuple(op for op in task.operations if op not in res.errors)
        return res


@pytest.fixture
def fake(monkeypatch, data_dir):
    classifier = FakeClassifier()
    monkeypatch.setattr(cx.DEFAULT_RUN, "classify", classifier)
    monkeypatch.setattr(cx.DEFAULT_RUN, "pool_mode", "thread")
    monkeypatch.setattr("flows.core.capability._data_dir", data_dir)
    return classifier
