"""Text extraction, format by format, and every bad document: what ``extract_file`` returns (pages and their lines,
table of contents, metadata, encoding, OCR marks) and the reasons it gives when a file cannot be read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from examples import mediagen as media
from examples.mediagen import documents as dm
from flows.documents.extract import extract_file
from flows.documents.extract import pymupdf as pymupdf_extract
from flows.documents.extract.pymupdf import pdf_date
from flows.documents.extract.text import decode, markdown_outline
from flows.documents.model import FILTER_FAILED, UNSUPPORTED_FORMAT, ExtractOptions, Extracted

OPTIONS = ExtractOptions(timeout=60)


@pytest.fixture(scope="module")
def library(tmp_path_factory) -> dict[str, str]:
    return dm.library(tmp_path_factory.mktemp("library"))


@pytest.fixture(scope="module")
def extracted(library) -> dict[str, Extracted]:
    """Every document of the library extracted once with the default options."""
    return {rel: extract_file(path, OPTIONS) for rel, path in library.items()}


def lines(result: Extracted) -> list[str]:
    """The document's lines in the contract's numbering (pages' lines in page order)."""
    return [line for page in result.pages for line in page.text.split("\n")]


# --- shape shared by every format ------------------------------------------------------------------------------


def test_every_readable_document_has_numbered_pages_without_line_end_residue(extracted):
    for rel, result in extracted.items():
        assert result.path.endswith(rel)
        if not result.ok:
            assert result.pages == [] and result.total_pages == 0 and result.error, rel
            continue
        assert [p.number for p in result.pages] == list(range(1, len(result.pages) + 1)), rel
        assert result.total_pages == len(result.pages), rel
        for page in result.pages:
            assert "\r" not in page.text, rel
            assert not page.text.endswith("\n"), rel


def test_the_bad_documents_of_the_library_fail_with_filter_failed_and_the_rest_are_read(extracted):
    failed = {rel for rel, result in extracted.items() if not result.ok}
    assert failed == {"games/coop/encrypted.pdf", "games/coop/truncated.pdf", "docs/api/blob.txt"}
    assert all(extracted[rel].error_code == FILTER_FAILED for rel in failed)


# --- PDF -----------------------------------------------------------------------------------------------------------


def test_pdf_pages_hold_their_own_lines(extracted):
    result = extracted["games/coop/rules.pdf"]
    assert result.format == "pdf" and result.total_pages == 5
    for page in result.pages:
        assert page.text.split("\n") == dm.pdf_lines(page.number)
        assert not page.ocr and not page.no_text
    assert "Movement allows a figure to move up to four squares." in result.pages[1].text
    assert lines(result)[3] == "Gameplay"  # line 4 of the document is page 2's first line


def test_pdf_outline_is_the_nested_table_of_contents(extracted):
    toc = [(item.level, item.title, item.page, item.line) for item in extracted["games/coop/rules.pdf"].toc]
    assert toc == [(1, "Introduction", 1, None), (1, "Gameplay", 2, None), (2, "Movement", 3, None),
                   (1, "Combat", 4, None)]


def test_pdf_metadata_with_keywords_split_and_dates_in_iso_8601(extracted):
    result = extracted["games/coop/rules.pdf"]
    assert result.meta == {"title": "Quest Rules", "author": "A. Designer", "subject": "board games",
                           "creator": "assay tests", "producer": "PyMuPDF",
                           "created": "2023-05-10T09:30:00+02:00", "modified": "2024-01-02T03:04:05Z",
                           "keywords": ["dungeon", "cooperative", "rules"]}
    assert result.meta_error is None


@pytest.mark.parametrize("raw, iso", [
    ("D:20230510093000+02'00'", "2023-05-10T09:30:00+02:00"),
    ("D:20240102030405Z", "2024-01-02T03:04:05Z"),
    ("D:20240102030405-05'30", "2024-01-02T03:04:05-05:30"),
    ("D:2021", "2021-01-01"),
    ("D:20210304", "2021-03-04"),
    ("20210304101500", "2021-03-04T10:15:00"),
    ("last tuesday", "last tuesday"),
])
def test_pdf_dates_become_iso_8601_and_other_values_stay(raw, iso):
    assert pdf_date(raw) == iso


def test_a_pdf_with_more_pages_than_the_outline_keeps_every_page(tmp_path):
    result = extract_file(str(dm.pdf_with_outline(tmp_path / "long.pdf", pages=7)), OPTIONS)
    assert result.total_pages == 7
    assert result.pages[6].text == "Page 7 notes: extra word page7"


def test_encrypted_pdf_is_filter_failed_as_encrypted(extracted):
    result = extracted["games/coop/encrypted.pdf"]
    assert result.error_code == FILTER_FAILED and result.error.startswith("encrypted")


def test_truncated_pdf_is_filter_failed_with_the_reason(extracted):
    result = extracted["games/coop/truncated.pdf"]
    assert result.error_code == FILTER_FAILED and "cannot open the PDF" in result.error


def test_a_broken_pdf_is_filter_failed(tmp_path):
    result = extract_file(str(media.broken_pdf(tmp_path / "broken.pdf")), OPTIONS)
    assert result.error_code == FILTER_FAILED and result.pages == []


def test_a_file_named_pdf_that_is_not_one_is_filter_failed_not_a_pdf(tmp_path):
    (tmp_path / "fake.pdf").write_text("just some text pretending\n")
    (tmp_path / "zero.pdf").write_bytes(b"")
    assert extract_file(str(tmp_path / "fake.pdf"), OPTIONS).error == \
        "not a PDF: the file does not start with %PDF"
    assert extract_file(str(tmp_path / "zero.pdf"), OPTIONS).error == "not a PDF: the file is empty"


# --- OCR -----------------------------------------------------------------------------------------------------------


def test_a_scanned_pdf_is_read_with_ocr_and_marked(extracted):
    result = extracted["games/coop/scan.pdf"]
    assert pymupdf_extract.tessdata_dir() is not None  # tesseract-ocr is installed here
    (page,) = result.pages
    assert page.ocr and not page.no_text
    assert "INVOICE" in page.text and "4711" in page.text


def test_an_image_of_text_is_read_with_ocr(tmp_path):
    result = extract_file(str(dm.image_of_text(tmp_path / "note.png", "PAYMENT RECEIVED 2024")), OPTIONS)
    assert result.format == "image" and result.ok
    (page,) = result.pages
    assert page.ocr and "PAYMENT" in page.text and "2024" in page.text


def test_comic_book_pages_are_images_read_with_ocr(tmp_path):
    result = extract_file(str(dm.cbz(tmp_path / "comic.cbz")), OPTIONS)
    assert result.format == "cbz" and result.total_pages == 2
    assert all(page.ocr for page in result.pages)
    assert "INVOICE" in result.pages[0].text and "TWO" in result.pages[1].text


def test_with_ocr_off_a_scanned_page_is_reported_without_text_not_silently_empty(library):
    result = extract_file(library["games/coop/scan.pdf"], ExtractOptions(ocr=False))
    assert result.ok
    (page,) = result.pages
    assert page.no_text and not page.ocr and page.text == ""


def test_without_tesseract_data_a_scanned_page_is_reported_without_text(library, monkeypatch):
    monkeypatch.setattr(pymupdf_extract, "tessdata_dir", lambda: None)
    (page,) = extract_file(library["games/coop/scan.pdf"], OPTIONS).pages
    assert page.no_text and page.text == ""
    assert "not found" in pymupdf_extract.ocr_unavailable(OPTIONS)


def test_an_ocr_language_without_data_is_reported_without_text(library):
    options = ExtractOptions(ocr_language="eng+xxx")
    assert pymupdf_extract.ocr_unavailable(options).startswith("no Tesseract language data for xxx")
    (page,) = extract_file(library["games/coop/scan.pdf"], options).pages
    assert page.no_text


def test_a_text_page_is_never_ocred(extracted):
    assert not any(page.ocr for page in extracted["games/coop/rules.pdf"].pages)


# --- other PyMuPDF formats -----------------------------------------------------------------------------------


def test_epub_chapters_are_pages_with_toc_and_metadata(extracted):
    result = extracted["docs/api/book.epub"]
    assert result.format == "epub" and result.total_pages == 2
    assert result.pages[0].text == "Chapter One\nThe dragon sleeps under the mountain."
    assert "The lighthouse keeper counts ships." in result.pages[1].text
    assert [(t.title, t.level, t.page) for t in result.toc] == [("Chapter One", 1, 1), ("Chapter Two", 1, 2)]
    assert result.meta == {"title": "The Tiny Book", "author": "E. Author"}


def test_fb2_is_read_with_its_sections(tmp_path):
    result = extract_file(str(dm.fb2(tmp_path / "birds.fb2")), OPTIONS)
    assert result.format == "fb2" and result.ok
    assert "The owl hunts at night." in lines(result)
    assert [t.title for t in result.toc] == ["Owls", "Nightjars"]
    assert result.meta["title"] == "Night Birds"


# --- text, Markdown, source code -----------------------------------------------------------------------------


def test_markdown_is_one_page_with_its_lines(extracted):
    result = extracted["games/coop/notes.md"]
    assert result.format == "markdown" and result.encoding == "utf-8" and result.total_pages == 1
    assert lines(result) == dm.MARKDOWN_TEXT.rstrip("\n").split("\n")


def test_markdown_headings_are_the_toc_with_line_numbers_and_fenced_lines_are_not(extracted):
    result = extracted["games/coop/notes.md"]
    toc = [(t.level, t.title, t.line, t.page) for t in result.toc]
    assert toc == [(1, "Card Game Notes", 1, None), (2, "Setup", 5, None), (3, "Dealing", 9, None),
                   (2, "Scoring", 18, None), (1, "Appendix", 26, None)]
    text_lines = lines(result)
    for _, title, line, _ in toc:
        assert text_lines[line - 1].lstrip("#").strip() == title
    assert result.meta == {"title": "Card Game Notes"}


def test_markdown_front_matter_gives_title_author_date_keywords(extracted):
    result = extracted["programming/python/README.md"]
    assert result.meta == {"title": "Front Matter Title", "author": "Jane Writer", "created": "2024-02-03",
                           "keywords": ["cards", "rules"]}
    assert result.toc[0].title == "Card Game Notes" and result.toc[0].line == 7  # front matter lines counted


def test_markdown_heading_forms():
    toc, meta = markdown_outline("#NoSpace\n## Closed ##\n   ### Indented\n    # code block\n####### seven\n#\n"
                                 "````\n```\n# inside the longer fence\n````\n# After")
    assert [(t.level, t.title, t.line) for t in toc] == [(2, "Closed", 2), (3, "Indented", 3), (1, "After", 11)]
    assert meta == {"title": "After"}


def test_cp1252_text_is_detected_and_decoded(extracted):
    result = extracted["games/coop/legacy.txt"]
    assert result.ok and result.encoding == "cp1252"
    assert "La crème brûlée était délicieuse, déjà servie à côté du théâtre." in lines(result)
    assert lines(result)[0] == "Le café de la gare est fermé le dimanche."


def test_utf16_with_bom_is_decoded(extracted):
    result = extracted["docs/api/windows.txt"]
    assert result.encoding == "utf-16"
    assert lines(result) == ["Grüße aus Köln", "Second line with ünïcödé", "third line"]


@pytest.mark.parametrize("data, text, encoding", [
    (b"\xef\xbb\xbfhello", "hello", "utf-8-sig"),
    ("héllo".encode("utf-8"), "héllo", "utf-8"),
    ("héllo".encode("utf-32"), "héllo", "utf-32"),
    ("héllo wörld".encode("utf-16-be").join([b"\xfe\xff", b""]), "héllo wörld", "utf-16"),
])
def test_byte_order_marks_and_utf8_decide_the_encoding(data, text, encoding):
    assert decode(data) == (text, encoding)


def test_line_ends_become_newlines(tmp_path):
    (tmp_path / "mixed.txt").write_bytes(b"one\r\ntwo\rthree\nfour\r\n")
    assert lines(extract_file(str(tmp_path / "mixed.txt"), OPTIONS)) == ["one", "two", "three", "four"]


def test_source_code_is_text_of_format_code(extracted):
    result = extracted["programming/python/fib.py"]
    assert result.format == "code" and result.toc == []
    assert "def fibonacci(n: int) -> int:" in lines(result)


def test_an_empty_text_file_is_one_empty_page(extracted):
    result = extracted["docs/api/empty.txt"]
    assert result.ok and [(p.number, p.text) for p in result.pages] == [(1, "")]


def test_binary_bytes_named_txt_are_filter_failed_binary_content(extracted):
    result = extracted["docs/api/blob.txt"]
    assert result.error_code == FILTER_FAILED and result.error.startswith("binary content")


def test_files_named_like_text_without_an_extension_are_text(tmp_path):
    (tmp_path / "Makefile").write_text("all:\n\techo hi\n")
    result = extract_file(str(tmp_path / "Makefile"), OPTIONS)
    assert result.format == "code" and lines(result) == ["all:", "\techo hi"]


# --- HTML ----------------------------------------------------------------------------------------------------------


def test_html_text_without_script_style_or_noscript(extracted):
    result = extracted["docs/api/guide.html"]
    text = "\n".join(lines(result))
    for hidden in ("secretScriptValue", "hiddenstyle", "color: red", "noscript fallback"):
        assert hidden not in text
    assert lines(result) == ["API Guide", "Requests use JSON & return status codes.", "Authentication",
                             "Send the token in the header. Café tokens expire.", "First item", "Second item",
                             "Refresh", "Refresh", "tokens daily."]


def test_html_headings_title_and_meta(extracted):
    result = extracted["docs/api/guide.html"]
    assert [(t.level, t.title, t.line) for t in result.toc] == [(1, "API Guide", 1), (2, "Authentication", 3),
                                                                 (3, "Refresh", 7)]
    assert result.meta == {"title": "API Guide", "author": "Docs Team", "keywords": ["api", "guide", "rest"]}
    assert result.encoding == "utf-8"


def test_html_declared_charset_and_tables_and_pre(tmp_path):
    page = ("<html><head><meta http-equiv='Content-Type' content='text/html; charset=iso-8859-1'></head><body>"
            "<table><tr><th>Name</th><th>Town</th></tr><tr><td>Zoë</td><td>Genève</td></tr></table>"
            "<pre>  indented\n  code</pre></body></html>")
    (tmp_path / "t.htm").write_bytes(page.encode("latin-1"))
    result = extract_file(str(tmp_path / "t.htm"), OPTIONS)
    assert result.encoding == "iso8859-1"
    assert lines(result) == ["Name\tTown", "Zoë\tGenève", "  indented", "  code"]


# --- DOCX ----------------------------------------------------------------------------------------------------------


def test_docx_paragraphs_and_table_rows_in_body_order(extracted):
    result = extracted["docs/api/plan.docx"]
    assert result.format == "docx" and result.total_pages == 1
    assert lines(result) == ["Project Plan", "The plan covers the migration of the billing service.",
                             "Milestones", "Phase\tOwner\tDue", "Design\tAlice\tMarch",
                             "Budget review happens after the design phase."]


def test_docx_headings_and_core_properties(extracted):
    result = extracted["docs/api/plan.docx"]
    assert [(t.level, t.title, t.line) for t in result.toc] == [(1, "Project Plan", 1), (2, "Milestones", 3)]
    assert result.meta == {"title": "Billing Migration", "author": "Alice Example", "subject": "planning",
                           "created": "2023-04-05T06:07:08+00:00", "modified": "2023-05-06T07:08:09+00:00",
                           "keywords": ["billing", "migration"]}


def test_a_file_named_docx_that_is_not_one_is_filter_failed(tmp_path):
    (tmp_path / "fake.docx").write_text("not a zip")
    result = extract_file(str(tmp_path / "fake.docx"), OPTIONS)
    assert result.error_code == FILTER_FAILED and result.error.startswith("not a valid DOCX file")


# --- limits and the unreadable ------------------------------------------------------------------------------


def test_a_file_over_the_size_limit_is_refused_before_reading(tmp_path):
    big = dm.big_file(tmp_path / "huge.txt")  # 100 MB, sparse
    result = extract_file(str(big), OPTIONS)
    assert result.error_code == FILTER_FAILED
    assert result.error == (f"too large: {100 * 1024 * 1024} bytes, the limit is {OPTIONS.max_bytes} "
                            f"(ASSAY_DOCUMENT_MAX_BYTES)")


@pytest.mark.parametrize("maker, name", [(dm.pdf_with_outline, "a.pdf"), (dm.docx, "a.docx"), (dm.html, "a.html"),
                                         (dm.markdown, "a.md")])
def test_the_size_limit_applies_to_every_format(tmp_path, maker, name):
    path = maker(tmp_path / name)
    size = os.path.getsize(path)
    result = extract_file(str(path), ExtractOptions(max_bytes=size - 1))
    assert result.error == f"too large: {size} bytes, the limit is {size - 1} (ASSAY_DOCUMENT_MAX_BYTES)"
    assert extract_file(str(path), ExtractOptions(max_bytes=size)).ok


@pytest.mark.parametrize("name, ext", [("sheet.xlsx", ".xlsx"), ("old.doc", ".doc"), ("thing.xyz", ".xyz")])
def test_other_formats_are_unsupported_with_the_format_named(tmp_path, name, ext):
    (tmp_path / name).write_bytes(b"PK\x03\x04 whatever")
    result = extract_file(str(tmp_path / name), OPTIONS)
    assert result.error_code == UNSUPPORTED_FORMAT and result.format == ext[1:]
    assert result.error.startswith(f"'{ext}' files are not supported; supported: PDF, EPUB")


def test_a_missing_file_a_directory_and_a_fifo_are_filter_failed(tmp_path):
    (tmp_path / "dir.txt").mkdir()
    fifo = media.fifo(tmp_path / "pipe.txt")
    assert extract_file(str(tmp_path / "gone.txt"), OPTIONS).error == "the file does not exist (deleted or moved?)"
    assert extract_file(str(tmp_path / "dir.txt"), OPTIONS).error.startswith("not a regular file")
    assert extract_file(str(fifo), OPTIONS).error.startswith("not a regular file")


def test_an_extractor_bug_becomes_filter_failed_not_an_exception(tmp_path, monkeypatch):
    from flows.documents.extract import text

    def boom(*args):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(text, "extract_text_file", boom)
    result = extract_file(str(dm.source_code(tmp_path / "x.py")), OPTIONS)
    assert result.error_code == FILTER_FAILED and result.error == "extraction failed: RuntimeError: kaboom"
    assert result.elapsed >= 0


def test_extraction_takes_paths_with_odd_names(tmp_path):
    path = dm.markdown(tmp_path / "-rf ; $(echo hi).md")
    assert extract_file(str(Path(path)), OPTIONS).ok


def test_tessdata_is_found_from_tessdata_prefix_first(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSDATA_PREFIX", str(tmp_path))
    pymupdf_extract.tessdata_dir.cache_clear()
    try:
        assert pymupdf_extract.tessdata_dir() == str(tmp_path)
        assert pymupdf_extract.ocr_unavailable(OPTIONS) == f"no Tesseract language data for eng in {tmp_path}"
    finally:
        monkeypatch.delenv("TESSDATA_PREFIX")
        pymupdf_extract.tessdata_dir.cache_clear()
    found = pymupdf_extract.tessdata_dir()  # what tesseract --list-langs reports (tesseract-ocr is installed here)
    assert found != str(tmp_path) and os.path.isfile(os.path.join(found, "eng.traineddata"))
