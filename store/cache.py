"""The content-addressed file cache under a data dir: ``<data dir>/cache/ab/cd/<xxh3-128 of the bytes>.<ext>``.

A file's name is the hash of its bytes, so identical thumbnails are stored once, a file is never rewritten in place
(readers never see half a file: it is written beside and renamed), and HTTP can serve it as immutable. Excerpts cut
from a source (PDF pages, clips, crops, line ranges) are named instead by the hash of what they are cut from (source
content hash, address, exact), which as surely names one content. Rows in the ``artifacts`` table point at cache
paths; a file no row points at is an orphan, removed by the classifier's sweep. Cache paths are relative to the data
dir and always start with ``cache/`` (the form ``/api/content?path=cache/...`` takes).

Every function takes the data dir it works in (the one the server was configured with); nothing here knows where
that is. A write that fails (a full disk: OSError ENOSPC, which the callers report as NO_SPACE) leaves nothing: its
temporary file (``.tmp-*``, beside the target) is removed and the target is not made; one a killed process left
behind is removed by the classifier's sweep once it is old (``TEMP_PREFIX``).
"""

from __future__ import annotations

import os
import re
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import xxhash

CACHE_DIR = "cache"
# what the classifiers write (thumbnails, timelines, metadata) and what citations extract (page ranges as PDF, clips,
# crops as PNG, line ranges as text)
MIME_TYPES = {"jpg": "image/jpeg", "png": "image/png", "webp": "image/webp", "json": "application/json",
              "pdf": "application/pdf", "txt": "text/plain; charset=utf-8",
              "mp4": "video/mp4", "m4v": "video/x-m4v", "mkv": "video/x-matroska", "webm": "video/webm",
              "mov": "video/quicktime",
              "mp3": "audio/mpeg", "m4a": "audio/mp4", "aac": "audio/aac", "flac": "audio/flac", "wav": "audio/wav",
              "ogg": "audio/ogg", "opus": "audio/ogg; codecs=opus", "mka": "audio/x-matroska"}
_CACHE_PATH = re.compile(r"cache/[0-9a-f]{2}/[0-9a-f]{2}/[0-9a-f]{32}\.(" + "|".join(MIME_TYPES) + ")")


CACHE_DIR_ENV = "ASSAY_CACHE_DIR"  # a cache shared by the machines of a work pool (settings: cluster.cache_dir)
TEMP_PREFIX = ".tmp-"  # a file being written beside its target (see written_beside)


def cache_dir(data_dir: str | Path) -> Path:
    """The cache's folder: ``$ASSAY_CACHE_DIR`` when set (one folder every machine of a pool shares), else ``cache/``
    in the data dir. Cache paths (``cache/ab/cd/...``) are the same either way."""
    shared = os.environ.get(CACHE_DIR_ENV)
    return Path(shared) if shared else Path(data_dir) / CACHE_DIR


def file_of(data_dir: str | Path, rel: str) -> Path:
    """The file cache path ``rel`` (``cache/ab/cd/<hash>.<ext>``) names, wherever the cache folder is."""
    return cache_dir(data_dir) / rel.removeprefix(CACHE_DIR + "/")


def put(data_dir: str | Path, data: bytes, ext: str = "jpg") -> str:
    """Store ``data`` and return its cache path (``cache/ab/cd/<hash>.<ext>``); storing the same bytes twice is free.
    OSError (ENOSPC on a full disk) when it cannot be written: then nothing of it is in the cache."""
    digest = xxhash.xxh3_128_hexdigest(data)
    rel = f"{CACHE_DIR}/{digest[:2]}/{digest[2:4]}/{digest}.{ext}"
    target = file_of(data_dir, rel)
    if target.exists():
        try:  # fresh again: a sweep running meanwhile keeps it until the row that will point at it is written
            os.utime(target)
            return rel
        except FileNotFoundError:  # swept just now: write it again
            pass
    with written_beside(target) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(data)
    return rel


@contextmanager
def written_beside(target: Path) -> Iterator[str]:
    """A temporary name in ``target``'s directory (``.tmp-*`` with its extension) for the block to write; renamed
    onto ``target`` when the block ends well, removed when it raises: readers never see half a file, and a failure
    leaves nothing behind."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=TEMP_PREFIX, suffix=target.suffix)
    os.close(fd)
    try:
        yield tmp
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def is_cache_path(rel: str) -> bool:
    """Whether ``rel`` has the exact shape of a cache path (nothing else may be served or deleted)."""
    return bool(_CACHE_PATH.fullmatch(rel))


def resolve(data_dir: str | Path, rel: str) -> Path | None:
    """The file of cache path ``rel`` when ``rel`` is a well-formed cache path and the file, symlinks followed, lies
    inside the cache; None otherwise (nothing outside the cache is looked at for a malformed path)."""
    if not is_cache_path(rel):
        return None
    root = os.path.realpath(cache_dir(data_dir))
    real = os.path.realpath(file_of(data_dir, rel))
    if not real.startswith(root + os.sep) or not os.path.isfile(real):
        return None
    return Path(real)


def mime_type(rel: str) -> str:
    return MIME_TYPES.get(rel.rsplit(".", 1)[-1], "application/octet-stream")
