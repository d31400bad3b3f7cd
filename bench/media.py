"""The classification benchmark's corpus: photos with EXIF, videos, PDFs and one long video, generated once and reused.

    corpus = ensure_corpus(Path("/tmp/assay-bench-classify"), images=500, videos=20, pdfs=50)

Layout under the work dir (a folder per corpus spec, so a smaller or larger run never mixes its files with another's,
and a plan whose source is one of these folders sees exactly the corpus):

- ``corpus-<I>i-<V>v-<P>p[-quick]/images/img-0000-4000x3000.jpg``: camera-sized JPEGs (2-12 MP; quick: 0.3-1 MP)
  with EXIF (make, model, lens, date taken, GPS; every fifth one rotated, Orientation 6), of smooth colour blobs with
  a fine grain so they weigh what photos weigh (3-4 bits a pixel at quality 90, ~3 MB at 8 MP);
- ``.../videos/vid-00-35s-1280x720.mp4``: H.264 ``testsrc`` with an AAC tone, 10-60 s (quick: 2-3 s), 720p and 360p
  alternately, a keyframe a second (as cameras write them), libx264 ultrafast;
- ``.../pdfs/doc-00-12p.pdf``: PyMuPDF documents of 1-40 pages with text, metadata and an outline;
- ``long-<S>s-720p/timeline.mp4``: the timeline benchmark's video (600 s at 1280x720, 25 fps; quick: 20 s), kept
  apart so it is not part of the corpus runs.

Every file is written beside its final name and renamed, so a file that exists is complete: an interrupted generation
resumes where it stopped. Generation runs on every core (a process per file); nothing is downloaded. The makers are
examples/mediagen's (shared with the tests and the example corpus); this module says which files the corpus holds.
"""

from __future__ import annotations

import logging
import os
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from examples.mediagen import av, images, pdfs  # noqa: E402
from examples.mediagen.files import atomic  # noqa: E402

log = logging.getLogger("bench.media")

# (width, height) of common camera sensors, 2.1 to 12 MP; portrait ones too
PHOTO_SIZES = [(1920, 1080), (2048, 1536), (2592, 1944), (3264, 2448), (3000, 4000), (4000, 3000), (4032, 3024),
               (3024, 4032), (3840, 2160), (2304, 1728)]
QUICK_PHOTO_SIZES = [(640, 480), (800, 600), (1024, 768), (768, 1024)]
CAMERAS = [("FUJIFILM", "X-T4", "XF16-80mmF4 R OIS WR"), ("Canon", "Canon EOS R6", "RF24-105mm F4 L IS USM"),
           ("SONY", "ILCE-7M3", "FE 24-70mm F2.8 GM"), ("Apple", "iPhone 13 Pro", "iPhone 13 Pro back camera")]
LONG_SIZE = "1280x720"


@dataclass
class Corpus:
    """The generated files, by kind (absolute paths), and the folders that hold them."""

    root: Path  # corpus-...: images/, videos/, pdfs/
    images: list[Path] = field(default_factory=list)
    videos: list[Path] = field(default_factory=list)
    pdfs: list[Path] = field(default_factory=list)
    long_video: Path | None = None
    long_seconds: int = 0
    generated_s: float = 0.0  # seconds spent generating missing files in this call (0 when all were there)

    @property
    def files(self) -> list[Path]:
        return [*self.images, *self.videos, *self.pdfs]

    def bytes(self, paths: list[Path] | None = None) -> int:
        return sum(p.stat().st_size for p in (self.files if paths is None else paths))


def _exif(i: int):
    """Photo ``i``'s EXIF: one of four cameras with its lens, a date taken, ISO, GPS in the Alps (no altitude);
    every fifth photo rotated (Orientation 6)."""
    rng = random.Random(i)
    make, model, lens = CAMERAS[i % len(CAMERAS)]
    taken = f"20{18 + i % 7}:{1 + i % 12:02d}:{1 + i % 28:02d} {8 + i % 12:02d}:{i % 60:02d}:{(7 * i) % 60:02d}"
    gps = (45.0 + rng.random() * 3, 6.0 + rng.random() * 4)
    return images.exif(make, model, taken, gps=gps, orientation=6 if i % 5 == 4 else None, lens=lens,
                       iso=100 * (1 + i % 32))


def photo(path: Path, size: tuple[int, int], i: int) -> Path:
    """A photo-like JPEG of ``size`` with EXIF (``images.camera_picture``: about a camera JPEG's bits per pixel)."""
    return atomic(path, lambda tmp: images.camera_picture(size, i).save(tmp, "JPEG", quality=90, exif=_exif(i)))


