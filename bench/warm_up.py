"""What the benchmarks do before they time anything: read every file once (a warm page cache for everyone), and start
Prefect once (a trivial flow run), as a server that has been up a while has them warm.
"""

from __future__ import annotations

from pathlib import Path


def read_all(paths: list[Path]) -> int:
    """Read every file once (the page cache is warm for everyone after this); returns the bytes read."""
    total = 0
    buf = bytearray(1 << 20)
    for p in paths:
        with open(p, "rb", buffering=0) as fh:
            while n := fh.readinto(buf):
                total += n
    return total


def start_prefect() -> None:
    """One trivial flow run: Prefect's API and client come up (a server that has been up a while has them warm)."""
    from prefect import flow

    from flows.core.prefect import flow_settings

    @flow(name="bench-warm-up", persist_result=False)
    def warm_up() -> int:
        return 1

    with flow_settings():
        warm_up()
