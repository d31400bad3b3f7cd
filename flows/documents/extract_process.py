"""The process side of the extraction pool (flows/documents/worker.py): what a spawned worker runs. A module of its
own so that a worker imports only the extractors and their model, not the pool with its settings (pydantic, the
settings model: ~200 modules a worker never uses); PyMuPDF and python-docx stay lazy in ``extract``.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from multiprocessing.connection import Connection
from typing import Callable

from flows.documents.extract import extract_file
from flows.documents.formats import format_of
from flows.documents.model import FILTER_FAILED, ExtractOptions, Extracted

log = logging.getLogger(__name__)

ExtractFn = Callable[[str, ExtractOptions], Extracted]


def failed(path: str, reason: str) -> Extracted:
    return Extracted(path=path, format=format_of(os.path.basename(path)) or "unknown", error_code=FILTER_FAILED,
                     error=reason)


def call_extractor(fn: ExtractFn, path: str, options: ExtractOptions) -> Extracted:
    """``fn`` on one file, turned into an Extracted whatever happens (``extract_file`` never raises, a test's
    function might)."""
    try:
        result = fn(path, options)
    except Exception as exc:
        log.warning("extracting %s raised", path, exc_info=True)
        return failed(path, f"extraction failed: {type(exc).__name__}: {exc}")
    if not isinstance(result, Extracted):
        return failed(path, f"the extractor returned {type(result).__name__}, not an Extracted")
    return result


def timed_call(started: list[float | None], fn: ExtractFn, path: str, options: ExtractOptions) -> Extracted:
    """``call_extractor`` in a thread, noting when it starts (thread mode's deadlines count from there)."""
    started[0] = time.monotonic()
    return call_extractor(fn, path, options)


def worker_main(conn: Connection) -> None:
    """A worker process: receive ``(task id, path, options, fn)``, report ``("start", id, t)`` then ``("done", id,
    Extracted)``; stop on None or when the parent is gone. ``fn`` travels by reference (a module-level function's
    name), None meaning ``extract_file``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when workers stop
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        task_id, path, options, fn = message
        try:
            conn.send(("start", task_id, time.monotonic()))
            result = call_extractor(fn or extract_file, path, options)
            try:
                conn.send(("done", task_id, result))
            except Exception as exc:  # not picklable: a bug in fn, reported for this file
                conn.send(("done", task_id, failed(path, f"the result could not be sent back: {exc}")))
        except (BrokenPipeError, EOFError, OSError):
            return
