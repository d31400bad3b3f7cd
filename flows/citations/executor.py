"""The ``map`` outcome: a citation map built locally for each matched file (``strategy``: auto | outline | headings |
chapters | scenes | windows; ``window``: pages, lines or seconds of the windows strategy).

The flow of one batch (``map_rows``):

1. Applicability. Regular files that can be cited (``model.modality_of``: paged documents, text, video, audio,
   images); the rest count as ``unchanged``. Each gets its resource id (``flows.addresses.ids.reserve_ids``, one
   call per batch).
2. Agent maps are never overwritten by a plan: such a file counts as ``unchanged`` (the log says why).
3. Work records. A file whose built map was made with the same strategy and window from the same state (size,
   mtime) is ``skipped`` with no work; a file touched without a change of its bytes (same content hash) too, its
   new state recorded.
4. The rest are built one by one with no transaction open (``builders.build``: PyMuPDF, ffmpeg), each stored at
   once in one short transaction (``store.citations.save_map``). A strategy that does not apply to a file (an
   outline of a video) is ``unchanged``, a file that cannot be read (corrupt, truncated) an outcome error, so the
   execution ends ``partial`` and plan-get names it; the same bytes fail the same way, so it is ``skipped`` on later
   runs until the file changes. Entries deleted meanwhile are dropped. Each mapped file gets an
   outcome record under the execution.
"""

from __future__ import annotations

import hashlib
import logging
import os
from typing import Any, Callable, ClassVar, Sequence

from sqlalchemy.engine import Engine

from dsl.outcomes import OutcomeBase
from flows.addresses.ids import reserve_ids
from flows.citations.maps import BUILT, build_source, hash_of, save_built, window_of
from flows.citations.model import modality_of
from flows.core.outcomes import BatchResult, Cancelled, OutsideTransactionExecutor, RunContext
from store import citations as store
from store import plans as store_plans
from store.entries import existing_ids
from store.errors import CitationError

log = logging.getLogger(__name__)

OUTCOME_TYPE = "map"


def _record_key(entry_id: int, strategy: str, window: float | None, size: int, mtime: float) -> str:
    """The outcome record's work key of mapping one file in one state with one strategy and window."""
    return "map:" + hashlib.sha256(f"{entry_id}|{strategy}|{window}|{size}|{mtime}".encode()).hexdigest()[:40]


def _same_work(res: dict[str, Any], strategy: str, window: float | None) -> bool:
    """Whether ``res`` holds a current built map made with ``strategy`` and ``window``."""
    return (res["origin"] in BUILT and not res["stale"] and (res["strategy"] or "auto") == strategy
            and window_of(res["metadata_json"]) == window)


def map_rows(engine: Engine, rows: Sequence[Any], *, strategy: str = "auto", window: float | None = None,
             rule: str = OUTCOME_TYPE, execution_id: int | None = None,
             should_cancel: Callable[[], bool] = lambda: False,
             on_item: Callable[[str], None] | None = None) -> BatchResult:
    """Build the maps of ``rows`` (entry rows) whose map is not current: see the module docstring. Never raises for
    a bad file; a cancel request stops it between files (a build under way is stopped too)."""
    result = BatchResult()
    wanted: list[tuple[Any, str]] = []
    for row in rows:
        modality = modality_of(row["name"], row["media_type"]) if row["kind"] == "file" else None
        if modality is None:
            result.unchanged += 1
            continue
        wanted.append((row, modality))
    if not wanted:
        return result
    reserve_ids(engine, [(row["id"], row["path"], modality) for row, modality in wanted])
    with engine.connect() as conn:
        resources = store.resources_by_entries(conn, [row["id"] for row, _ in wanted])
        # the same bytes fail the same way: a file that could not be mapped in this state is not tried again
        failed_before = store_plans.known_work_keys(
            conn, [_record_key(row["id"], strategy, window, int(row["size"]), float(row["mtime"]))
                   for row, _ in wanted], statuses=("error",))
    records: list[dict[str, Any]] = []
    for row, modality in wanted:
        if should_cancel():
            break
        entry_id, path = row["id"], row["path"]
        res = resources.get(entry_id)
        if res is None:  # deleted meanwhile
            continue
        if res["origin"] == "agent":
            log.info("map: %s keeps its agent-supplied map (a plan never replaces one; map-build does)", path)
            result.unchanged += 1
            continue
        size, mtime = int(row["size"]), float(row["mtime"])
        if _same_work(res, strategy, window) and res["source_size"] == size and res["source_mtime"] == mtime:
            result.skipped += 1
            continue
        if _record_key(entry_id, strategy, window, size, mtime) in failed_before:
            result.skipped += 1
            continue
        status, detail = "applied", None
        try:
            st = os.stat(path)
            size, mtime = st.st_size, st.st_mtime
            digest = hash_of(path)
            if _same_work(res, strategy, window) and digest == res["source_hash"]:
                with engine.begin() as conn:  # touched, same bytes: the map stands
                    store.update_source(conn, res["id"], size=size, mtime=mtime)
                result.skipped += 1
                continue
            built = build_source(engine, entry_id, path, modality, size, mtime, strategy=strategy, window=window,
                                 should_cancel=should_cancel)
            save_built(engine, res["id"], built, strategy=strategy, window=window, size=size, mtime=mtime,
                       source_hash=digest, entry_id=entry_id)
            result.applied += 1
        except Cancelled:
            break
        except OSError as exc:
            status, detail = "error", f"EXTRACTION_FAILED: {exc.strerror or exc}"
        except CitationError as exc:
            if exc.code == "UNSUPPORTED_FORMAT":
                log.info("map: %s not mapped (%s)", path, exc.message)
                result.unchanged += 1
                continue
            status, detail = "error", f"{exc.code}: {exc.message}"
        if status == "error" and detail is not None:  # an error always has its detail
            log.info("map: %s failed (%s)", path, detail)
            result.errors.append((entry_id, detail))
            result.failed_ids.add(entry_id)
        records.append({"execution_id": execution_id, "entry_id": entry_id, "rule": rule,
                        "outcome_type": OUTCOME_TYPE, "work_key": _record_key(entry_id, strategy, window, size, mtime),
                        "status": status, "detail": detail})
        if on_item is not None:
            on_item(path)
    if records:
        with engine.begin() as conn:
            alive = existing_ids(conn, [r["entry_id"] for r in records])  # deleted meanwhile: no record
            store_plans.record_outcomes(conn, [r for r in records if r["entry_id"] in alive])
    return result


class MapExecutor(OutsideTransactionExecutor):
    """Outcome ``map`` (strategy, window). Keeps its own work records on the maps themselves (records_work False):
    a file mapped by any plan or tool with the same strategy and window is not mapped again while it is unchanged."""

    type: ClassVar[str] = OUTCOME_TYPE
    records_work: ClassVar[bool] = False
    batch_size: ClassVar[int | None] = 16  # scene detection takes seconds per video: progress and cancel stay close

    def work(self, engine: Engine, outcome: OutcomeBase, rows: Sequence[Any], ctx: RunContext) -> BatchResult:
        return map_rows(engine, rows, strategy=getattr(outcome, "strategy", "auto") or "auto",
                        window=getattr(outcome, "window", None), rule=ctx.rule or OUTCOME_TYPE,
                        execution_id=ctx.execution_id, should_cancel=ctx.should_cancel, on_item=ctx.on_item)

