"""How assay runs its Prefect flows in-process.

Prefect 3.8's flow engine keeps a heartbeat thread per flow run and joins it at the end; the thread sleeps in whole
seconds, so every flow run, however short, takes about a second longer. assay's own job rows already catch runs that
died (a job left running is marked failed at the next start), so its flows run without heartbeats.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator


@contextmanager
def flow_settings() -> Iterator[None]:
    """Settings for a flow run started from this thread: no heartbeat thread (see the module docstring)."""
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        yield
