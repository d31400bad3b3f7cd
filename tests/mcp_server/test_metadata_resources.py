"""What classifiers generated, as the read surface shows it: inspect (artifacts, urls, hash, duplicates, includeImage),
navigate's thumbnailUrl, synthesis://metadata resources, node thumbnails and cache content as blobs, and the HTTP
/api/content route. Rows are written here as the classifier executor writes them (artifacts, metadata_values,
entries.hash) with real JPEG bytes in the cache, so these tests do not depend on decoding media."""

from __future__ import annotations

import base64
import io
import json
import os

import pytest
from mcp.shared.exceptions import MCPError
from sqlalchemy import insert, update

from examples import mediagen as media
from flows.index.navigation import content_url
from mcp_server.config import Settings
from mcp_server.http import content_base, http_app
from store import cache
from store.entries import T, get_entry
from store.models import Artifact, MetadataValue
from tests.conftest import ToolFailed, call, index_sync, read_json

A = Artifact.__table__
M = MetadataValue.__table__


def jpeg_bytes(size=(64, 48), seed=1) -> bytes:
    buf = io.BytesIO()
    media.picture(size, seed).save(buf, "JPEG", quality=80)
    return buf.getvalue()


def hash_of(n: int) -> str:
    return f"xxh128:{n:032x}"


class Seeded:
    """What the fixture wrote: cache paths by name, the tree."""

    def __init__(self, tree, thumb, frames, sheet):
        self.tree, self.thumb, self.frames, self.sheet = tree, thumb, frames, sheet


@pytest.fixture
def seeded(app, tree) -> Seeded:
    """An indexed tree with a photo (thumbnail, metadata record, width), a movie (thumbnail, three timeline frames
    written out of order, a contact sheet), three identical 100-byte files and two identical 10-byte files."""
    for name in ("copy1.bin", "copy2.bin", "copy3.bin"):
        (tree / "docs" / name).write_bytes(b"d" * 100)
    for name in ("small1.bin", "small2.bin"):
        (tree / "docs" / name).write_bytes(b"s" * 10)
    index_sync(app, tree)
    data_dir = app.settings.data_dir
    thumb = cache.put(data_dir, jpeg_bytes(seed=1))
    movie_thumb = cache.put(data_dir, jpeg_bytes(seed=2))
    frames = [cache.put(data_dir, jpeg_bytes(seed=10 + i)) for i in range(3)]
    sheet = cache.put(data_dir, jpeg_bytes((192, 48), seed=20))

    def entry_id(rel: str) -> int:
        return get_entry(app.engine, path=str(tree / rel))["id"]

    photo, movie = entry_id("Photos/photo.jpg"), entry_id("Videos/movie.mp4")
    rows = [
        dict(entry_id=photo, type="metadata", mime_type="application/json", cache_path=None,
             value_json=json.dumps({"metadata": {"width": 800, "height": 600, "exif.Model": "X-T4"},
                                    "details": {"image": {"format": "JPEG"}}, "hash": hash_of(1)}),
             created_at=1.0),
        dict(entry_id=photo, type="thumbnail", mime_type="image/jpeg", cache_path=thumb,
             value_json=json.dumps({"width": 64, "height": 48}), created_at=2.0),
        dict(entry_id=movie, type="timeline-sheet", mime_type="image/jpeg", cache_path=sheet,
             value_json=json.dumps({"frames": 3, "columns": 3, "rows": 1}), created_at=3.0),
    ] + [dict(entry_id=movie, type="video-timeline", mime_type="image/jpeg", cache_path=frames[i],
              value_json=json.dumps({"frame": i, "timestamp": 1.0 + 2 * i, "width": 64, "height": 48}),
              created_at=4.0) for i in (2, 0, 1)] + [
        dict(entry_id=movie, type="thumbnail", mime_type="image/jpeg", cache_path=movie_thumb,
             value_json=json.dumps({"width": 64, "height": 48}), created_at=5.0)]
    with app.engine.begin() as conn:
        conn.execute(insert(A), rows)
        conn.execute(insert(M), [dict(entry_id=photo, key="width", num_value=800.0, text_value=None),
                                 dict(entry_id=photo, key="exif.Model", num_value=None, text_value="X-T4")])
        conn.execute(update(T).where(T.c.id == photo).values(hash=hash_of(1)))
        for name in ("copy1.bin", "copy2.bin", "copy3.bin"):
            conn.execute(update(T).where(T.c.path == str(tree / "docs" / name)).values(hash=hash_of(2)))
        for name in ("small1.bin", "small2.bin"):
            conn.execute(update(T).where(T.c.path == str(tree / "docs" / name)).values(hash=hash_of(3)))
    return Seeded(tree, thumb, frames, sheet)


