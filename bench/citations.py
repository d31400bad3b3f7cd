"""The citations benchmark: reference 003's four tools through a real MCP client, physical resolution against the raw
PyMuPDF and ffmpeg calls that do the same work, and map building against the raw outline read and scene filter.
Every figure beside the limit it is measured against, in the same run.

    .venv/bin/python -m bench.citations [--quick] [--calls 200] [--clips 16] [--work /tmp/assay-bench-citations]
                                        [--out bench/out/citations.md] [--json FILE] [--keep]

0. Media (bench/citations_media.py), generated once under ``--work`` and reused: a 300-page PDF with a nested outline
   of 300 entries, a 10-minute 1280x720 video of 30 test-pattern segments of 20 s (so 29 scene cuts), a keyframe
   every 5 s, libx264 ultrafast. The generation time is reported (from the run that made them).
1. Map building, in-process over a fresh SQLite store with the media folder indexed (not timed):
   ``CitationService.build_map(path, strategy="outline")`` of the PDF against ``pymupdf.open(path).get_toc()`` (best
   of 5 each), and ``build_map(path, strategy="scenes")`` of the video against ffmpeg's scene filter alone
   (``ffmpeg -i V -vf "select='gt(scene,0.3)',showinfo" -f null -``; one run each).
2. ``assay serve --no-prefect`` over stdio on that store, the Python SDK's client (``mcp.Client``): the transport's
   floor (``list_collections`` of the two-file folder: the server answers no MCP ping), ``listResources``,
   ``getStructure`` of the PDF's 300-node map (the client's output-schema check of its answer also timed apart),
   ``getNode`` of random nodes, ``resolve`` with ``virtual: true`` of random nodes: p50 / p95 over ``--calls`` calls
   each (getStructure a quarter of them), beside reference 003's targets (listResources < 10 ms, getStructure 10-50
   ms, getNode < 5 ms, virtual resolve ~10 ms; our goal for virtual resolve: < 5 ms).
3. Physical resolution, ``--clips`` samples each (default 16), a different range every time (so every one is a cache
   miss), each beside its raw limit run by this process on the same range just before it: a 10-page excerpt of the
   PDF (``resolve`` of ``doc://ID#pages=A-B``) against ``pymupdf.open`` + ``insert_pdf`` + ``save`` of the same
   pages; a 30-second clip of the video (``video://ID#t=S-E``, stream copy) against ``ffmpeg -ss S -i V -t 30 -c
   copy`` (goal: p50 ratio <= 1.5x). Then the same addresses again, answered from the cache (goal p50 < 10 ms).
   Every output is checked: the excerpt has 10 pages, the clip lasts at least 30 s, the second resolve says
   ``cached``.

Progress goes to stderr; stdout gets the table only. ``--quick`` runs every part on tiny media (a 20-page PDF, a
24-second 320x240 video; seconds, the real server): tests/test_bench_citations_smoke.py checks the table's shape.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import random
import re
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.citations_media import Media, MediaSpec, ensure_media  # noqa: E402
from bench.common import (  # noqa: E402
    bench_logging, hwm_kb, payload, percentile, publish, render, secs, server_env, server_pid,
)
from bench.semantic import mb, ms, yes_no  # noqa: E402

log = logging.getLogger("bench.citations")

DEFAULT_WORK = Path("/tmp/assay-bench-citations")
GOAL_VIRTUAL_S = 0.005
GOAL_RATIO = 1.5
GOAL_CACHED_S = 0.010
REF = {"listResources": ("< 10 ms", 0.010), "getStructure": ("10-50 ms", 0.050), "getNode": ("< 5 ms", 0.005),
       "resolve": ("~10 ms", 0.010)}
SCENE_THRESHOLD = 0.3
TOC_REPEAT = 5


# --- raw limits -------------------------------------------------------------------------------------------------------

def raw_toc(pdf: Path) -> dict:
    """Best of TOC_REPEAT ``pymupdf.open(path).get_toc()``: the outline as the library reads it."""
    import pymupdf

    best, entries = float("inf"), 0
    for _ in range(TOC_REPEAT):
        started = time.perf_counter()
        with pymupdf.open(str(pdf)) as doc:
            entries = len(doc.get_toc())
        best = min(best, time.perf_counter() - started)
    return {"seconds": best, "entries": entries}


def raw_scenes(video: Path) -> dict:
    """ffmpeg's scene filter alone over the whole video (decode + scene score, nothing kept): the cuts it prints."""
    started = time.perf_counter()
    proc = subprocess.run(["ffmpeg", "-hide_banner", "-nostdin", "-i", str(video), "-vf",
                           f"select='gt(scene,{SCENE_THRESHOLD})',showinfo", "-f", "null", "-"],
                          capture_output=True, text=True, check=True)
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "cuts": len(re.findall(r"Parsed_showinfo.*pts_time:", proc.stderr))}


