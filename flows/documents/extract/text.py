"""Markdown, plain text and source code: one page of text, its encoding detected.

The encoding: a byte-order mark first (UTF-8, UTF-16, UTF-32), else strict UTF-8, else charset-normalizer's best
guess; NUL bytes without a UTF-16/32 mark, or no encoding that fits, mean binary content (FILTER_FAILED), not text.
Line ends become "\\n". Markdown's ATX headings (``#`` .. ``######``, outside ``` and ~~~ fences) are its table of
contents, each with its line number; its title is the front matter's ``title:``, else the first level-1 heading.
"""

from __future__ import annotations

import codecs
import logging
import re
from typing import Any

import yaml

from flows.documents.extract.errors import ExtractionFailed
from flows.documents.model import Extracted, ExtractOptions, Page, TocItem

log = logging.getLogger(__name__)

BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
        (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))

# Single-byte code pages of Latin script that charset-normalizer confuses with each other
LATIN_CODEPAGES = {"cp1250", "cp1252", "cp1257", "latin_1", "iso8859_2", "iso8859_3", "iso8859_4", "iso8859_9",
                   "iso8859_10", "iso8859_13", "iso8859_14", "iso8859_15", "iso8859_16", "mac_latin2", "mac_roman",
                   "mac_iceland", "cp775", "cp850", "cp852", "cp858", "cp437", "cp1254"}


def read_bounded(path: str, limit: int) -> bytes:
    """The file's bytes, at most ``limit`` of them (FILTER_FAILED when it grew past the limit since it was
    measured): the size limit bounds the memory one file takes."""
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ExtractionFailed(f"too large: more than {limit} bytes, the limit is {limit} (ASSAY_DOCUMENT_MAX_BYTES)")
    return data


def decode(data: bytes, declared: str | None = None) -> tuple[str, str]:
    """``(text, encoding)`` of ``data``: BOM, then ``declared`` (a charset the document names) when it decodes,
    then strict UTF-8, then charset-normalizer. ExtractionFailed("binary content ...") for bytes that are not text."""
    for bom, name in BOMS:
        if data.startswith(bom):
            try:
                return data.decode(name), name
            except UnicodeDecodeError as exc:
                raise ExtractionFailed(f"binary content: the file starts with a {name} byte-order mark but is not "
                                       f"{name} ({exc.reason} at byte {exc.start})") from None
    if b"\x00" in data:
        raise ExtractionFailed("binary content: the file has NUL bytes, so it is not text")
    if declared:
        try:
            codecs.lookup(declared)
            return data.decode(declared), codecs.lookup(declared).name
        except (LookupError, UnicodeDecodeError):
            log.debug("declared charset %r does not decode", declared)
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    from charset_normalizer import from_bytes  # only a file that is not UTF-8 needs the detector

    best = from_bytes(data).best()
    if best is None:
        raise ExtractionFailed("binary content: no text encoding fits the file's bytes")
    if best.encoding in LATIN_CODEPAGES:
        # charset-normalizer cannot tell the Latin code pages apart on short text (French cp1252 comes back as
        # cp1257: "crčme"); Western European text is by far the commonest of them, so cp1252 wins when it decodes.
        try:
            return data.decode("cp1252"), "cp1252"
        except UnicodeDecodeError:
            pass
    return str(best), best.encoding


def newlines(text: str) -> str:
    """"\\r\\n" and "\\r" as "\\n", without the final line end (a file's last line ends it, it is not a line)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text[:-1] if text.endswith("\n") else text


def extract_text_file(path: str, fmt: str, options: ExtractOptions) -> Extracted:
    """Extract a Markdown, plain text or source file (``fmt`` "markdown", "text" or "code")."""
    text, encoding = decode(read_bounded(path, options.max_bytes))
    text = newlines(text)
    result = Extracted(path=path, format=fmt, pages=[Page(number=1, text=text)], total_pages=1, encoding=encoding)
    if fmt == "markdown":
        try:
            result.toc, result.meta = markdown_outline(text)
        except Exception as exc:  # the text is there; only the outline failed
            log.info("%s: markdown outline failed", path, exc_info=True)
            result.meta_error = f"the headings could not be read: {type(exc).__name__}: {exc}"
    return result


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FRONT_KEY = re.compile(r"^([A-Za-z_][\w-]*)\s*:\s*(.*)$")


def markdown_outline(text: str) -> tuple[list[TocItem], dict[str, Any]]:
    """The table of contents (ATX headings outside fences, with line numbers) and metadata (YAML front matter's
    title / author / date / keywords; title else the first level-1 heading) of Markdown ``text``."""
    lines = text.split("\n")
    meta: dict[str, Any] = {}
    start = 0
    if lines and lines[0].strip() == "---":
        for i in range(1, min(len(lines), 200)):
            if lines[i].strip() in ("---", "..."):
                meta = front_matter(lines[1:i])
                start = i + 1
                break
    toc: list[TocItem] = []
    fence: str | None = None
    for i in range(start, len(lines)):
        line = lines[i]
        opened = _FENCE.match(line)
        if fence is not None:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence) \
                    and not line.strip()[len(opened.group(1)):].strip():
                fence = None
            continue
        if opened:
            fence = opened.group(1)
            continue
        heading = _ATX.match(line)
        if heading and heading.group(2):
            toc.append(TocItem(title=heading.group(2).strip(), level=len(heading.group(1)), line=i + 1))
    if "title" not in meta:
        first = next((item.title for item in toc if item.level == 1), None)
        if first:
            meta["title"] = first
    return toc, meta


def split_keywords_text(value: str) -> list[str]:
    """Keywords written as one string, separated by commas or semicolons."""
    return [word.strip() for word in re.split(r"[,;]", value) if word.strip()]


def front_matter(lines: list[str]) -> dict[str, Any]:
    """title, author, created (from ``date``) and keywords (a list) of a YAML front matter block; other keys are
    ignored, a block that is not YAML gives what simple ``key: value`` lines say."""
    try:
        data = yaml.safe_load("\n".join(lines))
    except yaml.YAMLError:
        data = None
    if not isinstance(data, dict):
        data = {}
        for line in lines:
            found = _FRONT_KEY.match(line)
            if found:
                data[found.group(1)] = found.group(2).strip().strip("\"'")
    meta: dict[str, Any] = {}
    for key, ours in (("title", "title"), ("author", "author"), ("date", "created")):
        value = data.get(key)
        if isinstance(value, list):
            value = ", ".join(str(v) for v in value)
        if value not in (None, ""):
            meta[ours] = value.isoformat() if hasattr(value, "isoformat") else str(value).strip()
    keywords = data.get("keywords", data.get("tags"))
    if isinstance(keywords, str):
        keywords = split_keywords_text(keywords)
    if isinstance(keywords, list):
        words = [str(word).strip() for word in keywords if str(word).strip()]
        if words:
            meta["keywords"] = words
    return meta
