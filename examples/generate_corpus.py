"""Generate the example corpus: PDFs with outlines, Markdown and text notes, JPEGs with EXIF, short videos (one with
chapters), audio, and a few files whose names and dates make queries interesting.

    python examples/generate_corpus.py OUT_DIR [--force]

Everything is made locally (PyMuPDF, Pillow, the ffmpeg binary; the makers are examples/mediagen's, shared with the
tests and the benchmarks) and deterministically: the same names, contents and modification times on every run. A
marker file written last (``.corpus-complete``) records a finished corpus; a second run with the marker in place does
nothing unless ``--force`` is given. Progress is logged to stderr.
"""

from __future__ import annotations

import argparse
import calendar
import logging
import os
import random
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent  # run as a script, this folder is on sys.path, not the repository
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from examples.mediagen import av, files, images  # noqa: E402
from examples.mediagen.pdfs import Box, Line, write_pdf  # noqa: E402

log = logging.getLogger("generate_corpus")

VERSION = "1"
MARKER = ".corpus-complete"


class CorpusError(RuntimeError):
    """The corpus could not be generated (a tool is missing or failed)."""


def ts(date: str) -> int:
    """Unix seconds of ``YYYY-MM-DD HH:MM`` in UTC, for deterministic modification times."""
    day, _, clock = date.partition(" ")
    y, m, d = (int(p) for p in day.split("-"))
    hh, mm = (int(p) for p in (clock or "12:00").split(":"))
    return calendar.timegm((y, m, d, hh, mm, 0, 0, 0, 0))


# --- text -------------------------------------------------------------------------------------------------------

SOLAR = [
    "Helios Fields operated four solar farms in the northern valley during the year under review.",
    "Total generation reached 412 gigawatt hours, an increase of eleven percent over the previous year.",
    "The Kestrel Ridge site was connected to the regional grid in March after a delay caused by transformer supply.",
    "Panel degradation measured at the Marsh Lane array remained below the warranted half percent per year.",
    "Battery storage at the Oakmoor substation shifted an average of 38 megawatt hours per day into the evening peak.",
    "Maintenance costs fell as robotic cleaning replaced manual washing on the two largest sites.",
    "Revenue grew to 61 million euros, driven by higher wholesale prices in the winter months.",
    "The board approved a dividend of 0.42 euros per share and a buyback programme of five million euros.",
    "Community benefit funds supported twelve local projects, including a new roof for the village school.",
    "Risks for the coming year include curtailment by the grid operator and the price of replacement inverters.",
]
BIRDS = [
    "The alpine accentor nests in rock crevices above the tree line and is often seen near mountain huts.",
    "Wallcreepers flick their crimson wings while climbing vertical cliffs in search of spiders and insects.",
    "The golden eagle hunts marmots on open slopes and may range over two hundred square kilometres.",
    "Snowfinches gather in noisy flocks around ski stations in winter, feeding on crumbs left by visitors.",
    "Ptarmigan change from brown summer plumage to pure white in autumn, matching the first snow.",
    "The bearded vulture drops bones from a height onto rocks and then swallows the splinters.",
    "Ring ouzels resemble blackbirds but carry a pale crescent across the breast.",
    "Alpine choughs follow climbers to the summit and take food from an outstretched hand.",
    "Listen at dawn in June: the dawn chorus above two thousand metres is short but intense.",
    "Binoculars of eight times magnification are light enough for long walks and steady enough for cliffs.",
]
BREAD = [
    "A sourdough starter is a culture of wild yeast and lactic acid bacteria kept alive with flour and water.",
    "Feed the starter twice a day at room temperature, discarding all but a spoonful before each feed.",
    "Autolyse the flour and water for an hour before adding salt and levain; the dough becomes extensible.",
    "Stretch and fold the dough every half hour during the first two hours of bulk fermentation.",
    "The dough is ready to shape when it has grown by half and shows bubbles along the sides of the tub.",
    "Retard the shaped loaf in the refrigerator overnight for a more sour flavour and an easier score.",
    "Bake in a preheated cast iron pot at 250 degrees with the lid on for twenty minutes, then uncovered.",
    "An internal temperature of 96 degrees means the crumb is set; let the loaf cool before cutting.",
    "Rye flour ferments faster than wheat and needs less water than its weight would suggest.",
    "A dense crumb usually means under-fermentation; large irregular holes mean a strong starter.",
]


