"""How assay runs its Prefect flows in-process.

Prefect 3.8's flow engine keeps a heartbeat thread per flow run and joins it at the end; the thread sleeps in whole
seconds, so every flow run, however short, takes about a second longer. assay's own job rows already catch runs that
died (a job left running is marked failed at the next start), so its flows run without heartbeats.

Without ``PREFECT_API_URL``, the first flow run of a process starts Prefect's embedded API server (10-20 s here). Two
first runs at once (an index job and a plan execution, say) would each start one, so the first run holds a lock the
others wait on; ``warm_up`` starts it in the background when a server starts, before any client asks for work.
"""

from __future__ import annotations

import logging
import threading
from contextlib import contextmanager
from typing import Iterator

log = logging.getLogger(__name__)

_first_run = threading.Lock()
_started = threading.Event()


@contextmanager
def flow_settings() -> Iterator[None]:
    """Settings for a flow run started from this thread: no heartbeat thread (see the module docstring)."""
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        if _started.is_set():
            yield
            return
        with _first_run:  # the first flow run of the process starts Prefect; the others wait for it
            try:
                yield
            finally:
                _started.set()


def warm_up() -> threading.Thread:
    """Start Prefect (its embedded API server, unless PREFECT_API_URL points at one) in a background thread."""

    def run() -> None:
        try:
            from prefect import flow

            @flow(name="assay-start", persist_result=False, log_prints=False)
            def assay_start() -> None:
                """assay's server started (a no-op that brings Prefect up)."""

            with flow_settings():
                assay_start()
            log.info("Prefect is ready")
        except Exception:  # the first real flow run will try again and report what is wrong
            log.exception("starting Prefect failed")

    thread = threading.Thread(target=run, name="assay-prefect-start", daemon=True)
    thread.start()
    return thread
