"""The documents capability, declared once (``flows.core.capability``)."""

from __future__ import annotations

from flows.core.capability import Capability
from flows.documents.conditions import FILLS, PRODUCER, TEXT
from flows.documents.executor import TextExtractor
from flows.documents.service import ensure_builtin_plan
from flows.documents.text_index import start_text_index

CAPABILITY = Capability(
    name="documents",
    summary="text extraction and full-text search (outcome extract_text, the text field, the \"documents\" plan)",
    executors=(TextExtractor(),),
    producers=(PRODUCER,),
    fields=(TEXT,),
    fillers=(FILLS,),
    tool_groups=("documents",),
    start_plans=ensure_builtin_plan,
    start_background=start_text_index,  # the text engine follows the store from a thread of the server
)
