"""What the extractors raise for a document that cannot be read (``extract_file`` turns it into FILTER_FAILED)."""

from __future__ import annotations


class ExtractionFailed(Exception):
    """Raised inside the extractors for a document that cannot be read; ``extract_file`` turns it into FILTER_FAILED
    with this message."""