# --- inspect and navigate ------------------------------------------------------------------------------------------


async def test_inspect_lists_thumbnail_frames_in_order_sheet_and_metadata_with_stdio_urls(client, seeded):
    movie = await call(client, "inspect", {"path": str(seeded.tree / "Videos" / "movie.mp4")})
    assert [m["type"] for m in movie["metadata"]] == ["thumbnail", "video-timeline", "video-timeline",
                                                      "video-timeline", "timeline-sheet"]
    frames = [m for m in movie["metadata"] if m["type"] == "video-timeline"]
    assert [f["metadata"]["frame"] for f in frames] == [0, 1, 2]
    assert frames[0] == {"type": "video-timeline", "mimeType": "image/jpeg",
                         "url": "synthesis://content/" + seeded.frames[0], "cachePath": seeded.frames[0],
                         "metadata": {"frame": 0, "timestamp": 1.0, "width": 64, "height": 48}}
    assert movie["timelineUri"] == "synthesis://content/" + seeded.frames[0]
    assert movie["timelineSheetUri"] == "synthesis://content/" + seeded.sheet
    assert movie["thumbnailUri"] == movie["metadata"][0]["url"] and movie["metadataCount"] == 5
    assert movie["hash"] is None and movie["duplicates"] == 0

    photo = await call(client, "inspect", {"path": str(seeded.tree / "Photos" / "photo.jpg")})
    assert photo["thumbnailUri"] == "synthesis://content/" + seeded.thumb and photo["timelineUri"] is None
    assert photo["metadata"][-1] == {"type": "metadata", "mimeType": "application/json",
                                     "metadata": {"width": 800, "height": 600, "exif.Model": "X-T4"},
                                     "details": {"image": {"format": "JPEG"}}}
    assert photo["hash"] == hash_of(1)


async def test_inspect_counts_the_other_entries_with_the_same_hash(client, seeded):
    copy = await call(client, "inspect", {"path": str(seeded.tree / "docs" / "copy1.bin")})
    assert copy["hash"] == hash_of(2) and copy["duplicates"] == 2


async def test_inspect_attaches_the_thumbnail_or_contact_sheet_as_image_content(client, seeded, app):
    path = str(seeded.tree / "Videos" / "movie.mp4")
    for choice, rel in (("thumbnail", None), ("timeline", seeded.sheet)):
        result = await client.call_tool("inspect", {"path": path, "includeImage": choice})
        assert not result.is_error
        text, image = result.content
        assert json.loads(text.text) == result.structured_content
        assert image.type == "image" and image.mime_type == "image/jpeg"
        data = base64.b64decode(image.data)
        assert data[:2] == b"\xff\xd8"
        expected = rel or result.structured_content["metadata"][0]["cachePath"]
        assert data == (app.settings.data_dir / expected).read_bytes()
        assert "attached" in result.structured_content["imageNote"]


async def test_inspect_without_a_thumbnail_says_how_to_make_one_and_attaches_nothing(client, seeded):
    result = await client.call_tool("inspect", {"path": str(seeded.tree / "docs" / "readme.md"),
                                                "includeImage": "thumbnail"})
    assert not result.is_error and len(result.content) == 1
    note = result.structured_content["imageNote"]
    assert "has no thumbnail" in note and "rerun-classifier" in note and "classifier outcome" in note