def raw_excerpt(pdf: Path, first: int, last: int, out: Path) -> float:
    """Pages ``first``..``last`` (1-based) into a new PDF the plain PyMuPDF way: open, insert_pdf, save."""
    import pymupdf

    started = time.perf_counter()
    with pymupdf.open(str(pdf)) as src, pymupdf.open() as doc:
        doc.insert_pdf(src, from_page=first - 1, to_page=last - 1)
        doc.save(str(out))
    return time.perf_counter() - started


def raw_clip(video: Path, start: float, seconds: float, out: Path) -> float:
    """``ffmpeg -ss S -i V -t T -c copy``: the clip by stream copy from the keyframe at or before S."""
    started = time.perf_counter()
    subprocess.run(["ffmpeg", "-hide_banner", "-nostdin", "-loglevel", "error", "-y", "-ss", f"{start:g}", "-i",
                    str(video), "-t", f"{seconds:g}", "-c", "copy", str(out)], check=True)
    return time.perf_counter() - started


def pdf_pages(path: str | Path) -> int:
    import pymupdf

    with pymupdf.open(str(path)) as doc:
        return doc.page_count


def media_duration(path: str | Path) -> float:
    out = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", str(path)],
                         capture_output=True, text=True, check=True).stdout
    return float(out.strip())


# --- map building -----------------------------------------------------------------------------------------------------

def fresh_store(data: Path, folder: Path):
    """A fresh SQLite store in ``data`` with ``folder`` indexed (not timed), and a CitationService on it."""
    from flows.citations.service import CitationService
    from flows.index.flow import run_index_job
    from flows.core.roots import Roots
    from store import jobs as store_jobs
    from store.engine import make_engine

    data.mkdir(parents=True)
    engine = make_engine(f"sqlite:///{data / 'assay.db'}")
    run_index_job(engine, job_id=store_jobs.create_job(engine, root=str(folder)), root=str(folder))
    return engine, CitationService(engine, Roots.of([str(folder)]), data)


def count_nodes(resource_map) -> int:
    return sum(1 for _ in resource_map.walk())


