"""Classification end to end: a real `assay serve` process, a real MCP client (the Python SDK), real ffmpeg, over
stdio and over Streamable HTTP, on a small generated tree (two JPEGs with EXIF, a video with chapters, a PDF, a
truncated JPEG).

One session per transport (one server each; the HTTP one runs plans as Prefect flows, the stdio one without): a plan
written in the DSL classifies everything and a later rule selects on what the classifier wrote (width > 500 -> set
"wide"); the run ends partial with the bad JPEG as its one error; inspect shows the thumbnail, the timeline and the
metadata; the artifacts are served (HTTP /api/content, or synthesis://content under stdio) and as the node's
thumbnail blob; synthesis://metadata/{hash} and the duplicates resource work; rerun-classifier,
classifier-job-progress and list-classifier-jobs work."""

from __future__ import annotations

import base64
import shutil
import subprocess
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import Client, StdioServerParameters

from examples import mediagen as media
from tests.e2e.conftest import REPO, _call, _read, _stop, free_port, serve_args, server_env, wait_listening

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="needs ffmpeg")]

JPEG_MAGIC = b"\xff\xd8"


def make_media_tree(root: Path) -> Path:
    """wide.jpg 800x600 and narrow.jpg 400x300 (EXIF), a copy of wide.jpg (a duplicate), clip.mp4 (4 s, two
    chapters), guide.pdf, broken.jpg (truncated)."""
    media.jpeg(root / "Photos" / "wide.jpg", (800, 600), seed=1)
    media.jpeg(root / "Photos" / "narrow.jpg", (400, 300), model="X100V", seed=2)
    shutil.copyfile(root / "Photos" / "wide.jpg", root / "Photos" / "wide-copy.jpg")
    media.truncated_jpeg(root / "Photos" / "broken.jpg")
    media.video(root / "Videos" / "clip.mp4", seconds=4, chapters=[(0, 2, "start"), (2, 4, "end")])
    media.pdf(root / "Docs" / "guide.pdf")
    return root


PLAN = """plan classify-media
source media index "{tree}"
rule everything
  do classifier all
rule wide when width > 500
  do selection_set wide
"""


@pytest.fixture(scope="module")
def media_tree(tmp_path_factory) -> Path:
    return make_media_tree(tmp_path_factory.mktemp("classify") / "home" / "user")


async def _blob(client, uri: str) -> tuple[str, bytes]:
    content = (await client.read_resource(uri)).contents[0]
    return content.mime_type, base64.b64decode(content.blob)


