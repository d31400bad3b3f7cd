"""GET/HEAD /api/content of a real `assay serve --transport http` process with raw HTTP requests (httpx): the
artifacts a classifier made are served immutable from the cache and nothing else is, behind the same Host/Origin
guard as /mcp; with a public URL set (a proxy), inspect's URLs start with it.

One server for the module: a tree with one real JPEG, thumbnailed by rerun-classifier through an MCP client."""

from __future__ import annotations

import subprocess

import httpx
import pytest
from mcp import Client

from examples import mediagen as media
from tests.e2e.conftest import REPO, _stop, free_port, serve_args, server_env, wait_listening

pytestmark = pytest.mark.e2e

PUBLIC = "https://files.example/assay"


@pytest.fixture(scope="module")
async def served(tmp_path_factory):
    """(local base URL, inspect's result for the JPEG, data dir) of a server started with ASSAY_PUBLIC_URL."""
    tmp = tmp_path_factory.mktemp("content-http")
    tree = tmp / "home" / "user"
    media.jpeg(tree / "Photos" / "photo.jpg", (640, 480))
    (tree / "notes.txt").write_text("no picture here")
    port = free_port()
    log = tmp / "http.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(serve_args(tree, prefect=False, extra=["--transport", "http", "--port", str(port)]),
                                stdout=out, stderr=subprocess.STDOUT,
                                env={**server_env(tmp, prefect=False), "ASSAY_PUBLIC_URL": PUBLIC}, cwd=REPO,
                                start_new_session=True)
    try:
        wait_listening(proc, port, log)
        base = f"http://127.0.0.1:{port}"
        async with Client(base + "/mcp") as client:
            for tool, args in (("index", {"root": str(tree), "async": False}),
                               ("rerun-classifier", {"sourcePath": str(tree / "Photos" / "photo.jpg"),
                                                     "operations": ["thumbnail"], "async": False})):
                result = await client.call_tool(tool, args)
                assert not result.is_error, result.content[0].text
            inspected = (await client.call_tool("inspect", {"path": str(tree / "Photos" / "photo.jpg")}))
        yield base, inspected.structured_content, tmp / "data"
    finally:
        _stop(proc)


@pytest.fixture(scope="module")
def anyio_backend():
    return "asyncio"


def cache_path(inspected: dict) -> str:
    return next(m["cachePath"] for m in inspected["metadata"] if m["type"] == "thumbnail")


async def test_inspect_urls_start_with_the_public_url(served):
    _, inspected, _ = served
    assert inspected["thumbnailUri"] == f"{PUBLIC}/api/content?path={cache_path(inspected)}"


async def test_the_thumbnail_is_served_immutable_with_etag_304_and_head(served):
    base, inspected, data_dir = served
    url = f"{base}/api/content"
    params = {"path": cache_path(inspected)}
    r = httpx.get(url, params=params)
    assert r.status_code == 200 and r.headers["content-type"] == "image/jpeg"
    assert r.content == (data_dir / cache_path(inspected)).read_bytes() and r.content[:2] == b"\xff\xd8"
    assert r.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert httpx.get(url, params=params, headers={"If-None-Match": r.headers["etag"]}).status_code == 304
    head = httpx.head(url, params=params)
    assert head.status_code == 200 and head.content == b"" and head.headers["content-length"] == str(len(r.content))


async def test_a_byte_range_is_served_partial_so_players_can_seek(served):
    base, inspected, data_dir = served
    url, params = f"{base}/api/content", {"path": cache_path(inspected)}
    whole = (data_dir / cache_path(inspected)).read_bytes()
    r = httpx.get(url, params=params, headers={"Range": "bytes=10-19"})
    assert r.status_code == 206 and r.content == whole[10:20]
    assert r.headers["content-range"] == f"bytes 10-19/{len(whole)}" and r.headers["accept-ranges"] == "bytes"
    assert httpx.get(url, params=params, headers={"Range": "bytes=-5"}).content == whole[-5:]
    past = httpx.get(url, params=params, headers={"Range": f"bytes={len(whole)}-"})
    assert past.status_code == 416 and past.headers["content-range"] == f"bytes */{len(whole)}"


@pytest.mark.parametrize("query", ["path=..%2Fassay.db", "path=%2Fetc%2Fpasswd", "path=cache%2F..%2Fassay.db",
                                   "path=cache/ab/cd/..%2F..%2F..%2Fassay.db", "path=assay.db", "",
                                   "path=cache/ab/cd/" + "0" * 32 + ".jpg%00.txt"])
async def test_anything_but_a_cache_path_is_refused(served, query):
    base, _, _ = served
    r = httpx.get(f"{base}/api/content?{query}")
    assert r.status_code == 400 and "cache path" in r.text


async def test_a_missing_artifact_is_404_and_other_methods_405(served):
    base, inspected, _ = served
    assert httpx.get(f"{base}/api/content", params={"path": "cache/00/00/" + "0" * 32 + ".jpg"}).status_code == 404
    assert httpx.post(f"{base}/api/content", params={"path": cache_path(inspected)}).status_code == 405


async def test_the_route_is_behind_the_host_and_origin_guard_with_cors(served):
    base, inspected, _ = served
    params = {"path": cache_path(inspected)}
    assert httpx.get(f"{base}/api/content", params=params, headers={"Host": "evil.example"}).status_code == 421
    assert httpx.get(f"{base}/api/content", params=params,
                     headers={"Origin": "https://evil.example"}).status_code == 403
    ok = httpx.get(f"{base}/api/content", params=params, headers={"Origin": "http://localhost:5173"})
    assert ok.status_code == 200 and ok.headers["access-control-allow-origin"] == "http://localhost:5173"
