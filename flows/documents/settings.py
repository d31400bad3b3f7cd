"""The documents capability's settings: the ``documents`` section of the one settings model (``flows.core.settings``;
README's settings table lists them with their YAML keys and environment variables), with the extraction options
they give.
"""

from __future__ import annotations

from typing import Mapping

from flows.core import settings as core
from flows.documents.model import ExtractOptions


class DocumentSettings(core.DocumentsSection):
    """The ``documents`` section (``flows.core.settings.DocumentsSection``) and what the capability makes of it."""

    @classmethod
    def of(cls, section: core.DocumentsSection) -> "DocumentSettings":
        return cls.model_validate(section.model_dump())

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "DocumentSettings":
        """The section as the environment ``env`` (default: ``os.environ``) sets it over the defaults;
        ``ConfigError`` naming the variable for a bad value."""
        return cls.of(core.AssaySettings.load(env=env).documents)

    def extract_options(self) -> ExtractOptions:
        return ExtractOptions(max_bytes=self.max_bytes, timeout=self.timeout, ocr=self.ocr,
                              ocr_language=self.ocr_language)


def current() -> DocumentSettings:
    """This process's documents settings (``flows.core.settings.current()``)."""
    return DocumentSettings.of(core.current().documents)