async def test_inspect_refuses_an_unknown_include_image_choice(client, seeded):
    with pytest.raises(ToolFailed, match="includeImage"):
        await call(client, "inspect", {"path": str(seeded.tree / "docs"), "includeImage": "poster"})


async def test_navigate_gives_thumbnail_urls_to_entries_that_have_one(client, seeded):
    listing = await call(client, "navigate", {"path": str(seeded.tree / "Photos")})
    by_name = {e["name"]: e for e in listing["entries"]}
    assert by_name["photo.jpg"]["thumbnailUrl"] == "synthesis://content/" + seeded.thumb
    assert by_name["notes.txt"].get("thumbnailUrl") is None and by_name["vacation"].get("thumbnailUrl") is None


def test_content_urls_over_http_use_the_server_address_or_the_public_url():
    http = Settings(transport="http", host="127.0.0.1", port=3999)
    assert content_base(http) == "http://127.0.0.1:3999"
    assert content_base(Settings()) is None
    assert content_base(Settings(transport="http", public_url="https://files.example/assay/")) == \
        "https://files.example/assay"
    assert content_base(Settings(transport="http", host="0.0.0.0", allowed_hosts=["*", "assay.lan"])) == \
        "http://assay.lan:3000"
    rel = "cache/ab/cd/" + "ab" * 16 + ".jpg"
    assert content_url(rel, "http://127.0.0.1:3999") == f"http://127.0.0.1:3999/api/content?path={rel}"
    assert content_url(rel, None) == "synthesis://content/" + rel and content_url(None, None) is None


# --- resources -----------------------------------------------------------------------------------------------------


async def test_new_resources_and_templates_are_listed(client):
    static = {str(r.uri) for r in (await client.list_resources()).resources}
    assert {"synthesis://metadata", "synthesis://metadata/thumbnails", "synthesis://metadata/duplicates"} <= static
    templates = {t.uri_template: t for t in (await client.list_resource_templates()).resource_templates}
    assert {"synthesis://metadata/{hash}", "synthesis://nodes/{+path}/metadata", "synthesis://nodes/{+path}",
            "synthesis://content/{+path}"} <= set(templates)
    assert templates["synthesis://nodes/{+path}/thumbnail"].mime_type == "image/jpeg"


@pytest.mark.parametrize("suffix", ["/thumbnail", "/metadata"])
async def test_node_sub_resource_templates_complete_paths(client, tree, suffix):
    from mcp_types import ResourceTemplateReference

    rel = str(tree).lstrip("/")
    got = await client.complete(ResourceTemplateReference(uri="synthesis://nodes/{+path}" + suffix),
                                {"name": "path", "value": rel + "/Ph"})
    assert got.completion.values == [rel + "/Photos"]


async def test_node_thumbnail_is_a_jpeg_blob(client, seeded, app):
    result = await client.read_resource("synthesis://nodes" + str(seeded.tree / "Photos" / "photo.jpg") + "/thumbnail")
    blob = result.contents[0]
    assert blob.mime_type == "image/jpeg"
    assert base64.b64decode(blob.blob) == (app.settings.data_dir / seeded.thumb).read_bytes()


async def test_node_without_thumbnail_says_how_to_make_one(client, seeded):
    with pytest.raises(MCPError, match="has no thumbnail; make one with the rerun-classifier tool") as err:
        await client.read_resource("synthesis://nodes" + str(seeded.tree / "docs" / "readme.md") + "/thumbnail")
    assert err.value.error.code == -32602


async def test_a_file_named_thumbnail_is_still_its_own_node(client, app, tree):
    (tree / "docs" / "thumbnail").write_text("i am a file")
    index_sync(app, tree)
    result = await client.read_resource("synthesis://nodes" + str(tree / "docs" / "thumbnail"))
    assert result.contents[0].mime_type == "application/json"
    node = json.loads(result.contents[0].text)
    assert node["kind"] == "file" and node["name"] == "thumbnail"


