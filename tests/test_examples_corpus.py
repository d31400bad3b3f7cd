"""The example corpus (examples/generate_corpus.py) is real media: PDFs with outlines, JPEGs with EXIF, videos with the
streams, durations and chapters they claim, deterministic dates; and assay indexes all of it."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from flows.documents.service import builtin_plan
from mcp_server.config import Settings
from tests.conftest import call, index_sync

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "examples" / "generate_corpus.py"

pytestmark = pytest.mark.skipif(shutil.which("ffmpeg") is None or shutil.which("ffprobe") is None,
                                reason="ffmpeg/ffprobe are not installed (./scripts/setup installs them)")


def _load_generator():
    spec = importlib.util.spec_from_file_location("generate_corpus", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("generate_corpus", module)
    spec.loader.exec_module(module)
    return module


gen = _load_generator()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """The corpus, generated once for this module by running the script as `./scripts/run` does."""
    out = tmp_path_factory.mktemp("example") / "corpus"
    done = subprocess.run([sys.executable, str(SCRIPT), str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return out


def ffprobe(path: Path) -> dict:
    done = subprocess.run(["ffprobe", "-v", "error", "-show_format", "-show_streams", "-show_chapters", "-of", "json",
                           str(path)], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_the_corpus_holds_exactly_the_listed_files_and_folders(corpus):
    files = sorted(p.relative_to(corpus).as_posix() for p in corpus.rglob("*") if p.is_file())
    assert files == gen.expected_files()
    assert len(files) >= 25
    for folder in ("documents", "photos", "videos", "audio", *gen.EMPTY_DIRS):
        assert (corpus / folder).is_dir()
    assert all(next((corpus / d).iterdir(), None) is None for d in gen.EMPTY_DIRS)
    total = sum((corpus / f).stat().st_size for f in files)
    assert 500_000 < total < 10_000_000  # a few MB


def test_a_second_run_finds_the_marker_and_changes_nothing(corpus):
    before = {p: p.stat().st_mtime_ns for p in corpus.rglob("*")}
    done = subprocess.run([sys.executable, str(SCRIPT), str(corpus)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    assert "nothing to do" in done.stderr
    assert {p: p.stat().st_mtime_ns for p in corpus.rglob("*")} == before


def test_an_interrupted_run_is_completed_to_the_same_bytes_and_dates(corpus, tmp_path):
    out = tmp_path / "corpus"
    (out / "photos").mkdir(parents=True)
    (out / "photos" / "IMG_stray.jpg").write_bytes(b"not ours")  # something of the user's: left alone
    (out / "documents").mkdir()
    (out / "documents" / "todo.txt").write_text("half writ")  # a file of ours cut short, no marker
    assert not gen.is_complete(out)
    gen.generate(out)
    assert gen.is_complete(out)
    assert (out / "photos" / "IMG_stray.jpg").read_bytes() == b"not ours"
    for rel in gen.expected_files():
        assert (out / rel).read_bytes() == (corpus / rel).read_bytes(), rel
        assert (out / rel).stat().st_mtime == (corpus / rel).stat().st_mtime, rel


@pytest.mark.parametrize("rel", sorted(gen.PDFS))
def test_pdfs_open_with_their_outline_title_and_text(corpus, rel):
    import pymupdf

    title, author, _sentences, chapters, _when = gen.PDFS[rel]
    with pymupdf.open(corpus / rel) as doc:
        assert doc.page_count == len(chapters) >= 5
        assert doc.get_toc() == [[level, heading, page] for page, (level, heading) in enumerate(chapters, start=1)]
        assert doc.metadata["title"] == title and doc.metadata["author"] == author
        for page, (_level, heading) in zip(doc, chapters):
            text = page.get_text()
            assert heading in text
            assert len(text.split()) > 150  # real paragraphs, not a stub


@pytest.mark.parametrize("rel", sorted(gen.PHOTOS))
def test_photos_carry_camera_and_capture_time_in_exif(corpus, rel):
    from PIL import Image
    from PIL.ExifTags import GPS, IFD, Base

    make, model, taken, gps, size, _seed = gen.PHOTOS[rel]
    with Image.open(corpus / rel) as img:
        assert img.format == "JPEG" and img.size == size
        exif = img.getexif()
    assert exif[Base.Make] == make and exif[Base.Model] == model
    assert exif.get_ifd(IFD.Exif)[Base.DateTimeOriginal] == taken
    info = exif.get_ifd(IFD.GPSInfo)
    if gps is None:
        assert not info
    else:
        d, m, s = (float(v) for v in info[GPS.GPSLatitude])
        assert d + m / 60 + s / 3600 == pytest.approx(gps[0], abs=1e-4)
        assert info[GPS.GPSLatitudeRef] == "N" and info[GPS.GPSLongitudeRef] == "E"


def test_the_lecture_video_has_video_audio_and_its_chapters(corpus):
    probe = ffprobe(corpus / "videos/lecture_with_chapters.mp4")
    assert float(probe["format"]["duration"]) == pytest.approx(12, abs=0.2)
    kinds = [s["codec_type"] for s in probe["streams"]]
    assert "video" in kinds and "audio" in kinds
    video = next(s for s in probe["streams"] if s["codec_type"] == "video")
    assert (video["width"], video["height"]) == (320, 240)
    chapters = [(float(c["start_time"]), float(c["end_time"]), c["tags"]["title"]) for c in probe["chapters"]]
    assert chapters == [(s / 1000, e / 1000, t) for s, e, t in gen.LECTURE_CHAPTERS]


def test_the_short_video_has_no_chapters(corpus):
    probe = ffprobe(corpus / "videos/2024/test_pattern_short.mp4")
    assert float(probe["format"]["duration"]) == pytest.approx(5, abs=0.2)
    assert sorted(s["codec_type"] for s in probe["streams"]) == ["audio", "video"]
    assert probe["chapters"] == []


@pytest.mark.parametrize("rel, codec, seconds", [("audio/tone_440hz.wav", "pcm_s16le", 3),
                                                 ("audio/voice-memo-2024-03-08.mp3", "mp3", 4)])
def test_audio_files_are_tones_of_the_stated_length(corpus, rel, codec, seconds):
    probe = ffprobe(corpus / rel)
    (stream,) = probe["streams"]
    assert stream["codec_name"] == codec
    assert float(probe["format"]["duration"]) == pytest.approx(seconds, abs=0.2)


@pytest.mark.parametrize("rel, when", [("documents/reports/annual_report_2023.pdf", "2024-03-14 09:30"),
                                       ("photos/2023/alps/IMG_0412.jpg", "2023-07-14 06:52"),
                                       ("archive/old-laptop-disk-2021.img", "2021-08-30 22:10"),
                                       ("documents/drafts/report draft (copy).txt", "2024-02-01 11:11")])
def test_modification_times_are_fixed(corpus, rel, when):
    assert (corpus / rel).stat().st_mtime == gen.ts(when)


def test_folder_times_are_the_newest_time_inside(corpus):
    alps = corpus / "photos/2023/alps"
    assert alps.stat().st_mtime == max(p.stat().st_mtime for p in alps.iterdir()) == gen.ts("2023-07-15 13:20")


# --- indexed by assay -------------------------------------------------------------------------------------------

@pytest.fixture
def settings(request, store_backend: str, corpus: Path, data_dir: Path) -> Settings:
    """Overrides conftest's: the app (and its client) may touch the corpus; SQLite and PostgreSQL stores alike."""
    url = request.getfixturevalue("pg_database") if store_backend == "postgresql" else None
    return Settings(data_dir=data_dir, roots=[str(corpus)], use_prefect=False, database_url=url)


