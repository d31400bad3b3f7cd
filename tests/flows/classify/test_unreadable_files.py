"""A file that cannot be read when the classifier comes to it (flows/classify/worker.py) is that file's error, under a
code, and the run goes on: unlinked between the index and the read, its folder replaced by a file, replaced by a
dangling symlink, by a directory or by a FIFO with no writer (never opened: it would block). These are what really
happens to a file under a live tree; chmod 000 is no test here, since we run as root and root reads it anyway."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Callable

import pytest

from examples import mediagen as media
from flows.classify import executor as cx
from flows.classify import service as classify_service
from flows.classify.model import FILE_NOT_FOUND, NOT_A_FILE, OPERATIONS, FileTask, Params
from flows.classify.worker import classify_file
from flows.core.runner import JobRunner
from flows.index.service import run_index
from store import jobs as store_jobs


def _unlink(path: Path) -> None:
    path.unlink()


def _folder_now_a_file(path: Path) -> None:
    shutil.rmtree(path.parent)
    path.parent.write_bytes(b"a file where the folder was")


def _dangling_link(path: Path) -> None:
    path.unlink()
    path.symlink_to(path.with_name("nowhere.jpg"))


def _directory(path: Path) -> None:
    path.unlink()
    path.mkdir()


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


CHANGES: list[tuple[str, Callable[[Path], None], str]] = [
    ("unlinked", _unlink, FILE_NOT_FOUND),
    ("its folder replaced by a file", _folder_now_a_file, FILE_NOT_FOUND),
    ("replaced by a dangling symlink", _dangling_link, FILE_NOT_FOUND),
    ("replaced by a directory", _directory, NOT_A_FILE),
    ("replaced by a FIFO with no writer", _fifo, NOT_A_FILE),
]


@pytest.mark.parametrize("what, change, code", CHANGES, ids=[c[0] for c in CHANGES])
def test_a_file_changed_after_the_index_fails_each_operation_under_its_code(tmp_path, what, change, code):
    photo = media.jpeg(tmp_path / "album" / "photo.jpg", (320, 240))
    task = FileTask(entry_id=1, path=str(photo), media_type="image", mime="image/jpeg", extension=".jpg",
                    size=photo.stat().st_size, operations=OPERATIONS, params=Params(timeout=5.0),
                    cache_root=str(tmp_path / "data"))
    change(photo)
    result = classify_file(task)  # a FIFO opened would block here: the test would hang
    assert set(result.errors) == set(OPERATIONS) and result.done == () and result.no_space is None
    assert all(reason.startswith(f"{code}: ") and "index its folder again" in reason
               for reason in result.errors.values()), result.errors


def test_a_classify_job_records_each_unreadable_file_with_its_path_and_code_and_does_the_rest(tmp_path, engine,
                                                                                            monkeypatch):
    monkeypatch.setattr(cx.DEFAULT_RUN, "classify", None)  # the real worker
    monkeypatch.setattr(cx.DEFAULT_RUN, "pool_mode", "thread")
    monkeypatch.setattr("flows.core.capability._data_dir", tmp_path / "data")
    root = tmp_path / "album"
    names = ["good.jpg", "gone.jpg", "link.jpg", "folder.jpg", "pipe.jpg"]
    for i, name in enumerate(names):
        media.jpeg(root / name, (320, 240), seed=i)
    runner = JobRunner(engine, str(engine.url), use_prefect=False)
    try:
        assert run_index(runner, root=str(root))["status"] == "completed"
        _unlink(root / "gone.jpg")
        _dangling_link(root / "link.jpg")
        _directory(root / "folder.jpg")
        _fifo(root / "pipe.jpg")
        job = classify_service.run_classify(runner, path=str(root), operations=("thumbnail", "metadata"))
    finally:
        runner.shutdown()
    assert job["status"] == "completed" and job["error_count"] == 4 and job["files"] == 5
    issues = {Path(i["path"]).name: i["reason"] for i in store_jobs.job_issues(engine, job_id=job["id"])}
    assert set(issues) == {"gone.jpg", "link.jpg", "folder.jpg", "pipe.jpg"}  # good.jpg was done
    for name, code in (("gone.jpg", FILE_NOT_FOUND), ("link.jpg", FILE_NOT_FOUND), ("folder.jpg", NOT_A_FILE),
                       ("pipe.jpg", NOT_A_FILE)):
        assert issues[name].startswith(f"thumbnail: {code}: ") and f"metadata: {code}: " in issues[name]