def paragraphs(sentences: list[str], rng: random.Random, count: int) -> list[str]:
    """``count`` paragraphs of four to six sentences drawn (deterministically) from ``sentences``."""
    return [" ".join(rng.sample(sentences, rng.randint(4, 6))) for _ in range(count)]


# --- PDFs -------------------------------------------------------------------------------------------------------

PDFS = {
    # path: (title, author, sentences, [(level, chapter title)], one chapter per page, mtime)
    "documents/reports/annual_report_2023.pdf": (
        "Helios Fields Annual Report 2023", "Helios Fields Ltd", SOLAR,
        [(1, "Letter from the chair"), (1, "Operations"), (2, "Generation by site"), (2, "Storage"),
         (1, "Financial statements"), (1, "Outlook")], "2024-03-14 09:30"),
    "documents/reports/annual_report_2024.pdf": (
        "Helios Fields Annual Report 2024", "Helios Fields Ltd", SOLAR,
        [(1, "Letter from the chair"), (1, "Operations"), (2, "Generation by site"), (1, "Financial statements"),
         (2, "Balance sheet"), (1, "Risks"), (1, "Outlook")], "2025-03-12 10:00"),
    "documents/guides/alpine_birds_field_guide.pdf": (
        "A Field Guide to Alpine Birds", "M. Keller", BIRDS,
        [(1, "Introduction"), (1, "Cliffs and crags"), (2, "Wallcreeper"), (2, "Alpine chough"),
         (1, "Open slopes"), (2, "Ptarmigan"), (1, "Raptors"), (1, "Equipment")], "2023-06-02 18:45"),
    "documents/recipes/sourdough_handbook.pdf": (
        "The Sourdough Handbook", "A. Baker", BREAD,
        [(1, "The starter"), (1, "Mixing"), (1, "Bulk fermentation"), (1, "Shaping and proofing"),
         (1, "Baking"), (1, "Troubleshooting")], "2022-11-20 08:15"),
}


def make_pdf(path: Path, title: str, author: str, sentences: list[str], chapters: list[tuple[int, str]],
             rng: random.Random) -> None:
    """One A4 page per chapter: the title as a running head, the chapter's heading, four paragraphs, the page number;
    an outline of the chapters."""
    pages = [[Line(title, (56, 70), 9, color=(0.4, 0.4, 0.4)), Line(heading, (56, 110), 18 if level == 1 else 15),
              Box("\n\n".join(paragraphs(sentences, rng, 4)), lineheight=1.4), Line(str(number), (290, 810), 9)]
             for number, (level, heading) in enumerate(chapters, start=1)]
    toc = [[level, heading, number] for number, (level, heading) in enumerate(chapters, start=1)]
    write_pdf(path, pages, toc=toc, compact=True, metadata={
        "title": title, "author": author, "subject": title, "creator": "assay example corpus", "producer": "PyMuPDF",
        "creationDate": "D:20240101000000Z", "modDate": "D:20240101000000Z"})


# --- photos -----------------------------------------------------------------------------------------------------

PHOTOS = {
    # path: (camera make, model, DateTimeOriginal, (lat, lon) or None, size, palette seed)
    "photos/2023/alps/IMG_0412.jpg": ("Canon", "Canon EOS R6", "2023:07:14 06:52:10", (46.5586, 7.9806), (800, 533), 1),
    "photos/2023/alps/IMG_0413.jpg": ("Canon", "Canon EOS R6", "2023:07:14 07:03:44", (46.5590, 7.9822), (800, 533), 2),
    "photos/2023/alps/IMG_0420.jpg": ("Canon", "Canon EOS R6", "2023:07:15 13:20:05", (46.5772, 8.0054), (533, 800), 3),
    "photos/2024/beach/DSC_1001.jpg": ("NIKON CORPORATION", "NIKON Z 6", "2024:08:02 18:41:00", (43.2965, 5.3698),
                                       (800, 533), 4),
    "photos/2024/beach/DSC_1002.jpg": ("NIKON CORPORATION", "NIKON Z 6", "2024:08:02 19:05:31", (43.2970, 5.3702),
                                       (800, 533), 5),
    "photos/2024/family/birthday cake.jpg": ("Apple", "iPhone 13", "2024:11:09 16:12:47", None, (600, 600), 6),
    "photos/scans/old_postcard_1987.jpg": ("Epson", "Perfection V39", "1987:05:01 00:00:00", None, (640, 420), 7),
}


