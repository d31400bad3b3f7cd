"""The classification benchmark: thumbnails, metadata, timelines and hashing through plan runs, next to the plain
loops and commands that do the same work, measured on the same machine in the same run.

    .venv/bin/python bench/classify.py [--images 500] [--videos 20] [--pdfs 50] [--corpus DIR] [--skip-timeline]
                                       [--quick] [--repeat 1] [--out bench/out/classify.md] [--json FILE]

1. The corpus (bench/media.py): photos of 2-12 MP with EXIF, videos of 10-60 s, PDFs of 1-40 pages and one
   10-minute 720p video, generated once under --corpus (default /tmp/assay-bench-classify) and reused. Every file is
   read once before timing (warm page cache for everyone).
2. Prefect is started once (a trivial flow) and the worker pool once (its processes spawned and Pillow imported);
   both are timed apart, as a server that has been up a while has them warm.
3. Each "ours" figure is a plan run (flows.plans.service.PlanService, as a Prefect flow unless --no-prefect) over a
   fresh store and a fresh artifact cache, the corpus indexed first (not timed). Its baseline runs in this process:
   - thumbnails: ``Image.open(p)``; ``img.thumbnail((320, 320))``; ``img.save(out, "JPEG")`` per photo, one core,
     Pillow's defaults (goal: ours >= 1.7x its rate); the same plan run as plain functions and with the thread pool
     (ASSAY_CLASSIFY_POOL=thread) are measured too, with the cores each kept busy;
   - metadata (+ content hash): ffprobe per video, PyMuPDF per PDF, Pillow + EXIF per photo, one core (goal >= 0.9x);
   - timeline: 5 frames spread over the long video, against ONE raw ffmpeg command extracting the frames at the same
     timestamps (N inputs, each with its own input seek, scaled to the same box) (goal: ours <= 1.5x its time);
   - hashing: flows.media.hashing.hash_file over the corpus through the worker pool, against ``xxh128sum``
     over the same files (one process) and the xxhash library's own streaming loop (goal >= 0.8x);
   - re-run: the thumbnail and metadata plans run again on the unchanged files (goal < 5% of the first run);
   - peak RSS: this process, the pool's workers and their ffmpeg/ffprobe children, sampled together every 20 ms
     (their sum is the figure; Prefect's API server, a long-lived child, is reported apart).
Progress goes to stderr; stdout gets the table only.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.common import bench_logging, publish, render, secs  # noqa: E402
from bench.media import Corpus, ensure_corpus  # noqa: E402

log = logging.getLogger("bench.classify")

GOAL_THUMBS = 1.7  # ours / the one-core loop, files per second
GOAL_METADATA = 0.9
GOAL_TIMELINE = 1.5  # ours / the raw ffmpeg command, seconds
GOAL_HASH = 0.8  # ours / xxh128sum, bytes per second
GOAL_RERUN = 0.05  # re-run / first run
BOX = (320, 320)
TIMEOUT = 600  # seconds for any one external command here


# --- baselines -----------------------------------------------------------------------------------------------------

def read_all(paths: list[Path]) -> int:
    """Read every file once (the page cache is warm for everyone after this); returns the bytes read."""
    total = 0
    buf = bytearray(1 << 20)
    for p in paths:
        with open(p, "rb", buffering=0) as fh:
            while n := fh.readinto(buf):
                total += n
    return total


def baseline_thumbnails(images: list[Path], out: Path) -> float:
    """The plain loop: open, thumbnail, save JPEG, Pillow's defaults, one core. Returns seconds."""
    from PIL import Image

    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    for i, p in enumerate(images):
        img = Image.open(p)
        img.thumbnail(BOX)
        img.save(out / f"{i}.jpg", "JPEG")
    return time.perf_counter() - started


def ffprobe(path: Path) -> dict:
    done = subprocess.run(["ffprobe", "-v", "error", "-print_format", "json", "-show_format", "-show_streams",
                           "-show_chapters", "file:" + str(path)], capture_output=True, timeout=TIMEOUT, check=True)
    return json.loads(done.stdout)