def video(path: Path, seconds: int, size: str) -> Path:
    """An H.264 MP4 of ``testsrc`` with a tone, a keyframe a second."""
    return atomic(path, lambda tmp: av.video(tmp, seconds=seconds, size=size, rate=25, audio=True, title=path.stem))


def pdf(path: Path, pages: int, i: int) -> Path:
    return atomic(path, lambda tmp: pdfs.pdf(tmp, pages=pages, title=f"Report {i}", author=f"Author {i % 7}",
                                             subject="benchmark", keywords="assay, bench", outline=True))


def _make(job: tuple) -> str:
    kind, path, *args = job
    {"photo": photo, "video": video, "pdf": pdf}[kind](Path(path), *args)
    return path


def corpus_dir(work: Path, images: int, videos: int, pdfs: int, quick: bool) -> Path:
    return work / f"corpus-{images}i-{videos}v-{pdfs}p{'-quick' if quick else ''}"


def plan_corpus(work: Path, *, images: int, videos: int, pdfs: int, quick: bool = False,
                long_seconds: int | None = 600) -> tuple[Corpus, list[tuple]]:
    """The corpus's file names (deterministic from the counts) and the jobs that would make the missing ones."""
    root = corpus_dir(work, images, videos, pdfs, quick)
    corpus = Corpus(root=root)
    jobs: list[tuple] = []
    sizes = QUICK_PHOTO_SIZES if quick else PHOTO_SIZES
    for i in range(images):
        w, h = sizes[random.Random(1000 + i).randrange(len(sizes))]
        p = root / "images" / f"img-{i:04d}-{w}x{h}.jpg"
        corpus.images.append(p)
        jobs.append(("photo", str(p), (w, h), i))
    for i in range(videos):
        seconds = 2 + i % 2 if quick else 10 + (i * 50) // max(1, videos - 1)  # 10 ... 60 s, evenly
        size = "320x240" if quick else ("1280x720" if i % 2 == 0 else "640x360")
        p = root / "videos" / f"vid-{i:02d}-{seconds}s-{size}.mp4"
        corpus.videos.append(p)
        jobs.append(("video", str(p), seconds, size))
    for i in range(pdfs):
        pages = 1 + (i * 7) % 40
        p = root / "pdfs" / f"doc-{i:02d}-{pages}p.pdf"
        corpus.pdfs.append(p)
        jobs.append(("pdf", str(p), pages, i))
    if long_seconds:
        corpus.long_seconds = long_seconds
        corpus.long_video = work / f"long-{long_seconds}s-720p" / "timeline.mp4"
        jobs.insert(0, ("video", str(corpus.long_video), long_seconds, LONG_SIZE))  # the longest first
    return corpus, [j for j in jobs if not Path(j[1]).exists()]


def ensure_corpus(work: Path, *, images: int, videos: int, pdfs: int, quick: bool = False,
                  long_seconds: int | None = 600, workers: int | None = None) -> Corpus:
    """The corpus under ``work``, generating the files that are missing (on every core) and reusing the rest."""
    corpus, missing = plan_corpus(work, images=images, videos=videos, pdfs=pdfs, quick=quick,
                                  long_seconds=long_seconds)
    if missing:
        log.info("generating %d corpus files under %s (once; later runs reuse them)", len(missing), work)
        started = time.perf_counter()
        import multiprocessing

        with ProcessPoolExecutor(max_workers=workers or os.cpu_count() or 1,
                                 mp_context=multiprocessing.get_context("spawn")) as pool:
            for n, _ in enumerate(pool.map(_make, missing, chunksize=1), 1):
                if n % 50 == 0 or n == len(missing):
                    log.info("generated %d/%d", n, len(missing))
        corpus.generated_s = time.perf_counter() - started
    return corpus


if __name__ == "__main__":
    import argparse

    p = argparse.ArgumentParser(prog="bench/media.py", description="generate the classification benchmark's corpus")
    p.add_argument("--work", default="/tmp/assay-bench-classify")
    p.add_argument("--images", type=int, default=500)
    p.add_argument("--videos", type=int, default=20)
    p.add_argument("--pdfs", type=int, default=50)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s: %(message)s")
    c = ensure_corpus(Path(args.work), images=args.images, videos=args.videos, pdfs=args.pdfs, quick=args.quick,
                      long_seconds=20 if args.quick else 600)
    print(f"{c.root}: {len(c.images)} images, {len(c.videos)} videos, {len(c.pdfs)} PDFs, "
          f"{c.bytes() / 1e6:.0f} MB; long video {c.long_video}; generated in {c.generated_s:.1f} s")
