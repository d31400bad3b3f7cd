"""Which files are documents, and in which format: by extension, confirmed by content where it matters (a ``.pdf``
that is not a PDF is FILTER_FAILED, a binary file with a text extension is FILTER_FAILED, not garbage text).

``EXTENSIONS`` is what the built-in plan extracts and what searches count as "not indexed yet" when a file of one
of these extensions has no current extracted text.
"""

from __future__ import annotations

PYMUPDF = {".pdf": "pdf", ".epub": "epub", ".xps": "xps", ".oxps": "xps", ".fb2": "fb2", ".mobi": "mobi",
           ".cbz": "cbz"}
MARKDOWN = {".md": "markdown", ".markdown": "markdown", ".mdown": "markdown", ".mkd": "markdown"}
PLAIN = {ext: "text" for ext in (".txt", ".text", ".rst", ".log", ".csv", ".tsv", ".org", ".adoc", ".tex")}
CODE = {ext: "code" for ext in (
    ".py", ".pyi", ".js", ".mjs", ".cjs", ".jsx", ".tsx", ".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".go",
    ".rs", ".java", ".kt", ".kts", ".scala", ".rb", ".php", ".pl", ".pm", ".lua", ".r", ".jl", ".swift", ".m",
    ".cs", ".fs", ".sh", ".bash", ".zsh", ".fish", ".ps1", ".bat", ".sql", ".json", ".yaml", ".yml", ".toml",
    ".ini", ".cfg", ".conf", ".xml", ".css", ".scss", ".less", ".vue", ".svelte", ".dart", ".ex", ".exs", ".erl",
    ".hs", ".ml", ".clj", ".el", ".vim", ".cmake", ".gradle", ".proto", ".graphql", ".tf")}
HTML = {".html": "html", ".htm": "html", ".xhtml": "html"}
DOCX = {".docx": "docx"}
# Images of text: read with OCR when an extract_text outcome matches them (the built-in plan does not extract them)
IMAGES = {ext: "image" for ext in (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".gif", ".webp")}
# Names without an extension that are text
NAMED = {"makefile": "code", "dockerfile": "code", "readme": "text", "license": "text", "copying": "text",
         "changelog": "text"}

EXTENSIONS: dict[str, str] = {**PYMUPDF, **MARKDOWN, **PLAIN, **CODE, **HTML, **DOCX}


def format_of(name: str) -> str | None:
    """The format a file of this name would be extracted as (images included), None when it is not a document."""
    lower = name.lower()
    dot = lower.rfind(".")
    ext = lower[dot:] if dot > 0 else ""
    if ext:
        return EXTENSIONS.get(ext) or IMAGES.get(ext)
    return NAMED.get(lower)