async def classify_session(client, tree: Path, fetch, *, prefect: bool) -> dict:
    """The whole classification story over one client; ``fetch(url)`` returns (content type, bytes) of an artifact
    URL as this transport serves it; ``prefect``: the server runs plans as Prefect flows. Returns what the
    transport-specific checks need."""
    created = await _call(client, "plan-create", {"text": PLAN.format(tree=tree), "format": "dsl"})
    assert [r["name"] for r in created["rules"]] == ["everything", "wide"]
    done = await _call(client, "plan-execute", {"name": "classify-media", "wait": True})
    assert done["status"] == "partial", done
    classifier = done["summary"]["rules"]["everything"]["outcomes"][0]
    assert classifier["applied"] == 6 and classifier["errors"] == 1, classifier
    assert "truncated" in classifier["error_samples"][0]
    assert done["error_message"].startswith("1 outcome error(s)")
    assert bool(done["flow_run_id"]) is prefect

    wide = await _call(client, "resource-set-get", {"name": "wide", "include_entries": True})
    # the truncated JPEG's header still says 800 px (its metadata is read; only its thumbnail failed); narrow.jpg
    # (400 px), the 320 px video and the PDF are not wide
    assert sorted(e["name"] for e in wide["entries"]) == ["broken.jpg", "wide-copy.jpg", "wide.jpg"]

    photo = await _call(client, "inspect", {"path": str(tree / "Photos" / "wide.jpg")})
    types = [m["type"] for m in photo["metadata"]]
    assert types[0] == "thumbnail" and "metadata" in types and photo["metadataCount"] == len(types)
    record = next(m for m in photo["metadata"] if m["type"] == "metadata")["metadata"]
    assert record["width"] == 800 and record["height"] == 600 and record["exif.Model"] == "X-T4"
    assert photo["hash"].startswith("xxh128:") and photo["duplicates"] == 1
    mime, data = await fetch(photo["thumbnailUri"])
    assert mime.startswith("image/jpeg") and data[:2] == JPEG_MAGIC

    node_mime, node_thumb = await _blob(client, photo["resourceUri"] + "/thumbnail")
    assert node_mime == "image/jpeg" and node_thumb == data

    with_image = await client.call_tool("inspect", {"path": str(tree / "Photos" / "wide.jpg"),
                                                    "includeImage": "thumbnail"})
    assert not with_image.is_error and with_image.content[-1].type == "image"
    assert base64.b64decode(with_image.content[-1].data) == data

    clip = await _call(client, "inspect", {"path": str(tree / "Videos" / "clip.mp4")})
    frames = [m for m in clip["metadata"] if m["type"] == "video-timeline"]
    assert len(frames) == 5 and [f["metadata"]["frame"] for f in frames] == list(range(5))
    stamps = [f["metadata"]["timestamp"] for f in frames]
    assert stamps == sorted(stamps) and stamps[-1] - stamps[0] >= 2.0  # spread over the 4 s, not the first frames
    assert clip["timelineUri"] == frames[0]["url"] and clip["timelineSheetUri"]
    mime, frame = await fetch(clip["timelineUri"])
    assert mime.startswith("image/jpeg") and frame[:2] == JPEG_MAGIC

    meta = await _read(client, photo["metadataUri"])
    assert meta["metadata"] == photo["metadata"]
    by_hash = await _read(client, "synthesis://metadata/" + photo["hash"])
    assert sorted(Path(e["path"]).name for e in by_hash["entries"]) == ["wide-copy.jpg", "wide.jpg"]
    dupes = await _read(client, "synthesis://metadata/duplicates")
    assert dupes["total"] == 1 and dupes["groups"][0]["count"] == 2
    assert dupes["groups"][0]["wastedBytes"] == (tree / "Photos" / "wide.jpg").stat().st_size
    thumbs = await _read(client, "synthesis://metadata/thumbnails")
    assert thumbs["total"] >= 4  # three photos, the video, the PDF's first page

    listing = await _call(client, "navigate", {"path": str(tree / "Photos")})
    with_thumb = {e["name"] for e in listing["entries"] if e.get("thumbnailUrl")}
    assert with_thumb == {"wide.jpg", "wide-copy.jpg", "narrow.jpg"}

    rerun = await _call(client, "rerun-classifier", {"sourcePath": str(tree / "Docs" / "guide.pdf"),
                                                     "operations": ["metadata"], "async": False})
    assert rerun["status"] == "completed" and rerun["files"] == 1
    progress = await _call(client, "classifier-job-progress", {"jobId": rerun["jobId"]})
    assert progress["status"] == "completed" and progress["progress"] == 100.0
    jobs = await _call(client, "list-classifier-jobs", {"status": "completed"})
    assert rerun["id"] in [j["id"] for j in jobs["jobs"]]
    return {"photo": photo}


@pytest.fixture(scope="module")
def http_classify_server(tmp_path_factory, media_tree):
    tmp = tmp_path_factory.mktemp("classify-http")
    port = free_port()
    log = tmp / "http.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(serve_args(media_tree, prefect=True,
                                           extra=["--transport", "http", "--port", str(port)]),
                                stdout=out, stderr=subprocess.STDOUT, env=server_env(tmp, prefect=True), cwd=REPO,
                                start_new_session=True)
    try:
        wait_listening(proc, port, log)
        yield port
    finally:
        _stop(proc)


async def test_classification_over_http(http_classify_server, media_tree):
    port = http_classify_server
    base = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient() as web:

        async def fetch(url: str) -> tuple[str, bytes]:
            assert url.startswith(f"{base}/api/content?path=cache/"), url
            r = await web.get(url)
            assert r.status_code == 200 and r.headers["cache-control"].endswith("immutable")
            again = await web.get(url, headers={"If-None-Match": r.headers["etag"]})
            assert again.status_code == 304
            return r.headers["content-type"], r.content

        async with Client(f"{base}/mcp") as client:
            with anyio.fail_after(300):
                await classify_session(client, media_tree, fetch, prefect=True)
        assert (await web.get(f"{base}/api/content?path=../assay.db")).status_code == 400


async def test_classification_over_stdio(tmp_path_factory, media_tree):
    tmp = tmp_path_factory.mktemp("classify-stdio")
    params = StdioServerParameters(command=serve_args(media_tree, prefect=False)[0],
                                   args=serve_args(media_tree, prefect=False)[1:], env=server_env(tmp, prefect=False),
                                   cwd=str(REPO))

    async with Client(params) as client:

        async def fetch(url: str) -> tuple[str, bytes]:
            assert url.startswith("synthesis://content/cache/"), url
            return await _blob(client, url)

        with anyio.fail_after(300):
            await classify_session(client, media_tree, fetch, prefect=False)
