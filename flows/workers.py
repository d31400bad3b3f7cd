"""Whether this process is a worker a pool spawned (the classifier's and the extractors' pools).

A worker needs its one function, not the registries: importing a capability's package registers executors and
fields, which loads SQLAlchemy, pydantic and the DSL (about a second and tens of MB per worker). A spawned child
imports the package while it unpickles its target, before ``multiprocessing.parent_process()`` is set, so the
``_inheriting`` flag of the spawn bootstrap is checked too.
"""

from __future__ import annotations

import multiprocessing


def in_worker_process() -> bool:
    return multiprocessing.parent_process() is not None or \
        bool(getattr(multiprocessing.current_process(), "_inheriting", False))