def make_photo(path: Path, make: str, model: str, taken: str, gps: tuple[float, float] | None,
               size: tuple[int, int], seed: int) -> None:
    exif = images.exif(make, model, taken, gps=gps, software="assay example corpus", digitized=True)
    images.picture(size, seed).save(path, "JPEG", quality=85, exif=exif)


# --- video and audio --------------------------------------------------------------------------------------------

LECTURE_CHAPTERS = [(0, 4000, "Introduction"), (4000, 9000, "The experiment"), (9000, 12000, "Conclusions")]


def make_video(path: Path, *, seconds: int, size: str, tone: int, title: str,
               chapters: list[tuple[int, int, str]] | None = None) -> None:
    """testsrc and a tone, H.264 (veryfast, crf 30, one thread: the same bytes everywhere) + AAC; chapters in ms."""
    av.video(path, seconds=seconds, size=size, tone=tone, title=title, keyframe_every=None, preset="veryfast",
             crf=30, threads=1, chapters=[(start / 1000, end / 1000, name) for start, end, name in chapters or ()])


# --- notes ------------------------------------------------------------------------------------------------------

NOTES = {
    "documents/notes/meeting-2024-01-15.md": ("2024-01-15 17:00", """# Project sync, 15 January 2024

## Attendees
Ana, Ben, Chloe

## Decisions
- Move the photo archive to the new NAS before March.
- Keep the annual reports under `documents/reports`, one PDF per year.

## Action items
- Ben: index the `photos/` folder and group the 2023 trip into a resource set.
- Chloe: find every video longer than ten seconds.
"""),
    "documents/notes/reading-list.md": ("2023-09-03 21:10", """# Reading list

## Birds
- *A Field Guide to Alpine Birds* (in `documents/guides`) — chapters on the wallcreeper and the ptarmigan.

## Baking
- *The Sourdough Handbook* — the troubleshooting chapter explains a dense crumb.

## Energy
- Helios Fields annual reports 2023 and 2024: compare generation by site.
"""),
    "documents/notes/trip-plan-alps.md": ("2023-06-20 08:00", """# Alps trip, July 2023

## Route
Grindelwald to the First cable car, then on foot to Bachalpsee.

## Packing
- binoculars (8x42)
- rain jacket
- camera and two batteries

## Birds to look for
Alpine chough, wallcreeper, golden eagle.
"""),
    "documents/todo.txt": ("2024-12-30 23:59", "renew passport\nback up photos/2024\nsort the scans folder\n"
                                               "delete draft copies in documents/drafts\n"),
    "documents/drafts/report draft (copy).txt": ("2024-02-01 11:11", "DRAFT - do not circulate.\n\n"
                                                 "Generation rose again this year. See annual_report_2024.pdf.\n"),
    "documents/drafts/report draft.txt": ("2024-01-31 16:45", "DRAFT\n\nGeneration rose again this year.\n"),
    "documents/recipes/café-menü.md": ("2022-12-24 10:00", "# Café menü\n\n## Bread\nSourdough, rye.\n\n"
                                                            "## Drinks\nEspresso, cocoa.\n"),
    "documents/.hidden-notes.txt": ("2021-01-01 00:00", "a hidden file: most listings still show it\n"),
    "README.txt": ("2025-01-01 09:00", "The assay example corpus. See examples/README.md in the assay repository.\n"),
}

MEDIA = {
    # path: (kind, mtime)
    "videos/lecture_with_chapters.mp4": ("lecture", "2024-05-10 14:00"),
    "videos/2024/test_pattern_short.mp4": ("short", "2024-09-01 12:30"),
    "audio/tone_440hz.wav": ("wav", "2023-02-02 02:02"),
    "audio/voice-memo-2024-03-08.mp3": ("mp3", "2024-03-08 07:45"),
}

BLOBS = {
    # path: (bytes of deterministic noise, mtime): the biggest files, for size queries
    "archive/old-laptop-disk-2021.img": (2_000_000, "2021-08-30 22:10"),
    "archive/photos-2019-backup.zip.part": (300_000, "2019-12-31 23:00"),
}