async def test_node_metadata_lists_the_artifacts_in_the_inspect_shape(client, seeded):
    path = str(seeded.tree / "Videos" / "movie.mp4")
    inspected = await call(client, "inspect", {"path": path})
    meta = await read_json(client, inspected["metadataUri"])
    assert meta["metadata"] == inspected["metadata"] and meta["metadataCount"] == 5
    assert meta["thumbnailUri"] == inspected["thumbnailUri"]


async def test_content_resource_serves_a_cache_file_and_nothing_else(client, seeded, app):
    blob = (await client.read_resource("synthesis://content/" + seeded.sheet)).contents[0]
    assert blob.mime_type == "image/jpeg"
    assert base64.b64decode(blob.blob) == (app.settings.data_dir / seeded.sheet).read_bytes()
    with pytest.raises(MCPError, match="is not a cache path; one looks like cache/ab/cd/") as err:
        await client.read_resource("synthesis://content/assay.db")
    assert err.value.error.code == -32602
    with pytest.raises(MCPError, match="is not in the cache"):
        await client.read_resource("synthesis://content/cache/00/00/" + "0" * 32 + ".jpg")


async def test_a_content_blob_too_big_for_one_message_points_at_http(client, seeded, monkeypatch):
    from mcp_server.resources import metadata

    monkeypatch.setattr(metadata, "MAX_BLOB_BYTES", 10)
    with pytest.raises(MCPError, match="more than a resource read carries .*/api/content\\?path=cache/") as err:
        await client.read_resource("synthesis://content/" + seeded.sheet)
    assert err.value.error.code == -32602


async def test_metadata_listing_pages_newest_first_to_the_end(client, seeded):
    first = await read_json(client, "synthesis://metadata")
    assert first["total"] == 7 and first["hasMore"] is False
    assert first["metadata"][0]["type"] == "thumbnail" and first["metadata"][0]["path"].endswith("movie.mp4")
    seen, uri = [], "synthesis://metadata?limit=3&sort=path"
    while uri:
        page = await read_json(client, uri)
        seen += [(m["path"], m["type"]) for m in page["metadata"]]
        uri = page["nextUri"]
    assert len(seen) == 7 and [p for p, _ in seen] == sorted(p for p, _ in seen)
    photo = [t for p, t in seen if p.endswith("photo.jpg")]
    assert photo == ["thumbnail", "metadata"]


async def test_metadata_listing_refuses_a_bad_limit_or_sort(client, seeded):
    with pytest.raises(MCPError, match="limit must be a whole number"):
        await client.read_resource("synthesis://metadata?limit=0")
    with pytest.raises(MCPError, match="sort 'size' is not supported; use one of: newest, path"):
        await client.read_resource("synthesis://metadata?sort=size")


async def test_thumbnails_resource_lists_only_thumbnails_with_their_urls(client, seeded):
    res = await read_json(client, "synthesis://metadata/thumbnails")
    assert res["total"] == 2 and {m["type"] for m in res["metadata"]} == {"thumbnail"}
    photo = next(m for m in res["metadata"] if m["path"].endswith("photo.jpg"))
    assert photo["url"] == "synthesis://content/" + seeded.thumb and photo["metadata"] == {"width": 64, "height": 48}
    assert (await read_json(client, "synthesis://metadata/thumbnails?limit=1&offset=1"))["metadata"][0]["path"] \
        .endswith("photo.jpg")


async def test_metadata_by_hash_lists_the_entries_with_that_content(client, seeded):
    res = await read_json(client, "synthesis://metadata/" + hash_of(2))
    assert res["count"] == 3 and res["duplicates"] == 2
    assert [e["path"].rsplit("/", 1)[1] for e in res["entries"]] == ["copy1.bin", "copy2.bin", "copy3.bin"]
    photo = await read_json(client, "synthesis://metadata/" + hash_of(1))
    assert [m["type"] for m in photo["entries"][0]["metadata"]] == ["thumbnail", "metadata"]


