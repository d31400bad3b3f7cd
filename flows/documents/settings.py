"""The documents capability's settings, from the environment (the README's settings table lists them).

==============================  =========  =======================================================================
ASSAY_DOCUMENT_MAX_BYTES        52428800   files larger than this many bytes are not extracted (FILTER_FAILED)
ASSAY_DOCUMENT_TIMEOUT          120        seconds one file's extraction may take before its worker is stopped
ASSAY_OCR                       on         on | off: read pages without a text layer with Tesseract
ASSAY_OCR_LANGUAGE              eng        Tesseract language(s), e.g. eng+deu
ASSAY_MAX_DOCUMENT_READ_CHARS   100000     read_document returns at most this many characters (truncated: true)
ASSAY_SEARCH_TIMEOUT            30         seconds a search may take before SEARCH_TIMEOUT
ASSAY_ALLOW_SYMLINKS            off        on: document tools follow symlinks inside the roots (else SYMLINK_NOT_ALLOWED)
ASSAY_DOCUMENTS_PLAN            on         off: do not install the built-in "documents" plan at server start
==============================  =========  =======================================================================
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

from flows.documents.model import ExtractOptions
from flows.env import read_flag, read_number


@dataclass(frozen=True)
class DocumentSettings:
    max_bytes: int = 50 * 1024 * 1024
    timeout: float = 120.0
    ocr: bool = True
    ocr_language: str = "eng"
    max_read_chars: int = 100_000
    search_timeout: float = 30.0
    allow_symlinks: bool = False
    builtin_plan: bool = True

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "DocumentSettings":
        """The settings in ``env`` (default: os.environ); ValueError naming the variable for a bad value."""
        env = os.environ if env is None else env
        return cls(
            max_bytes=read_number(env, "ASSAY_DOCUMENT_MAX_BYTES", cls.max_bytes, minimum=1, integer=True),
            timeout=read_number(env, "ASSAY_DOCUMENT_TIMEOUT", cls.timeout, minimum=0.1),
            ocr=read_flag(env, "ASSAY_OCR", cls.ocr),
            ocr_language=env.get("ASSAY_OCR_LANGUAGE", "").strip() or cls.ocr_language,
            max_read_chars=read_number(env, "ASSAY_MAX_DOCUMENT_READ_CHARS", cls.max_read_chars, minimum=1,
                                       integer=True),
            search_timeout=read_number(env, "ASSAY_SEARCH_TIMEOUT", cls.search_timeout, minimum=0.01),
            allow_symlinks=read_flag(env, "ASSAY_ALLOW_SYMLINKS", cls.allow_symlinks),
            builtin_plan=read_flag(env, "ASSAY_DOCUMENTS_PLAN", cls.builtin_plan),
        )

    def extract_options(self) -> ExtractOptions:
        return ExtractOptions(max_bytes=self.max_bytes, timeout=self.timeout, ocr=self.ocr,
                              ocr_language=self.ocr_language)


def current() -> DocumentSettings:
    """The settings of this process, read from the environment each call (cheap; tests change the environment)."""
    return DocumentSettings.from_env()
