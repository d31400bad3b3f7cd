"""Moved to :mod:`flows.core.prefect` (this name stays until every importer is updated)."""

from flows.core.prefect import *  # noqa: F401,F403
from flows.core.prefect import JobHooks, configure, ensure_api, flow_settings, lazy_flow, recorded_api, stop_api, warm_up  # noqa: F401