async def test_metadata_by_hash_explains_a_malformed_or_unknown_hash(client, seeded):
    with pytest.raises(MCPError, match="is not a content hash; a hash is 'xxh128:' followed by 32") as err:
        await client.read_resource("synthesis://metadata/abc123")
    assert err.value.error.code == -32602
    with pytest.raises(MCPError, match="no indexed entry has content hash"):
        await client.read_resource("synthesis://metadata/" + hash_of(99))


async def test_duplicates_are_grouped_largest_waste_first(client, seeded):
    res = await read_json(client, "synthesis://metadata/duplicates")
    assert res["total"] == 2
    big, small = res["groups"]
    assert big == {**big, "hash": hash_of(2), "size": 100, "count": 3, "wastedBytes": 200,
                   "uri": "synthesis://metadata/" + hash_of(2)}
    assert [p.rsplit("/", 1)[1] for p in big["paths"]] == ["copy1.bin", "copy2.bin", "copy3.bin"]
    assert small["wastedBytes"] == 10 and small["count"] == 2
    page = await read_json(client, "synthesis://metadata/duplicates?limit=1")
    assert page["groups"][0]["hash"] == hash_of(2) and page["nextUri"] == \
        "synthesis://metadata/duplicates?limit=1&offset=1"


# --- HTTP /api/content -----------------------------------------------------------------------------------------------


@pytest.fixture
def http(app, seeded):
    from starlette.testclient import TestClient

    from mcp_server.app import build_server

    settings = app.settings.model_copy(update={"transport": "http", "port": 3999})
    with TestClient(http_app(build_server(app), settings), base_url="http://127.0.0.1:3999") as c:
        yield c


def test_http_content_serves_the_jpeg_immutable_with_its_hash_as_etag(http, seeded, app):
    r = http.get("/api/content", params={"path": seeded.thumb})
    assert r.status_code == 200 and r.headers["content-type"] == "image/jpeg"
    assert r.content == (app.settings.data_dir / seeded.thumb).read_bytes()
    assert r.headers["cache-control"] == "public, max-age=31536000, immutable"
    digest = seeded.thumb.rsplit("/", 1)[1].split(".")[0]
    assert r.headers["etag"] == f'"{digest}"'
    again = http.get("/api/content", params={"path": seeded.thumb}, headers={"If-None-Match": f'"{digest}"'})
    assert again.status_code == 304 and again.content == b""
    head = http.head("/api/content", params={"path": seeded.thumb})
    assert head.status_code == 200 and head.content == b"" and int(head.headers["content-length"]) == len(r.content)


@pytest.mark.parametrize("path", ["../assay.db", "/etc/passwd", "cache/../assay.db", "assay.db",
                                  "cache/ab/cd/../../../assay.db", ""])
def test_http_content_refuses_anything_but_a_cache_path(http, path):
    r = http.get("/api/content", params={"path": path})
    assert r.status_code == 400 and "cache path" in r.text


def test_http_content_refuses_a_symlink_out_of_the_cache_and_a_missing_file(http, app, tmp_path):
    secret = tmp_path / "secret.jpg"
    secret.write_bytes(b"secret")
    rel = "cache/ee/ee/" + "e" * 32 + ".jpg"
    link = app.settings.data_dir / rel
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(secret, link)
    assert http.get("/api/content", params={"path": rel}).status_code == 404
    assert http.get("/api/content", params={"path": "cache/00/00/" + "0" * 32 + ".jpg"}).status_code == 404


def test_http_content_is_behind_the_host_guard_and_takes_only_get_and_head(http, seeded):
    assert http.get("/api/content", params={"path": seeded.thumb}, headers={"Host": "evil.example"}).status_code == 421
    assert http.post("/api/content", params={"path": seeded.thumb}).status_code == 405


async def test_http_inspect_urls_point_at_the_content_route(app, seeded):
    from mcp import Client

    from mcp_server.app import build_server

    app.settings = app.settings.model_copy(update={"transport": "http", "port": 3999})
    async with Client(build_server(app)) as c:
        photo = await call(c, "inspect", {"path": str(seeded.tree / "Photos" / "photo.jpg")})
    assert photo["thumbnailUri"] == f"http://127.0.0.1:3999/api/content?path={seeded.thumb}"
