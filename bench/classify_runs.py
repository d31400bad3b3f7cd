"""The classification benchmark's "ours": the classifier as plan runs over fresh stores (SQLite + artifact cache, the
corpus indexed first), its pool (hashing alone, the one-time warm-up), its worker called in this process, and
rerun-classifier's job function.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from bench.media import Corpus

log = logging.getLogger("bench.classify")


class Stores:
    """Fresh stores (SQLite + artifact cache) under ``scratch``, each with the corpus indexed."""

    def __init__(self, scratch: Path, corpus: Corpus, work: Path, use_prefect: bool) -> None:
        self.scratch = scratch
        self.corpus = corpus
        self.work = work
        self.use_prefect = use_prefect
        self.made = 0

    def fresh(self, label: str):
        """(engine, service, data dir) for a new store holding the indexed corpus and an empty cache."""
        import flows.core.capability
        from flows.index.flow import run_index_job
        from flows.plans.service import PlanService
        from flows.core.roots import Roots
        from store import jobs as store_jobs
        from store.engine import make_engine

        self.made += 1
        data = self.scratch / f"{self.made:02d}-{label}"
        data.mkdir(parents=True)
        flows.core.capability.configure(data)
        engine = make_engine(f"sqlite:///{data / 'assay.db'}")
        roots = [self.corpus.root] + ([self.corpus.long_video.parent] if self.corpus.long_video else [])
        for root in roots:
            run_index_job(engine, job_id=store_jobs.create_job(engine, root=str(root)), root=str(root))
        service = PlanService(engine, Roots.of([str(self.work)]), use_prefect=self.use_prefect)
        return engine, service, data


def classifier_plan(name: str, folder: Path, operation: str, when: str):
    from dsl.model import Plan

    return Plan.from_object({"name": name, "sources": [
        {"name": "corpus", "type": "filesystem.index", "config": {"path": str(folder)}}],
        "rules": [{"name": name, "when": when,
                   "outcomes": [{"type": "classifier", "classifierOperation": operation}]}]})


def count(engine, sql: str, **params) -> int:
    from sqlalchemy import text

    with engine.connect() as conn:
        return int(conn.execute(text(sql), params).scalar_one())


def timeline_timestamps(engine) -> list[float]:
    from sqlalchemy import text

    with engine.connect() as conn:
        values = conn.execute(text("SELECT value_json FROM artifacts WHERE type = 'video-timeline'")).scalars().all()
    stamps = [json.loads(v) for v in values]
    return sorted(float(v["timestamp"]) for v in stamps)


def _hash_task(task):
    """Pool function for the hashing figure: the content hash alone (the metadata operation's hash function)."""
    from flows.media.hashing import hash_file
    from flows.classify.model import FileResult

    started = time.perf_counter()
    return FileResult(entry_id=task.entry_id, path=task.path, hash=hash_file(task.path), done=("metadata",),
                      elapsed=time.perf_counter() - started)


def pool_tasks(paths: list[Path], operations: tuple[str, ...], cache_root: Path) -> list:
    from flows.classify.model import FileTask, Params

    tasks = []
    for i, p in enumerate(paths):
        ext = p.suffix.lower()
        media = "image" if ext == ".jpg" else "video" if ext == ".mp4" else "document"
        mime = {"image": "image/jpeg", "video": "video/mp4", "document": "application/pdf"}[media]
        tasks.append(FileTask(entry_id=i + 1, path=str(p), media_type=media, mime=mime, extension=ext,
                              size=p.stat().st_size, operations=operations, params=Params(),
                              cache_root=str(cache_root)))
    return tasks


def pool_hashing(paths: list[Path], cache_root: Path) -> tuple[float, int]:
    """hash_file over ``paths`` through the classifier's pool; returns (seconds, files hashed)."""
    from flows.classify.pool import get_pool

    tasks = pool_tasks(paths, ("metadata",), cache_root)
    started = time.perf_counter()
    hashed = sum(1 for r in get_pool().run_tasks(tasks, _hash_task) if r.hash)
    return time.perf_counter() - started, hashed


def warm_pool(corpus: Corpus, cache_root: Path) -> float:
    """Spawn the pool's workers and load the worker's imports (a thumbnail per worker, twice); returns seconds."""
    from flows.classify.pool import get_pool

    pool = get_pool()
    started = time.perf_counter()
    tasks = pool_tasks(corpus.images[: 2 * pool.workers] + corpus.pdfs[:1] + corpus.videos[:1], ("thumbnail",),
                       cache_root)
    for res in pool.run_tasks(tasks):
        if res.errors:
            log.warning("warm-up %s: %s", res.path, res.errors)
    return time.perf_counter() - started


def worker_timeline(video: Path, cache_root: Path) -> float:
    """The worker's timeline of ``video`` called in this process (no pool, no store, no plan): its own cost."""
    from flows.classify.worker import classify_file

    task = pool_tasks([video], ("timeline",), cache_root)[0]
    started = time.perf_counter()
    res = classify_file(task)
    if res.errors:
        raise RuntimeError(f"the worker's timeline of {video} failed: {res.errors}")
    return time.perf_counter() - started


def job_timeline(engine, video: Path) -> float:
    """The timeline of ``video`` through rerun-classifier's job function run plainly (no Prefect): a classify job
    row, the file's batch through the pool, the writes, the job's end. Returns seconds."""
    from flows.classify.service import create_classify_job, run_classify_job
    from store.engine import share_engine, store_url

    started = time.perf_counter()
    url = store_url(engine)
    share_engine(url, engine)
    job = run_classify_job(url, create_classify_job(engine, path=str(video), operations=("timeline",)))
    seconds = time.perf_counter() - started
    if job["status"] != "completed":
        raise RuntimeError(f"the classify job of {video} ended {job['status']}: {job.get('error_message')}")
    return seconds
