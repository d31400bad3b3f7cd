"""Disk operations for file tools: renames that never replace, cross-filesystem moves that never lose the source
before the copy is complete, and removals that carry on past what cannot be removed."""

from __future__ import annotations

import ctypes
import errno
import os
import posixpath
import shutil
import stat
import sys
import time
import uuid
from contextlib import suppress
from typing import Any

import xxhash

from flows.media.hashing import PREFIX, hash_file
from store.entries import make_row
from store.errors import Conflict, FileOperationError


def reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def same_file(a: str, b: str) -> bool:
    """True when ``b`` names the same file as ``a`` (a case-only rename on a case-insensitive filesystem)."""
    try:
        sa, sb = os.lstat(a), os.lstat(b)
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


_RENAME_NOREPLACE = 1
_AT_FDCWD = -100


def _load_renameat2():
    # the symbols the process already has (glibc's among them): ctypes.util.find_library would run ldconfig in a
    # subprocess at import, a fork of a threaded server (while Prefect's API child starts) for nothing
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    return fn


_renameat2 = _load_renameat2() if sys.platform.startswith("linux") else None


def rename_noreplace(src: str, dst: str) -> None:
    """Rename that fails with FileExistsError instead of replacing ``dst``: atomic through Linux's renameat2 where the
    filesystem supports it, otherwise a check just before ``os.rename`` (a narrow race remains there)."""
    if _renameat2 is not None:
        if _renameat2(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), _RENAME_NOREPLACE) == 0:
            return
        err = ctypes.get_errno()
        if err not in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
            raise OSError(err, os.strerror(err), src, None, dst)
    if os.path.lexists(dst):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), dst)
    os.rename(src, dst)


def remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def copy_verified(src: str, dst: str) -> None:
    """A copy of ``src`` (a file, link or tree) at ``dst``: written under a hidden name beside it, checked against
    the source (sizes and content hashes, :func:`_differs`), then renamed into place, never replacing anything.
    Raises, leaving no partial copy, when the copy fails, differs, or ``dst`` appeared meanwhile (Conflict)."""
    tmp = posixpath.join(posixpath.dirname(dst), f".{posixpath.basename(dst)}.assay-partial-{uuid.uuid4().hex[:8]}")
    try:
        if os.path.islink(src):
            os.symlink(os.readlink(src), tmp)
        elif os.path.isdir(src):
            shutil.copytree(src, tmp, symlinks=True)
        else:
            shutil.copy2(src, tmp)
    except OSError as exc:
        if os.path.lexists(tmp):
            remove(tmp)
        raise FileOperationError(f"copying {src} to {dst} failed ({reason(exc)}); the source is untouched",
                                 field="to") from None
    mismatch = _differs(src, tmp)
    if mismatch:
        remove(tmp)
        raise FileOperationError(f"copying {src} to {dst} gave a copy that differs ({mismatch}); the copy was removed "
                                 "and the source is untouched", field="to")
    try:
        rename_noreplace(tmp, dst)
    except OSError as exc:
        remove(tmp)
        if isinstance(exc, FileExistsError):
            raise Conflict(f"{dst} appeared while {src} was being copied; nothing was changed", field="to") from None
        raise


def copy_then_remove(src: str, dst: str) -> str | None:
    """Move across filesystems: a checked copy in place (:func:`copy_verified`), then ``src`` removed.

    The source is removed only once its complete copy is in place. Returns None, or a warning when the copy is in place
    but part of the source could not be removed.
    """
    copy_verified(src, dst)
    try:
        remove(src)
    except OSError as exc:
        return (f"copied to {dst}, but part of the source could not be removed ({reason(exc)}); "
                f"the copy is complete, delete what is left of {src} with delete-files")
    return None


def _differs(src: str, copy: str) -> str | None:
    """How a copy differs from its source, checked before the source is removed: a file's size and content hash,
    a folder's files (relative names, then each file as a file); None when they are the same."""
    if os.path.islink(src):
        return None if os.readlink(src) == os.readlink(copy) else "the link's target"
    if os.path.isdir(src):
        for top, _dirs, files in os.walk(src):
            for name in files:
                one = posixpath.join(top, name)
                found = _differs(one, posixpath.join(copy, posixpath.relpath(one, src)))
                if found:
                    return f"{posixpath.relpath(one, src)}: {found}"
        return None
    if not os.path.isfile(copy):
        return "missing"
    a, b = os.stat(src).st_size, os.stat(copy).st_size
    if a != b:
        return f"size {b} instead of {a}"
    if hash_of(src, a) != hash_of(copy, b):
        return "content hash"
    return None


SMALL = 1 << 16  # bytes: a file up to this size is hashed from os.read, without hash_file's 1 MiB buffer


def hash_of(path: str, size: int) -> str:
    """:func:`flows.media.hashing.hash_file`'s digest of ``path`` (``size``: its size from a stat just taken). A small
    file is read with os.read to its end: hash_file allocates (and zeroes) a 1 MiB buffer for each file, most of the
    time it takes on a file of a few KB (~30 us against ~3 us); a plan that moves 10,000 files hashes each."""
    if size > SMALL:
        return hash_file(path)
    digest = xxhash.xxh3_128()
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        while chunk := os.read(fd, SMALL):
            digest.update(chunk)
    finally:
        os.close(fd)
    return PREFIX + digest.hexdigest()


def make_parents(folder: str, *, field: str = "to") -> list[str]:
    """Make ``folder`` and its missing ancestors; returns those made, outermost first (what the journal records and a
    rollback removes). When one cannot be made, those made are removed again and FileOperationError says why."""
    try:
        if stat.S_ISDIR(os.lstat(folder).st_mode):
            return []  # the common case of a batch: there already (one lstat, not makedirs' stat and mkdir)
    except OSError:
        pass
    missing: list[str] = []
    here = folder
    while not os.path.lexists(here):
        missing.append(here)
        here = os.path.dirname(here)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        for made in missing:
            with suppress(OSError):
                os.rmdir(made)
        raise FileOperationError(f"the folder {folder} cannot be made ({reason(exc)})", field=field) from None
    return list(reversed(missing))


def entry_row(path: str) -> dict[str, Any]:
    """The store's row for what is at ``path`` now (its kind, size and times from lstat)."""
    st = os.lstat(path)
    kind = "symlink" if stat.S_ISLNK(st.st_mode) else "directory" if stat.S_ISDIR(st.st_mode) else (
        "file" if stat.S_ISREG(st.st_mode) else "other")
    return make_row(path, kind=kind, size=st.st_size if kind == "file" else 0, mtime=st.st_mtime,
                    ctime=st.st_ctime, inode=st.st_ino, scan_id=None, indexed_at=time.time())


def rmtree(path: str) -> list[str]:
    """Remove a tree, carrying on past what cannot be removed; returns "path: reason" for each failure."""
    failures: list[str] = []

    def note(_fn, where, exc) -> None:
        exc = exc[1] if isinstance(exc, tuple) else exc
        failures.append(f"{where}: {reason(exc) if isinstance(exc, OSError) else exc}")

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=note)
    else:
        shutil.rmtree(path, onerror=note)
    return failures
