"""The semantic index's settings: the ``semantic`` section of the one settings model (``flows.core.settings``;
README's settings table lists them with their YAML keys and environment variables). ``backend`` None is the measured
default (``flows.semantic.encoder.DEFAULT_BACKEND``), ``threads`` 0 is OMP_NUM_THREADS if set, else every core
(``flows.semantic.encoder.threads``), ``model_cache`` None is ``<data dir>/models`` (``flows.semantic.paths``).
"""

from __future__ import annotations

from typing import Mapping

from flows.core import settings as core


class SemanticSettings(core.SemanticSection):
    """The ``semantic`` section (``flows.core.settings.SemanticSection``)."""

    @classmethod
    def of(cls, section: core.SemanticSection) -> "SemanticSettings":
        return cls.model_validate(section.model_dump())

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "SemanticSettings":
        """The section as the environment ``env`` (default: ``os.environ``) sets it over the defaults;
        ``ConfigError`` naming the variable for a bad value."""
        return cls.of(core.AssaySettings.load(env=env).semantic)


def current() -> SemanticSettings:
    """This process's semantic settings (``flows.core.settings.current()``)."""
    return SemanticSettings.of(core.current().semantic)
