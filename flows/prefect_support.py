"""Moved to :mod:`flows.core.prefect` (this name stays until every importer is updated)."""

from flows.core.prefect import configure, ensure_api, flow_settings, recorded_api, stop_api  # noqa: F401