def test_indexing_the_corpus_counts_every_file_folder_and_byte(app, corpus):
    result = index_sync(app, corpus)
    files = gen.expected_files()
    folders = {Path(f).parent.as_posix() for f in files} | set(gen.EMPTY_DIRS)
    folders |= {p.as_posix() for f in folders for p in Path(f).parents}  # every ancestor, "." being the root
    assert result["status"] == "completed" and result["errors"] == 0 and result["issues"] == []
    assert result["files"] == len(files)
    assert result["directories"] == len(folders | {"."})
    assert result["totalSize"] == sum((corpus / f).stat().st_size for f in files)


@pytest.mark.parametrize("rel, media_type", [("photos/2024/family/birthday cake.jpg", "image"),
                                             ("videos/lecture_with_chapters.mp4", "video"),
                                             ("audio/voice-memo-2024-03-08.mp3", "audio"),
                                             ("documents/guides/alpine_birds_field_guide.pdf", "document")])
async def test_indexed_media_is_recognised_by_type(app, client, corpus, rel, media_type):
    index_sync(app, corpus)
    info = await call(client, "inspect", {"path": str(corpus / rel)})
    assert info["mediaType"] == media_type
    assert info["size"] == (corpus / rel).stat().st_size


async def test_navigating_the_corpus_lists_the_biggest_folder_first(app, client, corpus):
    index_sync(app, corpus)
    page = await call(client, "navigate", {"path": str(corpus), "sort": "size", "desc": True})
    names = [e["name"] for e in page["entries"]]
    assert names[0] == "archive"  # the 2 MB disk image
    assert {"documents", "photos", "videos", "audio", "inbox", "README.txt"} <= set(names)
    assert os.fspath(corpus) == page["path"]


def example_calls() -> list[tuple[str, dict, dict | None]]:
    """(tool, arguments, expected fields or None) for each `→` line of examples/README.md."""
    lines = (ROOT / "examples" / "README.md").read_text(encoding="utf-8").splitlines()
    steps = []
    for i, line in enumerate(lines):
        if m := re.match(r"^→ ([\w-]+) (\{.*\})$", line):
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            expected = json.loads(nxt.removeprefix("← ")) if nxt.startswith("← ") else None
            steps.append((m.group(1), json.loads(m.group(2)), expected))
    return steps


async def test_the_calls_in_the_examples_readme_answer_as_shown(app, client, corpus):
    from tests.test_readme import _contains, _swap

    steps = example_calls()
    assert len(steps) >= 15 and sum(expected is not None for _, _, expected in steps) >= 10
    index_sync(app, corpus)  # as `./scripts/run --index` does at start
    plan = builtin_plan(app.roots, explicit=True)  # and the built-in documents plan, as the server does at start
    app.plans.save(plan, create=True)
    assert app.plans.execute(plan, wait=True)["status"] in ("success", "partial")
    for tool, args, expected in steps:
        result = await call(client, tool, _swap(args, "$C", str(corpus)))
        if expected is not None:
            _contains(_swap(result, str(corpus), "$C"), expected, tool)