def build_maps(fig: dict, media: Media, data: Path) -> None:
    """Both maps built through CitationService.build_map, beside their raw limits; the maps stay in the store."""
    fig["toc"] = raw_toc(media.pdf)
    log.info("raw get_toc: %d entries in %.4f s", fig["toc"]["entries"], fig["toc"]["seconds"])
    engine, service = fresh_store(data, media.folder)
    best, outline = float("inf"), None
    for _ in range(TOC_REPEAT):  # each call rebuilds and replaces the map
        started = time.perf_counter()
        outline = service.build_map(str(media.pdf), strategy="outline")
        best = min(best, time.perf_counter() - started)
    fig["outline"] = {"seconds": best, "nodes": count_nodes(outline), "resource_id": outline.resource_id,
                      "origin": outline.metadata.get("origin")}
    log.info("build_map outline: %d nodes in %.3f s", fig["outline"]["nodes"], best)

    fig["scene_filter"] = raw_scenes(media.video)
    log.info("raw scene filter: %d cuts in %.1f s", fig["scene_filter"]["cuts"], fig["scene_filter"]["seconds"])
    started = time.perf_counter()
    scenes = service.build_map(str(media.video), strategy="scenes")
    fig["scenes"] = {"seconds": time.perf_counter() - started, "nodes": count_nodes(scenes),
                     "top_nodes": len(scenes.nodes), "resource_id": scenes.resource_id,
                     "origin": scenes.metadata.get("origin")}
    log.info("build_map scenes: %d nodes in %.1f s", fig["scenes"]["nodes"], fig["scenes"]["seconds"])
    engine.dispose()


# --- through an MCP client --------------------------------------------------------------------------------------------

async def _timed(samples: list[float], call) -> dict:
    started = time.perf_counter()
    out = await call()
    samples.append(time.perf_counter() - started)
    return out


def excerpt_ranges(pages: int, span: int, n: int) -> list[tuple[int, int]]:
    """``n`` different ``span``-page ranges spread over the document (the first ones start mid-document)."""
    starts = list(range(1, pages - span + 2, span))
    random.Random(3).shuffle(starts)
    return [(s, s + span - 1) for s in starts[:n]]


def clip_starts(duration: float, span: float, n: int) -> list[float]:
    """``n`` different clip starts spread over the video, 0.37 s past evenly spaced points (not on keyframes)."""
    room = duration - span - 1.0 - 0.37
    return [round(0.37 + (room * k / (n - 1) if n > 1 else room / 2), 2) for k in range(n)]


def length_label(seconds: float) -> str:
    return f"{seconds / 60:g}-minute" if seconds >= 120 else f"{seconds:g}-second"


