"""Fixtures of the documents capability's tests: a stand-in for the extraction pool."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from flows.documents import executor as ex
from flows.documents.model import FILTER_FAILED, Extracted, Page


class FakeExtraction:
    """Stands in for flows.documents.worker.run_extractions: a file's text is one page; a file whose name starts
    with "locked" fails as an encrypted PDF would. Records which paths it was asked for."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, tasks, options, *, should_cancel):
        for entry_id, path in tasks:
            if should_cancel():
                return
            self.asked.append(os.path.basename(path))
            if os.path.basename(path).startswith("locked"):
                yield entry_id, Extracted(path=path, format="pdf", error_code=FILTER_FAILED, error="encrypted PDF")
                continue
            text = Path(path).read_text(errors="replace") if not path.endswith(".png") else "TEXT IN AN IMAGE"
            yield entry_id, Extracted(path=path, format="text", pages=[Page(1, text, ocr=path.endswith(".png"))],
                                      total_pages=1)


@pytest.fixture
def fake(monkeypatch) -> FakeExtraction:
    fake = FakeExtraction()
    monkeypatch.setattr(ex.DEFAULT_RUN, "extract", fake)
    return fake
