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

The baselines are in bench/classify_baselines.py, the plan runs, the pool and the job function in
bench/classify_runs.py; this file holds the command and its table.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.classify_baselines import (  # noqa: E402
    baseline_metadata, baseline_thumbnails, baseline_xxh128sum, baseline_xxhash_loop, raw_timeline,
)
from bench.classify_runs import (  # noqa: E402
    Stores, classifier_plan, count, job_timeline, pool_hashing, timeline_timestamps, warm_pool,
    worker_timeline,
)
from bench.common import bench_logging, publish, render, secs  # noqa: E402
from bench.media import Corpus, ensure_corpus  # noqa: E402
from bench.plan_runs import run_plan  # noqa: E402
from bench.sampling import ProcessSampler, available_cores  # noqa: E402
from bench.warm_up import read_all, start_prefect  # noqa: E402

log = logging.getLogger("bench.classify")

GOAL_THUMBS = 1.7  # ours / the one-core loop, files per second
GOAL_METADATA = 0.9
GOAL_TIMELINE = 1.5  # ours / the raw ffmpeg command, seconds
GOAL_HASH = 0.8  # ours / xxh128sum, bytes per second
GOAL_RERUN = 0.05  # re-run / first run


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