def baseline_metadata(corpus: Corpus) -> tuple[float, int]:
    """The plain loop: Pillow + EXIF (photos), ffprobe (videos), PyMuPDF (PDFs), one core. Returns (seconds, keys
    read), the count only so that nothing is optimised away."""
    import pymupdf
    from PIL import Image
    from PIL.ExifTags import IFD

    keys = 0
    started = time.perf_counter()
    for p in corpus.images:
        with Image.open(p) as img:
            exif = img.getexif()
            keys += len(exif) + len(exif.get_ifd(IFD.Exif)) + len(exif.get_ifd(IFD.GPSInfo)) + len(img.size)
    for p in corpus.videos:
        info = ffprobe(p)
        keys += len(info.get("format", {})) + sum(len(s) for s in info.get("streams", []))
    for p in corpus.pdfs:
        with pymupdf.open(p) as doc:
            keys += len(doc.metadata or {}) + doc.page_count + len(doc.get_toc())
    return time.perf_counter() - started, keys


def baseline_xxh128sum(paths: list[Path]) -> float | None:
    exe = shutil.which("xxh128sum")
    if exe is None:
        return None
    started = time.perf_counter()
    subprocess.run([exe, *map(str, paths)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=TIMEOUT,
                   check=True)  # its stderr: a progress line for big files
    return time.perf_counter() - started


def baseline_xxhash_loop(paths: list[Path]) -> float:
    """The xxhash library's own streaming loop (xxh3-128, 1 MiB buffer), one core."""
    import xxhash

    buf = bytearray(1 << 20)
    view = memoryview(buf)
    started = time.perf_counter()
    for p in paths:
        h = xxhash.xxh3_128()
        with open(p, "rb", buffering=0) as fh:
            while n := fh.readinto(buf):
                h.update(view[:n])
        h.hexdigest()
    return time.perf_counter() - started


def raw_timeline(video: Path, timestamps: list[float], out: Path) -> float:
    """One ffmpeg command extracting the frames at ``timestamps``: an input per frame, each with its own fast input
    seek, each scaled into the box and written as a JPEG. Returns seconds."""
    out.mkdir(parents=True, exist_ok=True)
    cmd = ["ffmpeg", "-hide_banner", "-loglevel", "error", "-nostdin", "-y"]
    for t in timestamps:
        cmd += ["-ss", f"{t:.3f}", "-i", "file:" + str(video)]
    scale = f"scale=w={BOX[0]}:h={BOX[1]}:force_original_aspect_ratio=decrease"
    for i in range(len(timestamps)):
        cmd += ["-map", f"{i}:v:0", "-frames:v", "1", "-vf", scale, "file:" + str(out / f"frame-{i}.jpg")]
    started = time.perf_counter()
    subprocess.run(cmd, capture_output=True, timeout=TIMEOUT, check=True)
    return time.perf_counter() - started


# --- peak RSS and CPU ------------------------------------------------------------------------------------------------

class ProcessSampler:
    """Samples this process and its descendants every ``interval`` s: the peak of their summed RSS (leaving out
    Prefect's API server, reported apart), this process's peak, the largest single worker's peak."""

    def __init__(self, interval: float = 0.02) -> None:
        import psutil

        self.me = psutil.Process()
        self.interval = interval
        self.peak_sum = self.peak_main = self.peak_worker = self.peak_prefect = 0
        self._stop = threading.Event()
        self._kinds: dict[int, str] = {}
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def _kind(self, proc) -> str:
        kind = self._kinds.get(proc.pid)
        if kind is None:
            try:
                cmd = " ".join(proc.cmdline())
            except Exception:
                return "other"
            kind = "prefect" if "flows.prefect_server" in cmd else "tracker" if "resource_tracker" in cmd else \
                "worker" if "multiprocessing" in cmd else "tool"
            self._kinds[proc.pid] = kind
        return kind

    def sample(self) -> None:
        total = 0
        try:
            main = self.me.memory_info().rss
            children = self.me.children(recursive=True)
        except Exception:
            return
        total = main
        for child in children:
            try:
                rss = child.memory_info().rss
            except Exception:
                continue
            kind = self._kind(child)
            if kind == "prefect":
                self.peak_prefect = max(self.peak_prefect, rss)
                continue
            if kind == "worker":
                self.peak_worker = max(self.peak_worker, rss)
            total += rss
        self.peak_main = max(self.peak_main, main)
        self.peak_sum = max(self.peak_sum, total)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def start(self) -> "ProcessSampler":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds so far by part: ``main`` (this process and its reaped children), ``workers`` (live
        descendants: the pool's workers), ``prefect`` (Prefect's API server)."""
        t = self.me.cpu_times()
        out = {"main": t.user + t.system + t.children_user + t.children_system, "workers": 0.0, "prefect": 0.0}
        for child in self.me.children(recursive=True):
            try:
                c = child.cpu_times()
                out["prefect" if self._kind(child) == "prefect" else "workers"] += c.user + c.system
            except Exception:
                continue
        return out


# --- ours: plan runs over fresh stores -------------------------------------------------------------------------------

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


def run_plan(service, plan, *, use_prefect: bool | None = None, sampler: ProcessSampler | None = None) -> dict:
    """Run ``plan`` to its end; returns seconds, cores busy and the outcome's counters."""
    service.save(plan, create=None)
    cpu0 = sampler.cpu_seconds() if sampler else {}
    started = time.perf_counter()
    row = service.execute(plan, wait=True, scan=False, use_prefect=use_prefect)
    seconds = time.perf_counter() - started
    cpu = {k: v - cpu0[k] for k, v in sampler.cpu_seconds().items()} if sampler else {}
    if row["status"] not in ("success", "partial"):
        raise RuntimeError(f"plan {plan.name} ended {row['status']}: {row['error_message']}")
    outcome = row["summary"]["rules"][plan.rules[0].name]["outcomes"][0]
    ours = cpu.get("main", 0.0) + cpu.get("workers", 0.0)  # Prefect's API server is counted apart
    return {"seconds": seconds, "cores": ours / seconds if seconds else 0.0, "cpu": cpu, "status": row["status"],
            "matched": row["entries_matched"], "applied": outcome["applied"], "errors": outcome["errors"],
            "error_samples": outcome["error_samples"]}


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


def _burn(start_at: float, seconds: float) -> float:
    """Wait until ``start_at`` (epoch seconds), spin for ``seconds``; returns the CPU seconds this process got."""
    time.sleep(max(0.0, start_at - time.time()))
    cpu0, end = time.process_time(), time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
    return time.process_time() - cpu0


def available_cores(seconds: float = 1.0) -> float:
    """How many cores this run can get now: one busy loop per core, all spinning over the same ``seconds``, CPU
    seconds / wall seconds (the machine is shared: other jobs' load takes its part)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    n = os.cpu_count() or 1
    with ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("spawn")) as pool:
        list(pool.map(time.sleep, [0.2] * n))  # the workers are up (spawned, imported) before the clock starts
        start_at = time.time() + 0.2
        return sum(pool.map(_burn, [start_at] * n, [seconds] * n)) / seconds


def start_prefect() -> None:
    """One trivial flow run: Prefect's API and client come up (a server that has been up a while has them warm)."""
    from prefect import flow

    from flows.core.prefect import flow_settings

    @flow(name="bench-warm-up", persist_result=False)
    def warm_up() -> int:
        return 1

    with flow_settings():
        warm_up()


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


# --- the table -------------------------------------------------------------------------------------------------------

def rate(n: int, seconds: float, unit: str = "files") -> str:
    return f"{n / seconds:,.1f} {unit}/s" if seconds > 0 else "—"


def mb(n: float) -> str:
    return f"{n / 1e6:,.0f} MB"


def yes_no(ok: bool) -> str:
    return "yes" if ok else "**no**"


def machine_facts() -> str:
    import platform

    import PIL

    ffmpeg_version = subprocess.run(["ffmpeg", "-version"], capture_output=True, text=True).stdout.split("\n")[0]
    try:
        import pymupdf

        mupdf = f"PyMuPDF {pymupdf.__version__} (MuPDF {pymupdf.VersionFitz})"
    except Exception:
        mupdf = "PyMuPDF ?"
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30
    load = os.getloadavg()
    return (f"{os.cpu_count()} cores, {mem:.1f} GB RAM, {platform.system()} {platform.release()}; Python "
            f"{platform.python_version()}; Pillow {PIL.__version__}; {mupdf}; {' '.join(ffmpeg_version.split()[:3])}; "
            f"load average at start {load[0]:.2f}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bench/classify.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--images", type=int, help="photos of 2-12 MP with EXIF (default 500; --quick 12)")
    p.add_argument("--videos", type=int, help="videos of 10-60 s (default 20; --quick 2)")
    p.add_argument("--pdfs", type=int, help="PDFs of 1-40 pages (default 50; --quick 3)")
    p.add_argument("--quick", action="store_true", help="a small corpus of small files (the smoke test)")
    p.add_argument("--corpus", default=os.path.join(tempfile.gettempdir(), "assay-bench-classify"),
                   help="where the corpus is generated once and reused; scratch stores go here too")
    p.add_argument("--skip-timeline", action="store_true", help="leave out the long video and its timeline")
    p.add_argument("--no-prefect", action="store_true", help="plan runs as plain functions, not Prefect flows")
    p.add_argument("--repeat", type=int, default=1, help="runs of each figure, best taken (default 1)")
    p.add_argument("--out", default=str(REPO / "bench" / "out" / "classify.md"), help="where to write the table")
    p.add_argument("--json", help="also write the figures as JSON to this file")
    args = p.parse_args(argv)
    args.images = args.images if args.images is not None else (12 if args.quick else 500)
    args.videos = args.videos if args.videos is not None else (2 if args.quick else 20)
    args.pdfs = args.pdfs if args.pdfs is not None else (3 if args.quick else 50)
    return args


def best(runs: list[dict]) -> dict:
    return min(runs, key=lambda r: r["seconds"])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    bench_logging()
    work = Path(args.corpus).resolve()
    corpus = ensure_corpus(work, images=args.images, videos=args.videos, pdfs=args.pdfs, quick=args.quick,
                           long_seconds=None if args.skip_timeline else (20 if args.quick else 600))
    scratch = Path(tempfile.mkdtemp(prefix="run-", dir=work))
    (scratch / "prefect").mkdir()
    os.environ.update(PREFECT_HOME=str(scratch / "prefect"), PREFECT_SERVER_ANALYTICS_ENABLED="false",
                      PREFECT_LOGGING_LEVEL="WARNING", PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="120",
                      ASSAY_DATA_DIR=str(scratch / "data"))
    os.environ.pop("ASSAY_CLASSIFY_POOL", None)
    use_prefect = not args.no_prefect
    fig: dict = {"corpus": {"root": str(corpus.root), "images": len(corpus.images), "videos": len(corpus.videos),
                            "pdfs": len(corpus.pdfs), "bytes": corpus.bytes(),
                            "image_megapixels": statistics.mean(_megapixels(p) for p in corpus.images),
                            "long_video": str(corpus.long_video) if corpus.long_video else None,
                            "generated_seconds": round(corpus.generated_s, 1)},
                 "mode": "Prefect flow" if use_prefect else "plain functions"}
    try:
        facts = machine_facts()
        fig["machine"] = facts
        everything = corpus.files + ([corpus.long_video] if corpus.long_video else [])
        log.info("reading the corpus once (%s) so every measurement sees a warm page cache", mb(corpus.bytes()))
        read_all(everything)

        started = time.perf_counter()
        start_prefect()  # both modes are measured (the thumbnails run in the other one)
        fig["prefect_start"] = time.perf_counter() - started
        fig["pool_start"] = warm_pool(corpus, scratch / "warm-cache")
        sampler = ProcessSampler().start()
        stores = Stores(scratch, corpus, work, use_prefect)
        # a first plan run in each mode builds the plan flow and its task (one-time, as in a server that has run
        # plans before): the PDFs' metadata, on a store of its own
        started = time.perf_counter()
        for prefect in (True, False):
            _, service, _ = stores.fresh("warm-up")
            run_plan(service, classifier_plan("warm-up", corpus.root / "pdfs", "extract_metadata",
                                              "extension = .pdf"), use_prefect=prefect)
            service.shutdown()
        fig["first_plan_runs"] = time.perf_counter() - started
        repeat = max(1, args.repeat)

        # 1. thumbnails: the loop and the three ways of running the plan, interleaved round by round so that a
        # change in the machine's load (other jobs) does not favour one of them
        fig["cores_available_start"] = available_cores()
        plan = classifier_plan("thumbs", corpus.root / "images", "generate_thumbnail", "extension = .jpg")
        other_mode = not use_prefect
        variants = {"thumbs": (use_prefect, "process"), "thumbs_other_mode": (other_mode, "process"),
                    "thumbs_thread": (use_prefect, "thread")}
        runs: dict[str, list[dict]] = {k: [] for k in [*variants, "thumbs_rerun"]}
        base_runs = []
        for r in range(repeat):
            log.info("thumbnails, round %d: the one-core Pillow loop over %d photos", r + 1, len(corpus.images))
            base_runs.append(baseline_thumbnails(corpus.images, scratch / "base-thumbs"))
            for key, (prefect, pool) in variants.items():
                log.info("thumbnails, round %d: plan run (%s, %s pool)", r + 1,
                         "Prefect flow" if prefect else "plain functions", pool)
                engine, service, _ = stores.fresh(key)
                os.environ["ASSAY_CLASSIFY_POOL"] = pool
                try:
                    runs[key].append(run_plan(service, plan, use_prefect=prefect, sampler=sampler))
                    runs[key][-1]["made"] = count(engine, "SELECT count(*) FROM artifacts WHERE type = 'thumbnail'")
                    if key == "thumbs":
                        log.info("thumbnails, round %d: re-run on the unchanged files", r + 1)
                        runs["thumbs_rerun"].append(run_plan(service, plan, sampler=sampler))
                finally:
                    os.environ.pop("ASSAY_CLASSIFY_POOL", None)
                    service.shutdown()
        fig["thumbs_base"] = min(base_runs)
        fig.update({key: best(v) for key, v in runs.items()})

        # 2. metadata (+ hash)
        log.info("metadata: the one-core Pillow+EXIF / ffprobe / PyMuPDF loop over %d files", len(corpus.files))
        fig["meta_base"] = min(baseline_metadata(corpus)[0] for _ in range(repeat))
        runs, reruns = [], []
        for _ in range(repeat):
            log.info("metadata: plan run")
            engine, service, _ = stores.fresh("meta")
            plan = classifier_plan("meta", corpus.root, "extract_metadata", "media_type in [image, video, document]")
            runs.append(run_plan(service, plan, sampler=sampler))
            runs[-1]["made"] = count(engine, "SELECT count(*) FROM artifacts WHERE type = 'metadata'")
            runs[-1]["hashed"] = count(engine, "SELECT count(*) FROM entries WHERE hash IS NOT NULL")
            runs[-1]["values"] = count(engine, "SELECT count(*) FROM metadata_values")
            log.info("metadata: re-run on the unchanged files")
            reruns.append(run_plan(service, plan, sampler=sampler))
            service.shutdown()
        fig["meta"], fig["meta_rerun"] = best(runs), best(reruns)

        # 4. hashing
        log.info("hashing: xxh128sum, the xxhash loop and hash_file through the pool over %d files",
                 len(corpus.files))
        fig["hash_bytes"] = corpus.bytes()
        fig["hash_xxh128sum"] = baseline_xxh128sum(corpus.files)
        fig["hash_loop"] = min(baseline_xxhash_loop(corpus.files) for _ in range(repeat))
        fig["hash_pool"], fig["hash_files"] = min(pool_hashing(corpus.files, scratch / "hash-cache")
                                                  for _ in range(repeat))

        # 3. timeline
        if corpus.long_video is not None:
            runs, reruns = [], []
            for _ in range(repeat):
                log.info("timeline: plan run over the %d s video", corpus.long_seconds)
                engine, service, data = stores.fresh("timeline")
                plan = classifier_plan("timeline", corpus.long_video.parent, "generate_timeline",
                                       "media_type = video")
                runs.append(run_plan(service, plan, sampler=sampler))
                runs[-1]["timestamps"] = timeline_timestamps(engine)
                reruns.append(run_plan(service, plan, sampler=sampler))
                service.shutdown()
            fig["timeline"], fig["timeline_rerun"] = best(runs), best(reruns)
            stamps = fig["timeline"]["timestamps"]
            if not stamps:
                raise RuntimeError(f"the timeline plan made no frames: {fig['timeline']}")
            log.info("timeline: one raw ffmpeg command at %s", ", ".join(f"{t:.1f}" for t in stamps))
            fig["timeline_raw"] = min(raw_timeline(corpus.long_video, stamps, scratch / "raw-frames")
                                      for _ in range(repeat + 1))
            fig["timeline_worker"] = min(worker_timeline(corpus.long_video, scratch / "worker-cache")
                                         for _ in range(repeat + 1))
            engine, _, _ = stores.fresh("timeline-job")
            fig["timeline_job"] = min(job_timeline(engine, corpus.long_video) for _ in range(repeat + 1))
        sampler.stop()
        fig["cores_available_end"] = available_cores()
        fig["rss"] = {"sum": sampler.peak_sum, "main": sampler.peak_main, "worker": sampler.peak_worker,
                      "prefect": sampler.peak_prefect}
        fig["load_end"] = os.getloadavg()[0]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    table = render(fig["machine"], table_rows(fig, corpus), notes(fig, corpus, args))
    publish(table, args.out, fig, args.json)
    return 0


def _megapixels(p: Path) -> float:
    from PIL import Image

    with Image.open(p) as img:
        return img.size[0] * img.size[1] / 1e6


def table_rows(fig: dict, corpus: Corpus) -> list[tuple]:
    c = fig["corpus"]
    n_img, n_all = c["images"], c["images"] + c["videos"] + c["pdfs"]
    mode = fig["mode"]
    t, tb = fig["thumbs"], fig["thumbs_base"]
    rows = [
        ("cores this run could get (a busy loop per core, CPU / wall), at the start / end",
         f"{fig['cores_available_start']:.2f} / {fig['cores_available_end']:.2f}", f"{os.cpu_count()} cores", "—",
         "—", "—"),
        ("Prefect start, one-time (first flow run; excluded below)", secs(fig["prefect_start"]), "—", "—", "—", "—"),
        ("worker pool start, one-time (spawn + imports; excluded below)", secs(fig["pool_start"]), "—", "—", "—",
         "—"),
        (f"first plan runs, one-time (a flow and plain: the {c['pdfs']} PDFs' metadata, fresh stores; excluded)",
         secs(fig["first_plan_runs"]), "—", "—", "—", "—"),
        (f"thumbnails of {n_img} photos ({c['image_megapixels']:.1f} MP average): plan run, {mode}, process pool",
         f"{secs(t['seconds'])} = {rate(n_img, t['seconds'])}",
         f"one-core loop `Image.open` + `thumbnail((320, 320))` + save JPEG: {secs(tb)} = {rate(n_img, tb)}",
         f"{tb / t['seconds']:.2f}×", f"≥ {GOAL_THUMBS:g}×", yes_no(tb / t["seconds"] >= GOAL_THUMBS)),
        ("  cores kept busy (CPU seconds / wall seconds), process pool", f"{t['cores']:.2f}", "the loop: 1 core", "—",
         "—", "—"),
        ("  CPU seconds in that run: this process / pool workers / Prefect's API server",
         " / ".join(f"{t['cpu'].get(k, 0):.1f}" for k in ("main", "workers", "prefect")), "—", "—", "—", "—"),
    ]
    o = fig["thumbs_other_mode"]
    rows.append((f"  the same plan run as {'plain functions' if mode == 'Prefect flow' else 'a Prefect flow'}; CPU "
                 "seconds: this process / workers / Prefect's API server "
                 + " / ".join(f"{o['cpu'].get(k, 0):.1f}" for k in ("main", "workers", "prefect")),
                 f"{secs(o['seconds'])} = {rate(n_img, o['seconds'])}", "the loop", f"{tb / o['seconds']:.2f}×",
                 "—", "—"))
    th = fig["thumbs_thread"]
    faster = "process" if t["seconds"] <= th["seconds"] else "thread"
    rows += [
        (f"  the same plan run with the thread pool (ASSAY_CLASSIFY_POOL=thread); cores busy {th['cores']:.2f}",
         f"{secs(th['seconds'])} = {rate(n_img, th['seconds'])}", "the loop", f"{tb / th['seconds']:.2f}×", "—",
         "—"),
        ("  process pool vs thread pool (thread time / process time)", f"{faster} pool faster", "—",
         f"{th['seconds'] / t['seconds']:.2f}×", "—", "—"),
    ]
    m, mbase = fig["meta"], fig["meta_base"]
    rows.append((f"metadata + content hash of {n_all} files ({c['images']} photos, {c['videos']} videos, "
                 f"{c['pdfs']} PDFs): plan run, {mode}", f"{secs(m['seconds'])} = {rate(n_all, m['seconds'])}",
                 f"one-core loop Pillow+EXIF / ffprobe / PyMuPDF, no hash: {secs(mbase)} = {rate(n_all, mbase)}",
                 f"{mbase / m['seconds']:.2f}×", f"≥ {GOAL_METADATA:g}×",
                 yes_no(mbase / m["seconds"] >= GOAL_METADATA)))
    with_hash = mbase + fig["hash_loop"]
    rows.append(("  against the same loop plus the xxhash library's hash of each file", secs(m["seconds"]),
                 f"{secs(with_hash)} = {rate(n_all, with_hash)}", f"{with_hash / m['seconds']:.2f}×", "—", "—"))
    if "timeline" in fig:
        tl, raw = fig["timeline"], fig["timeline_raw"]
        frames = len(tl["timestamps"])
        rows += [
            (f"timeline: {frames} frames spread over a {corpus.long_seconds} s 720p video (+ contact sheet): "
             f"plan run, {mode}", secs(tl["seconds"]),
             f"one raw ffmpeg command, the same {frames} timestamps, input seeks: {secs(raw)}",
             f"{tl['seconds'] / raw:.2f}×", f"≤ {GOAL_TIMELINE:g}×", yes_no(tl["seconds"] <= GOAL_TIMELINE * raw)),
            ("  the same through rerun-classifier's job function, run plainly (run_classify_job, force)",
             secs(fig["timeline_job"]), "the raw command", f"{fig['timeline_job'] / raw:.2f}×", f"≤ {GOAL_TIMELINE:g}×",
             yes_no(fig["timeline_job"] <= GOAL_TIMELINE * raw)),
            ("  the worker's timeline alone (classify_file in this process: no plan, pool or store)",
             secs(fig["timeline_worker"]), "the raw command", f"{fig['timeline_worker'] / raw:.2f}×", "—", "—"),
        ]
    hb, hp = fig["hash_bytes"], fig["hash_pool"]
    ref = fig["hash_xxh128sum"]
    if ref is not None:
        rows.append((f"hashing {fig['hash_files']} files ({mb(hb)}): hash_file through the pool",
                     f"{secs(hp)} = {rate(hb / 1e6, hp, 'MB')}",
                     f"`xxh128sum` over the same files (one process): {secs(ref)} = {rate(hb / 1e6, ref, 'MB')}",
                     f"{ref / hp:.2f}×", f"≥ {GOAL_HASH:g}×", yes_no(ref / hp >= GOAL_HASH)))
    loop = fig["hash_loop"]
    rows.append((f"  against the xxhash library's own streaming loop (one core){'' if ref else ' (no xxh128sum)'}",
                 secs(hp), f"{secs(loop)} = {rate(hb / 1e6, loop, 'MB')}", f"{loop / hp:.2f}×",
                 "—" if ref else f"≥ {GOAL_HASH:g}×", "—" if ref else yes_no(loop / hp >= GOAL_HASH)))
    for key, what in (("thumbs", "thumbnail"), ("meta", "metadata"), ("timeline", "timeline")):
        if key not in fig:
            continue
        first, again = fig[key]["seconds"], fig[f"{key}_rerun"]["seconds"]
        single = key == "timeline"  # one file: what is left is a plan run's fixed cost, not per-file work
        rows.append((f"re-run of the {what} plan on the unchanged files (nothing redone: "
                     f"{fig[f'{key}_rerun']['applied']} applied)", secs(again), f"its first run: {secs(first)}",
                     f"{again / first:.1%}", "— (one file: a plan run's fixed cost)" if single else
                     f"< {GOAL_RERUN:.0%}", "—" if single else yes_no(again < GOAL_RERUN * first)))
    r = fig["rss"]
    rows += [
        ("peak RSS, this process + pool workers + their ffmpeg/ffprobe (sampled together, 20 ms)", mb(r["sum"]),
         "—", "—", "flat", "—"),
        ("  peak RSS, this process (plan engine, store, Prefect client)", mb(r["main"]), "—", "—", "—", "—"),
        ("  peak RSS, the largest pool worker", mb(r["worker"]), "—", "—", "—", "—"),
        ("  peak RSS, Prefect's API server (a long-lived child, not summed)", mb(r["prefect"]), "—", "—", "—", "—"),
    ]
    rows += mismatches(fig, n_img, n_all)
    return rows


def mismatches(fig: dict, n_img: int, n_all: int) -> list[tuple]:
    """Rows that say when ours did not do all the work its baseline did (a figure is then not comparable)."""
    out = []
    checks = [("thumbnails made", fig["thumbs"].get("made"), n_img), ("metadata records", fig["meta"].get("made"),
                                                                      n_all),
              ("files hashed by the metadata run", fig["meta"].get("hashed"), n_all),
              ("files hashed through the pool", fig["hash_files"], n_all)]
    for what, got, want in checks:
        if got != want:
            out.append((f"**mismatch**: {what}", str(got), f"expected {want}", "—", "—", "**no**"))
    for key in ("thumbs", "thumbs_other_mode", "thumbs_thread", "meta", "timeline"):
        if key in fig and fig[key]["errors"]:
            out.append((f"**errors** in the {key} run", str(fig[key]["errors"]),
                        "; ".join(fig[key]["error_samples"][:2]), "—", "—", "**no**"))
    return out


def notes(fig: dict, corpus: Corpus, args: argparse.Namespace) -> list[str]:
    c = fig["corpus"]
    th, t = fig["thumbs_thread"], fig["thumbs"]
    return [
        f"Corpus: {corpus.root} ({c['images']} photos, {c['videos']} videos, {c['pdfs']} PDFs, {mb(c['bytes'])}"
        + (f"; long video {corpus.long_video}" if corpus.long_video else "") + "), generated by bench/media.py "
        "once and reused; read once before timing (warm page cache).",
        f"Ours: plan runs through flows.plans.service.PlanService ({fig['mode']}, scan=False: the corpus is indexed "
        "first, not timed), each over a fresh SQLite store and artifact cache; the timing is the whole "
        "`execute(wait=True)` call: selection, pool work, store writes and, for a flow, Prefect's bookkeeping.",
        f"Pools: the process pool kept {t['cores']:.2f} cores busy, the thread pool {th['cores']:.2f}. Pillow "
        "releases the GIL while it decodes, resizes and encodes, but opening a file, parsing EXIF, choosing the "
        "draft size, hashing the thumbnail for the cache and the executor's own bookkeeping hold it, so threads "
        "queue on the GIL for part of each file; processes do not share a GIL and pay instead a pickled task and "
        "result per file (a few hundred bytes: no pixels cross the boundary).",
        f"Best of {args.repeat} run(s) each; load average at the start and end: {fig['machine'].rsplit(' ', 1)[-1]} "
        f"/ {fig['load_end']:.2f}. Timings on a shared 2-core machine are noisy.",
    ]


if __name__ == "__main__":
    sys.exit(main())
