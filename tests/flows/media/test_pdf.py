"""PDF thumbnails and metadata (flows/media/pdf.py) on PDFs made with PyMuPDF, good and bad."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image

from examples import mediagen as media
from flows.media import pdf
from flows.media.common import MediaError


@pytest.fixture(scope="module")
def pdfs(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("pdfs")
    return {
        "guide": media.pdf(d / "guide.pdf", pages=4),
        "plain": media.pdf(d / "plain.pdf", pages=1, outline=False),
        "encrypted": media.encrypted_pdf(d / "locked.pdf"),
        "broken": media.broken_pdf(d / "broken.pdf"),
        "empty": media.empty(d / "empty.pdf"),
    }


def test_first_page_thumbnail_fits_the_box_with_the_page_aspect(pdfs):
    data, width, height = pdf.thumbnail(str(pdfs["guide"]), 320, 320, 80)
    img = Image.open(io.BytesIO(data))
    assert img.format == "JPEG" and img.size == (width, height)
    assert height == 320 and width == pytest.approx(320 * 595 / 842, abs=1)  # A4 portrait


def test_thumbnail_shows_the_page_not_a_blank(pdfs):
    data, *_ = pdf.thumbnail(str(pdfs["guide"]), 200, 200, 90)
    img = Image.open(io.BytesIO(data)).convert("L")
    assert img.getextrema()[0] < 128  # text was rendered: some dark pixels on the white page


def test_metadata_has_pages_info_fields_iso_dates_and_the_outline(pdfs):
    flat, details = pdf.metadata(str(pdfs["guide"]))
    assert flat["pages"] == 4
    assert (flat["title"], flat["author"], flat["subject"]) == ("A Field Guide", "M. Keller", "birds")
    assert flat["keywords"] == "alpine, birds" and flat["creator"] == "assay tests" and flat["producer"]
    assert flat["created"] == "2024-01-01T12:00:00Z" and flat["modified"] == "2024-03-01T12:00:00Z"
    assert flat["has_outline"] == 1 and flat["outline_entries"] == 4
    assert details["outline"][1] == {"level": 1, "title": "Chapter 2", "page": 2}


def test_a_pdf_without_outline_says_so(pdfs):
    flat, _ = pdf.metadata(str(pdfs["plain"]))
    assert flat["has_outline"] == 0 and flat["outline_entries"] == 0 and flat["pages"] == 1


@pytest.mark.parametrize("raw, iso", [
    ("D:20240101120000Z", "2024-01-01T12:00:00Z"),
    ("D:20231231235959+01'00'", "2023-12-31T23:59:59+01:00"),
    ("D:20230615", "2023-06-15T00:00:00"),
    ("D:2021", "2021-01-01T00:00:00"),
    ("yesterday", None),
    ("", None),
])
def test_pdf_dates_become_iso_8601(raw, iso):
    assert pdf.pdf_date(raw) == iso


@pytest.mark.parametrize("extract", [pdf.metadata, lambda p: pdf.thumbnail(p, 320, 320, 80)])
def test_encrypted_pdf_needs_a_password_and_none_is_tried(pdfs, extract):
    with pytest.raises(MediaError, match=r"^encrypted PDF: needs a password$"):
        extract(str(pdfs["encrypted"]))


@pytest.mark.parametrize("name", ["broken", "empty"])
def test_broken_pdf_is_an_error_naming_what_mupdf_said(pdfs, name):
    with pytest.raises(MediaError, match=r"^broken PDF: ") as caught:
        pdf.metadata(str(pdfs[name]))
    assert len(str(caught.value)) < 300