EMPTY_DIRS = ["inbox", "inbox-sort", "photos/2025"]


def expected_files() -> list[str]:
    """Relative paths of every file the generator writes (the marker included), sorted."""
    return sorted([*PDFS, *PHOTOS, *NOTES, *MEDIA, *BLOBS, MARKER])


def is_complete(out: Path) -> bool:
    marker = out / MARKER
    return marker.is_file() and marker.read_text().strip() == f"assay example corpus v{VERSION}"


def generate(out: Path, *, force: bool = False) -> Path:
    """Write the corpus into ``out`` (created if missing; files of ours are overwritten, nothing else is touched)."""
    out = Path(out).resolve()
    if not force and is_complete(out):
        log.info("corpus in %s is complete (v%s); nothing to do (--force regenerates)", out, VERSION)
        return out
    if shutil.which("ffmpeg") is None:
        raise CorpusError("ffmpeg is not installed (apt-get install ffmpeg, or run ./scripts/setup)")
    (out / MARKER).unlink(missing_ok=True)
    mtimes: dict[str, int] = {}

    def target(rel: str) -> Path:
        p = out / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    rng = random.Random(20240101)
    for rel, (title, author, sentences, chapters, when) in PDFS.items():
        log.info("pdf   %s (%d pages)", rel, len(chapters))
        make_pdf(target(rel), title, author, sentences, chapters, rng)
        mtimes[rel] = ts(when)
    for rel, (make, model, taken, gps, size, seed) in PHOTOS.items():
        log.info("photo %s (%s %s, %s)", rel, make, model, taken)
        make_photo(target(rel), make, model, taken, gps, size, seed)
        day, clock = taken.split(" ")
        mtimes[rel] = ts(f"{day.replace(':', '-')} {clock[:5]}") if not rel.startswith("photos/scans") \
            else ts("2024-01-20 20:20")
    for rel, (when, text) in NOTES.items():
        log.info("note  %s", rel)
        target(rel).write_text(text, encoding="utf-8")
        mtimes[rel] = ts(when)
    for rel, (kind, when) in MEDIA.items():
        log.info("media %s", rel)
        p = target(rel)
        if kind == "lecture":
            make_video(p, seconds=12, size="320x240", tone=440, title="A short lecture",
                       chapters=LECTURE_CHAPTERS)
        elif kind == "short":
            make_video(p, seconds=5, size="256x144", tone=660, title="Test pattern")
        elif kind == "wav":  # 16-bit PCM
            av.audio(p, seconds=3, tone=440, sample_rate=22050, channels=1, title="A 440 Hz tone", artist=None)
        else:  # LAME
            av.audio(p, seconds=4, tone=523, sample_rate=22050, channels=1, bitrate="32k", title="Voice memo",
                     artist=None)
        mtimes[rel] = ts(when)
    for rel, (size, when) in BLOBS.items():
        log.info("blob  %s (%d bytes)", rel, size)
        files.noise(target(rel), size, seed=rel)
        mtimes[rel] = ts(when)
    for rel in EMPTY_DIRS:
        (out / rel).mkdir(parents=True, exist_ok=True)
    for rel, when in mtimes.items():
        os.utime(out / rel, (when, when))
    # folders: the newest time inside them (deepest first), so folder dates are deterministic too
    folders = sorted({out, *(p for p in out.rglob("*") if p.is_dir())}, key=lambda p: len(p.parts), reverse=True)
    for folder in folders:
        inside = [c.stat().st_mtime for c in folder.iterdir()] or [ts("2023-01-01 00:00")]
        stamp = max(inside)
        os.utime(folder, (stamp, stamp))
    marker = out / MARKER
    marker.write_text(f"assay example corpus v{VERSION}\n")
    os.utime(marker, (ts("2025-01-01 09:00"),) * 2)
    os.utime(out, (ts("2025-03-12 10:00"),) * 2)
    total = sum((out / rel).stat().st_size for rel in expected_files())
    log.info("corpus ready in %s: %d files, %.1f MB", out, len(expected_files()), total / 1e6)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", help="where to write the corpus (created if missing)")
    parser.add_argument("--force", action="store_true", help="regenerate even if the corpus is complete")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s: %(message)s")
    try:
        generate(Path(args.out_dir), force=args.force)
    except (CorpusError, av.MediaError) as exc:
        log.error("%s", exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
