"""Generated media, good and bad, for the example corpus (examples/generate_corpus.py), the tests and the benchmarks:
the one place where photos, videos, audio, PDFs and other documents are made. Nothing is downloaded: photos come from
Pillow (with EXIF), HEIC from pillow-heif, PDFs from PyMuPDF, video and audio from the ffmpeg binary's lavfi sources,
DOCX from python-docx; the rest is written byte by byte. The same arguments make the same files.

Modules, each named for what it makes:

- ``files``: ``prepare`` (parent folders), ``atomic`` (write beside, then rename), text files, noise;
- ``images``: ``picture`` and ``camera_picture`` (drawn and photo-like), ``exif``, ``jpeg``, ``png``, ``heic``, an
  animated GIF, a multi-page TIFF, images of text;
- ``pdfs``: ``write_pdf`` (pages of placed lines, text boxes and pictures; outline, metadata, password) and the usual
  PDFs made with it;
- ``av``: the ffmpeg runner, ``video`` (testsrc + tone, chapters), ``scene_video`` (cuts at known times, a keyframe at
  each), ``audio``, ``audio_with_silences``, and ffprobe's ``keyframe_times`` and ``duration_of``;
- ``broken``: the files a reader must survive (truncated, corrupt, empty, a decompression bomb, a FIFO, hostile names);
- ``documents`` and ``citations``: the documents' and the citations' known sources (texts, outlines, headings, line
  ranges the tests check against).

The package itself re-exports the general makers (``from examples import mediagen as media``; ``media.jpeg(...)``).
Import it from the repository root (the tests and the benchmarks do; generate_corpus.py puts the root on sys.path).
"""

from __future__ import annotations

from .av import FFMPEG, HAVE_FFMPEG, MediaError, audio, duration_of, ffmpeg, keyframe_times, scene_video, video
from .broken import HOSTILE_NAMES, bomb_png, broken_pdf, corrupt_mp4, empty, fifo, truncated, truncated_jpeg
from .files import atomic, prepare, text
from .images import animated_gif, camera_picture, exif, heic, jpeg, multipage_tiff, picture, png
from .pdfs import encrypted_pdf, pdf, write_pdf

__all__ = ["FFMPEG", "HAVE_FFMPEG", "HOSTILE_NAMES", "MediaError", "animated_gif", "atomic", "audio", "bomb_png",
           "broken_pdf", "camera_picture", "corrupt_mp4", "duration_of", "empty", "encrypted_pdf", "exif", "ffmpeg",
           "fifo", "heic", "jpeg", "keyframe_times", "multipage_tiff", "pdf", "picture", "png", "prepare",
           "scene_video", "text", "truncated", "truncated_jpeg", "video", "write_pdf"]