async def _mcp_session(params, fig: dict, media: Media, scratch: Path, calls: int, clips: int) -> dict:
    from mcp import Client

    rng = random.Random(7)
    pdf_id, video_id = fig["outline"]["resource_id"], fig["scenes"]["resource_id"]
    out: dict = {}
    raw_dir = scratch / "raw"
    raw_dir.mkdir()
    async with Client(params) as client:
        out["resources"] = payload(await client.call_tool("listResources", {}))["resources"]
        structure = payload(await client.call_tool("getStructure", {"resource_id": pdf_id}))
        node_ids = [n["id"] for n in _walk(structure["nodes"])]
        out["structure_nodes"] = len(node_ids)
        payload(await client.call_tool("getStructure", {"resource_id": video_id}))

        ping: list[float] = []  # a tool call that does next to nothing (lists a two-file folder): the floor
        for _ in range(calls):
            payload(await _timed(ping, lambda: client.call_tool("list_collections", {"path": ""})))
        out["ping"] = ping
        lists: list[float] = []
        for _ in range(calls):
            await _timed(lists, lambda: client.call_tool("listResources", {}))
        out["listResources"] = lists
        structures: list[float] = []
        for _ in range(max(3, calls // 4)):
            result = await _timed(structures, lambda: client.call_tool("getStructure", {"resource_id": pdf_id}))
            payload(result)
        out["getStructure"] = structures
        checks: list[float] = []  # the SDK's client checks every answer against the tool's output schema
        for _ in range(max(3, calls // 20)):
            await _timed(checks, lambda: client.session.validate_tool_result("getStructure", result))
        out["getStructure_check"] = checks
        nodes: list[float] = []
        for _ in range(calls):
            node_id = rng.choice(node_ids)
            got = payload(await _timed(nodes, lambda: client.call_tool(
                "getNode", {"resource_id": pdf_id, "node_id": node_id})))  # noqa: B023 (awaited at once)
            assert got["id"] == node_id, got
        out["getNode"] = nodes
        virtual: list[float] = []
        for _ in range(calls):
            node_id = rng.choice(node_ids)
            got = payload(await _timed(virtual, lambda: client.call_tool(
                "resolve", {"resource_id": pdf_id, "node_id": node_id, "virtual": True})))  # noqa: B023
            assert got["output_path"] is None and got["node"]["id"] == node_id, got
        out["virtual"] = virtual
        log.info("MCP: ping p50 %.2f ms, listResources %.2f ms, getStructure %.2f ms, getNode %.2f ms, virtual "
                 "resolve %.2f ms", *(percentile(out[k], 50) * 1000 for k in
                                      ("ping", "listResources", "getStructure", "getNode", "virtual")))

        spec = media.spec
        started = time.perf_counter()  # the first physical resolves load the extraction code: one-time, apart
        payload(await client.call_tool("resolve", {"address": f"doc://{pdf_id}#pages={spec.pages}"}))
        payload(await client.call_tool("resolve", {"address": f"video://{video_id}#t=0-1"}))
        out["first_physical"] = time.perf_counter() - started
        span_pages = min(10, max(1, spec.pages // 6))
        span_t = 30.0 if spec.duration >= 120 else 4.0
        out["pdf"] = {"span": span_pages, "raw": [], "ours": [], "cached": [], "pages": [], "flags": []}
        ranges = excerpt_ranges(spec.pages, span_pages, clips)
        addresses = [f"doc://{pdf_id}#pages={a}-{b}" for a, b in ranges]
        for k, ((a, b), address) in enumerate(zip(ranges, addresses)):
            out["pdf"]["raw"].append(raw_excerpt(media.pdf, a, b, raw_dir / f"excerpt-{k}.pdf"))
            got = payload(await _timed(out["pdf"]["ours"], lambda: client.call_tool("resolve",
                                                                                      {"address": address})))  # noqa: B023
            out["pdf"]["flags"].append(bool(got.get("cached")))
            out["pdf"]["pages"].append(pdf_pages(got["output_path"]))
        log.info("PDF excerpts: ours p50 %.1f ms, raw %.1f ms", percentile(out["pdf"]["ours"], 50) * 1000,
                 percentile(out["pdf"]["raw"], 50) * 1000)
        out["video"] = {"span": span_t, "raw": [], "ours": [], "cached": [], "durations": [], "raw_durations": [],
                        "flags": []}
        video_addresses = []
        for k, start in enumerate(clip_starts(spec.duration, span_t, clips)):
            address = f"video://{video_id}#t={start:g}-{start + span_t:g}"
            video_addresses.append(address)
            raw_out = raw_dir / f"clip-{k}.mp4"
            out["video"]["raw"].append(raw_clip(media.video, start, span_t, raw_out))
            got = payload(await _timed(out["video"]["ours"], lambda: client.call_tool("resolve",
                                                                                        {"address": address})))  # noqa: B023
            out["video"]["flags"].append(bool(got.get("cached")))
            out["video"]["durations"].append(media_duration(got["output_path"]))
            out["video"]["raw_durations"].append(media_duration(raw_out))
        log.info("video clips: ours p50 %.1f ms, raw %.1f ms", percentile(out["video"]["ours"], 50) * 1000,
                 percentile(out["video"]["raw"], 50) * 1000)
        for kind, addrs in (("pdf", addresses), ("video", video_addresses)):
            again = []
            for address in addrs:
                got = payload(await _timed(out[kind]["cached"], lambda: client.call_tool("resolve",
                                                                                           {"address": address})))  # noqa: B023
                again.append(bool(got.get("cached")))
            out[kind]["cached_flags"] = again
        out["server_kb"] = hwm_kb(server_pid())
    return out


def _walk(nodes: list[dict]):
    for node in nodes:
        yield node
        yield from _walk(node.get("children") or [])


def mcp_section(fig: dict, media: Media, data: Path, scratch: Path, calls: int, clips: int) -> None:
    import anyio
    from mcp import StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_server.cli", "serve", "--root", str(media.folder), "--data-dir", str(data), "--no-prefect",
              "--log-level", "WARNING"],
        env=server_env(scratch), cwd=str(REPO))
    fig["mcp"] = anyio.run(_mcp_session, params, fig, media, scratch, calls, clips)


# --- the table --------------------------------------------------------------------------------------------------------

def machine_facts() -> str:
    import pymupdf

    ffmpeg = subprocess.run(["ffmpeg", "-version"], capture_output=True, text=True).stdout.split("\n")[0]
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30
    return (f"{os.cpu_count()} cores, {mem:.1f} GB RAM, {platform.system()} {platform.release()}; Python "
            f"{platform.python_version()}; SQLite {sqlite3.sqlite_version}; PyMuPDF {pymupdf.__version__}; "
            f"{' '.join(ffmpeg.split()[:3])}; load average at start {os.getloadavg()[0]:.2f}")


def p50_p95(samples: list[float]) -> str:
    return f"{ms(percentile(samples, 50))} / {ms(percentile(samples, 95))}"


def ratio_row(label: str, ours: list[float], raw: list[float], raw_label: str, goal: float | None) -> tuple:
    o, r = percentile(ours, 50), percentile(raw, 50)
    met = yes_no(o / r <= goal) if goal else "—"
    return (label, f"{ms(o)} / {ms(percentile(ours, 95))}", f"{raw_label}: {ms(r)} / {ms(percentile(raw, 95))}",
            f"{o / r:.2f}×", f"≤ {goal:g}×" if goal else "—", met)


def size(n: int) -> str:
    return mb(n) if n >= 1e6 else f"{n / 1e3:,.1f} kB"


def media_rows(fig: dict, spec: MediaSpec) -> list[tuple]:
    m = fig["media"]
    when = "this run" if m["generated_now"] else "an earlier run, reused"
    return [(f"media: {spec.pages}-page PDF, {spec.outline_entries}-entry nested outline (generated in {when})",
             secs(m.get("pdf_seconds", 0.0)), size(m["pdf_bytes"]), "—", "—", "—"),
            (f"media: {spec.duration} s {spec.size} video, {spec.segments} segments of {spec.segment_seconds} s, "
             f"keyframe every {spec.gop / spec.fps:g} s, libx264 ultrafast (generated in {when})",
             secs(m.get("video_seconds", 0.0)), size(m["video_bytes"]), "—", "—", "—")]


def map_rows(fig: dict) -> list[tuple]:
    if "outline" not in fig:
        return []
    o, t, s, f = fig["outline"], fig["toc"], fig["scenes"], fig["scene_filter"]
    return [
        (f"map: outline of the PDF, build_map(strategy outline), {o['nodes']} nodes (best of {TOC_REPEAT})",
         secs(o["seconds"]), f"pymupdf get_toc(), {t['entries']} entries: {secs(t['seconds'])}",
         f"{o['seconds'] / t['seconds']:.1f}×", "—", "—"),
        (f"map: scene cuts of the video, build_map(strategy scenes), {s['nodes']} nodes",
         secs(s["seconds"]), f"ffmpeg scene filter alone (gt(scene,{SCENE_THRESHOLD})), {f['cuts']} cuts: "
                             f"{secs(f['seconds'])}", f"{s['seconds'] / f['seconds']:.2f}×", "—", "—"),
    ]


def mcp_rows(fig: dict) -> list[tuple]:
    if "mcp" not in fig:
        return []
    m = fig["mcp"]
    n = len(m["listResources"])

    def ref_row(key: str, label: str, goal: float, goal_text: str) -> tuple:
        p50 = percentile(m[key], 50)
        ref_text, ref_s = REF["resolve" if key == "virtual" else key]
        return (label, p50_p95(m[key]), f"reference 003: {ref_text}", f"{ref_s / p50:.1f}× (reference / ours)",
                goal_text, yes_no(p50 < goal))

    pdf, video = m["pdf"], m["video"]
    rows = [
        (f"trivial tool call (list_collections of the two-file folder) p50 / p95 over MCP stdio ({n} calls; the "
         "transport's floor)", p50_p95(m["ping"]), "—", "—", "—", "—"),
        ref_row("listResources", f"listResources p50 / p95 ({len(m['resources'])} resources, {n} calls)", 0.010,
                "< 10 ms"),
        ref_row("getStructure", f"getStructure of the PDF's {m['structure_nodes']}-node map p50 / p95 "
                                f"({len(m['getStructure'])} calls)", 0.050, "< 50 ms"),
        ("  of which the client's check of the answer against getStructure's output schema (jsonschema, in "
         "the SDK's call_tool)", p50_p95(m["getStructure_check"]), "—", "—", "—", "—"),
        ref_row("getNode", f"getNode p50 / p95 (random nodes of that map, {n} calls)", 0.005, "< 5 ms"),
        ref_row("virtual", f"resolve virtual p50 / p95 (random nodes, {n} calls)", GOAL_VIRTUAL_S, "< 5 ms"),
        ("first physical resolves, one-time (a page and a 1-second clip: the extraction code loads; excluded below)",
         secs(m["first_physical"]), "—", "—", "—", "—"),
        ratio_row(f"resolve: {pdf['span']}-page excerpt of the {fig['spec']['pages']}-page PDF, new range each "
                  f"time, p50 / p95 ({len(pdf['ours'])} ranges)", pdf["ours"], pdf["raw"],
                  "pymupdf open + insert_pdf + save", GOAL_RATIO),
        ratio_row(f"resolve: {video['span']:g}-second clip of the {length_label(fig['spec']['duration'])} video "
                  f"(stream copy), new range each time, p50 / p95 ({len(video['ours'])} clips)", video["ours"],
                  video["raw"], f"ffmpeg -ss S -i V -t {video['span']:g} -c copy", GOAL_RATIO),
        ("resolve: the same excerpts again, from the cache, p50 / p95", p50_p95(pdf["cached"]), "—", "—",
         f"< {GOAL_CACHED_S * 1000:g} ms", yes_no(percentile(pdf["cached"], 50) < GOAL_CACHED_S)),
        ("resolve: the same clips again, from the cache, p50 / p95", p50_p95(video["cached"]), "—", "—",
         f"< {GOAL_CACHED_S * 1000:g} ms", yes_no(percentile(video["cached"], 50) < GOAL_CACHED_S)),
        ("clip lengths: ours / raw ffmpeg (mean; stream copy starts at the keyframe before S)",
         f"{sum(video['durations']) / len(video['durations']):.2f} s",
         f"{sum(video['raw_durations']) / len(video['raw_durations']):.2f} s", "—", "—", "—"),
        ("peak RSS of `assay serve`", mb(m["server_kb"] * 1024), "—", "—", "—", "—"),
    ]
    return rows


def check_rows(fig: dict) -> list[tuple]:
    """Rows that show only when something came out wrong (the smoke test looks for them)."""
    rows = []
    m = fig.get("mcp")
    if "outline" in fig and fig["outline"]["nodes"] != fig["toc"]["entries"]:
        rows.append(("**mismatch**: outline map nodes vs get_toc entries", fig["outline"]["nodes"],
                     fig["toc"]["entries"], "—", "—", "**no**"))
    if m:
        if any(p != m["pdf"]["span"] for p in m["pdf"]["pages"]):
            rows.append(("**mismatch**: excerpt page counts", m["pdf"]["pages"], m["pdf"]["span"], "—", "—",
                         "**no**"))
        if any(m["pdf"]["flags"] + m["video"]["flags"]):
            rows.append(("**mismatch**: a first resolve said cached", m["pdf"]["flags"] + m["video"]["flags"], "—",
                         "—", "—", "**no**"))
        if not all(m["pdf"]["cached_flags"] + m["video"]["cached_flags"]):
            rows.append(("**mismatch**: a second resolve was not cached",
                         m["pdf"]["cached_flags"] + m["video"]["cached_flags"], "—", "—", "—", "**no**"))
        if any(d < m["video"]["span"] - 0.1 for d in m["video"]["durations"]):
            rows.append(("**mismatch**: a clip shorter than asked", m["video"]["durations"], m["video"]["span"], "—",
                         "—", "**no**"))
    return rows


def rss_rows(fig: dict) -> list[tuple]:
    return [("peak RSS of the benchmark process", mb(fig["bench_rss_kb"] * 1024), "—", "—", "—", "—")]


def notes(fig: dict) -> list[str]:
    return [
        "Map building: in-process CitationService.build_map (probe, build, store write; what a `map` outcome and a "
        "first getStructure run) over a fresh SQLite store with the media folder indexed; the raw figures are the "
        "library call alone (get_toc: no node tree, no store) and ffmpeg's scene filter alone (no parsing, no store).",
        "MCP: `assay serve --no-prefect` over stdio, the Python SDK's client; times include the JSON round trip. "
        "Physical: each sample resolves a range not resolved before (a cache miss); its raw limit runs in this "
        "process on the same range just before it (warm page cache for both). Cached: the same addresses again.",
        f"Timings are noisy: {os.cpu_count()} cores shared with other work (load average at the end "
        f"{fig.get('load_end', 0):.2f}).",
    ]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="tiny media (seconds): the smoke test")
    ap.add_argument("--calls", type=int, default=None, help="calls per latency figure (default 200; quick 10)")
    ap.add_argument("--clips", type=int, default=None,
                    help="physical resolutions of each kind, each a new range (default 16; at most 30 excerpts: the "
                         "10-page ranges of 300 pages; quick 2)")
    ap.add_argument("--work", default=str(DEFAULT_WORK), help="media cache and scratch stores")
    ap.add_argument("--out", default=str(REPO / "bench" / "out" / "citations.md"))
    ap.add_argument("--json", default=None)
    ap.add_argument("--keep", action="store_true", help="keep the scratch store")
    args = ap.parse_args(argv)
    args.calls = args.calls or (10 if args.quick else 200)
    args.clips = args.clips or (2 if args.quick else 16)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    bench_logging("mcp")
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    spec = MediaSpec.quick() if args.quick else MediaSpec.full()
    fig: dict = {"machine": machine_facts(), "spec": {**spec.__dict__, "duration": spec.duration}}
    media = ensure_media(work, spec)
    fig["media"] = media.manifest
    scratch = Path(tempfile.mkdtemp(prefix="run-", dir=work))
    os.environ.update(PREFECT_HOME=str(scratch / "prefect"), PREFECT_SERVER_ANALYTICS_ENABLED="false",
                      PREFECT_LOGGING_LEVEL="WARNING", ASSAY_DATA_DIR=str(scratch / "data"), ASSAY_OCR="off",
                      ASSAY_DOCUMENTS_PLAN="off")
    try:
        data = scratch / "data"
        log.info("map building: %s, %s", media.pdf, media.video)
        build_maps(fig, media, data)
        log.info("MCP: assay serve over stdio, %d calls a figure, %d physical resolutions a kind", args.calls,
                 args.clips)
        mcp_section(fig, media, data, scratch, args.calls, args.clips)
        fig["load_end"] = os.getloadavg()[0]
        fig["bench_rss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    rows = media_rows(fig, spec) + map_rows(fig) + mcp_rows(fig) + check_rows(fig) + rss_rows(fig)
    table = render(fig["machine"], rows, notes(fig))
    publish(table, args.out, fig, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
