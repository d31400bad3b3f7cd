"""The content hash of a file: xxh3-128, streamed through one reused 1 MiB buffer (never the whole file in memory).

The result is ``"xxh128:<32 hex>"``, the form ``entries.hash`` holds; the prefix names the algorithm so another one
can be added later without confusing old values. It equals ``xxh128sum``'s digest of the same bytes.
"""

from __future__ import annotations

import xxhash

PREFIX = "xxh128:"
CHUNK = 1 << 20


def hash_file(path: str, chunk: int = CHUNK) -> str:
    """``"xxh128:<hex>"`` of the bytes of ``path``, read ``chunk`` bytes at a time into one buffer."""
    digest = xxhash.xxh3_128()
    buf = bytearray(chunk)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as fh:
        while True:
            n = fh.readinto(buf)
            if not n:
                break
            digest.update(view[:n])
    return PREFIX + digest.hexdigest()
