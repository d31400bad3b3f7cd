"""Image thumbnails and metadata (flows/media/images.py) on generated photos, good and bad."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image

from examples import mediagen as media
from flows.media import images
from flows.media.common import MediaError, fit, to_rgb


@pytest.fixture(scope="module")
def photos(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("photos")
    return {
        "landscape": media.jpeg(d / "landscape.jpg", (1600, 1200)),
        "rotated": media.jpeg(d / "rotated.jpg", (1600, 1200), orientation=6),
        "south_west": media.jpeg(d / "sw.jpg", (400, 300), gps=(-33.45, -70.6667), altitude=-12.0),
        "heic": media.heic(d / "phone.heic", (640, 480)),
        "gif": media.animated_gif(d / "anim.gif", frames=4, size=(120, 90)),
        "tiff": media.multipage_tiff(d / "pages.tiff", pages=3, size=(200, 150)),
        "png": media.png(d / "picture.png", (640, 480)),
        "truncated": media.truncated_jpeg(d / "truncated.jpg"),
        "bomb": media.bomb_png(d / "bomb.png"),
        "not_image": media.text(d / "fake.jpg"),
    }


def decode(data: bytes) -> Image.Image:
    img = Image.open(io.BytesIO(data))
    img.load()
    return img


@pytest.mark.parametrize("name, box, expected", [
    ("landscape", (320, 320), (320, 240)),
    ("landscape", (100, 400), (100, 75)),
    ("png", (160, 160), (160, 120)),
    ("heic", (320, 320), (320, 240)),
])
def test_thumbnail_fits_the_box_and_keeps_the_aspect(photos, name, box, expected):
    data, width, height = images.thumbnail(str(photos[name]), *box, 80)
    img = decode(data)
    assert img.format == "JPEG" and img.mode == "RGB"
    assert (width, height) == img.size == expected


def test_exif_orientation_6_gives_a_portrait_thumbnail(photos):
    data, width, height = images.thumbnail(str(photos["rotated"]), 320, 320, 80)
    assert (width, height) == decode(data).size == (240, 320)


def test_draft_mode_decodes_a_large_jpeg_at_a_reduced_scale(photos):
    with Image.open(photos["landscape"]) as img:
        img.draft("RGB", fit(*img.size, 320, 320))
        assert img.size[0] < 1600  # libjpeg's scaled decode applies: the thumbnail never sees 1600x1200 pixels


def test_animated_gif_thumbnail_is_its_first_frame(photos):
    data, *_ = images.thumbnail(str(photos["gif"]), 320, 320, 95)
    with Image.open(photos["gif"]) as gif:
        first = to_rgb(gif.copy())
        gif.seek(2)
        third = to_rgb(gif.copy())
    thumb = decode(data)
    def distance(a, b):
        return sum(abs(x - y) for x, y in zip(a.resize((30, 20)).tobytes(), b.resize((30, 20)).tobytes()))
    assert distance(thumb, first) < distance(thumb, third)


def test_multipage_tiff_gives_a_thumbnail_and_counts_its_frames(photos):
    _, width, height = images.thumbnail(str(photos["tiff"]), 320, 320, 80)
    flat, details = images.metadata(str(photos["tiff"]))
    assert (width, height) == (200, 150)
    assert flat["frames"] == 3 and details["frames"] == 3


def test_transparency_is_flattened_on_white():
    rgba = Image.new("RGBA", (10, 10), (0, 0, 0, 0))
    assert to_rgb(rgba).getpixel((5, 5)) == (255, 255, 255)


def test_metadata_reads_size_format_and_exif_by_name_with_numbers_as_numbers(photos):
    flat, details = images.metadata(str(photos["landscape"]))
    assert flat["width"] == 1600 and flat["height"] == 1200 and flat["format"] == "JPEG"
    assert flat["exif.Make"] == "FUJIFILM" and flat["exif.Model"] == "X-T4"
    assert flat["exif.LensModel"] == "XF16-80mmF4 R OIS WR"
    assert flat["exif.DateTimeOriginal"] == "2024:06:15 10:30:00"
    assert flat["exif.ExposureTime"] == pytest.approx(1 / 250)
    assert flat["exif.FNumber"] == pytest.approx(4.0) and isinstance(flat["exif.FNumber"], float)
    assert flat["exif.ISOSpeedRatings"] == 400 and flat["exif.FocalLength"] == pytest.approx(23.0)
    assert flat["exif.GPSLatitude"] == pytest.approx(46.5586, abs=1e-4)
    assert flat["exif.GPSLongitude"] == pytest.approx(7.9806, abs=1e-4)
    assert flat["exif.GPSAltitude"] == pytest.approx(1200.5)
    assert details["exif"]["Model"] == "X-T4"
    import json
    json.dumps(details)  # the whole record is stored as JSON


def test_gps_south_and_west_are_negative_and_altitude_below_sea_level_too(photos):
    flat, _ = images.metadata(str(photos["south_west"]))
    assert flat["exif.GPSLatitude"] == pytest.approx(-33.45, abs=1e-4)
    assert flat["exif.GPSLongitude"] == pytest.approx(-70.6667, abs=1e-4)
    assert flat["exif.GPSAltitude"] == pytest.approx(-12.0)


def test_rotated_photo_reports_its_displayed_size_and_orientation(photos):
    flat, details = images.metadata(str(photos["rotated"]))
    assert (flat["width"], flat["height"]) == (1200, 1600)
    assert flat["exif.Orientation"] == 6 and details["stored_size"] == [1600, 1200]


def test_exif_strings_lose_nuls_and_binary_bytes_are_skipped():
    assert images._value("Canon\x00\x00 ") == "Canon"
    assert images._value(b"0230") == "0230"
    assert images._value(b"\x01\x02\xff") is None


def test_truncated_jpeg_is_a_short_error(photos):
    with pytest.raises(MediaError, match="truncated"):
        images.thumbnail(str(photos["truncated"]), 320, 320, 80)


def test_a_file_that_is_not_an_image_cannot_be_identified(photos):
    with pytest.raises(MediaError, match=r"^cannot identify image file \(truncated or not an image\)$"):
        images.thumbnail(str(photos["not_image"]), 320, 320, 80)


@pytest.mark.parametrize("extract", [lambda p: images.thumbnail(p, 320, 320, 80), images.metadata])
def test_decompression_bomb_header_is_refused_before_any_allocation(photos, extract):
    with pytest.raises(MediaError, match=r"image claims 50000x50000 pixels, over the 178,956,970-pixel limit"):
        extract(str(photos["bomb"]))


def test_heic_metadata_has_its_size_and_format(photos):
    flat, _ = images.metadata(str(photos["heic"]))
    assert (flat["width"], flat["height"]) == (640, 480) and flat["format"] == "HEIF"
