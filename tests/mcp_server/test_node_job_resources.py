"""synthesis://nodes and synthesis://jobs resources read through an in-process MCP client."""

from __future__ import annotations

import pytest
from mcp.shared.exceptions import MCPError

from mcp_server.resources.jobs import jobs_listing
from mcp_server.resources.nodes import list_nodes
from store import jobs as store_jobs
from store.errors import InvalidInput
from tests.conftest import call, index_sync, read_json


@pytest.fixture
def indexed(app, tree):
    (tree / "docs" / "a b%20c.txt").write_text("spaces and a literal %20")
    return index_sync(app, tree)


async def test_static_and_template_resources_are_listed(client):
    static = {str(r.uri) for r in (await client.list_resources()).resources}
    assert {"synthesis://nodes", "synthesis://jobs", "synthesis://jobs/pending", "synthesis://jobs/running",
            "synthesis://jobs/completed", "synthesis://jobs/failed"} <= static
    templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
    assert {"synthesis://nodes/{+path}", "synthesis://jobs/{id}"} <= templates


async def test_nodes_resource_lists_entries_by_path_with_total(client, indexed, tree):
    res = await read_json(client, "synthesis://nodes")
    every = [str(p) for p in tree.rglob("*")] + [str(tree)]
    assert res["total"] == len(every) == 20
    assert res["limit"] == 100 and res["hasMore"] is False and res["nextUri"] is None and "hint" not in res
    assert [e["path"] for e in res["entries"]] == sorted(every)
    photo = next(e for e in res["entries"] if e["path"].endswith("/photo.jpg"))
    assert photo == {**photo, "name": "photo.jpg", "kind": "file", "size": 5000, "media_type": "image",
                     "uri": "synthesis://nodes" + str(tree / "Photos" / "photo.jpg")}


async def test_nodes_pages_follow_next_uri_to_the_end(client, indexed, tree):
    seen, uri = [], "synthesis://nodes?limit=8"
    while uri:
        page = await read_json(client, uri)
        assert page["total"] == 20 and len(page["entries"]) <= 8
        if page["hasMore"]:
            assert "navigate" in page["hint"]
        seen += [e["path"] for e in page["entries"]]
        uri = page["nextUri"]
    assert len(seen) == 20 and seen == sorted(seen)
    assert (await read_json(client, "synthesis://nodes?limit=2&offset=19"))["entries"] == [page["entries"][-1]]


def test_list_nodes_only_shows_entries_inside_the_roots(app, indexed, tree, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "x.txt").write_text("x")
    from flows.core.roots import Roots

    assert list_nodes(app.engine, Roots.of([str(outside)]))["total"] == 0
    assert list_nodes(app.engine, Roots.of([str(tree / "Videos")]))["total"] == 3
    with pytest.raises(InvalidInput, match="limit must be between 1 and 1000"):
        list_nodes(app.engine, app.roots, limit=5000)


@pytest.mark.parametrize("query, message", [("limit=0", "limit must be a whole number (1-1000)"),
                                            ("limit=ten", "got 'ten'"), ("offset=-1", "offset must be")])
async def test_bad_page_parameters_are_invalid_params_that_name_them(client, indexed, query, message):
    with pytest.raises(MCPError, match=message.replace("(", r"\(").replace(")", r"\)")) as err:
        await client.read_resource("synthesis://nodes?" + query)
    assert err.value.error.code == -32602  # the caller's mistake, not an internal error (-32603)


async def test_inspect_resource_uri_reads_back_the_same_entry(client, indexed, tree):
    path = str(tree / "docs" / "a b%20c.txt")
    inspected = await call(client, "inspect", {"path": path})
    assert inspected["resourceUri"] == "synthesis://nodes" + str(tree / "docs") + "/a%20b%2520c.txt"
    node = await read_json(client, inspected["resourceUri"])
    assert node["path"] == path and node["name"] == "a b%20c.txt" and node["resourceUri"] == inspected["resourceUri"]
    assert node == inspected


async def test_reference_example_node_uri_of_a_movie(client, indexed, tree):
    inspected = await call(client, "inspect", {"path": str(tree / "Videos" / "movie.mp4")})
    node = await read_json(client, inspected["resourceUri"])
    assert node == {**node, "kind": "file", "size": 40000, "mediaType": "video",
                    "metadataUri": inspected["resourceUri"] + "/metadata"}


async def test_directory_node_has_its_child_count(client, indexed, tree):
    node = await read_json(client, "synthesis://nodes" + str(tree / "Photos"))
    assert node["kind"] == "directory" and node["childCount"] == 3 and node["size"] == 10010


async def test_metadata_uri_lists_the_entry_metadata(client, indexed, tree):
    inspected = await call(client, "inspect", {"path": str(tree / "Photos" / "photo.jpg")})
    meta = await read_json(client, inspected["metadataUri"])
    assert meta == {"path": str(tree / "Photos" / "photo.jpg"), "resourceUri": inspected["resourceUri"],
                    "metadataUri": inspected["metadataUri"], "hash": None, "duplicates": 0, "thumbnailUri": None,
                    "metadataCount": 0, "metadata": []}


async def test_a_file_named_metadata_is_still_its_own_node(client, app, tree):
    (tree / "docs" / "metadata").write_text("i am a file")
    index_sync(app, tree)
    node = await read_json(client, "synthesis://nodes" + str(tree / "docs" / "metadata"))
    assert node["kind"] == "file" and node["name"] == "metadata"


@pytest.mark.parametrize("suffix, message", [
    ("/docs/later.txt", "is not in the index; index it"),  # on disk: indexing would bring it in
    ("/docs/later.txt/metadata", "is not in the index; index it"),
    ("/docs/ghost.txt", "does not exist (nothing on disk at that path, nothing indexed)"),
    ("/docs/ghost.txt/metadata", "does not exist"),
    ("/../../../etc/passwd", "outside the allowed roots"),
    ("/%2E%2E/%2E%2E/x", "outside the allowed roots"),
])
async def test_unknown_or_escaping_node_paths_are_invalid_params_that_say_why(client, indexed, tree, suffix,
                                                                              message):
    (tree / "docs" / "later.txt").write_text("written after the index")
    with pytest.raises(MCPError, match=message.replace("(", r"\(").replace(")", r"\)")) as err:
        await client.read_resource("synthesis://nodes" + str(tree) + suffix)
    assert err.value.error.code == -32602
    if "not in the index" not in message:
        assert "not in the index" not in err.value.error.message


async def test_node_outside_the_roots_is_refused_as_invalid_params(client, indexed):
    with pytest.raises(MCPError, match="PATH_TRAVERSAL_DETECTED: .*outside the allowed roots") as err:
        await client.read_resource("synthesis://nodes/etc/passwd")
    assert err.value.error.code == -32602 and "not in the index" not in err.value.error.message


async def test_job_resource_matches_job_progress(client, indexed):
    job_id = indexed["jobId"]
    res = await read_json(client, f"synthesis://jobs/{job_id}")
    progress = await call(client, "job-progress", {"jobId": str(job_id)})
    assert res == progress
    assert res == {**res, "jobId": str(job_id), "status": "completed", "progress": 100.0, "files": 11,
                   "statusUrl": f"synthesis://jobs/{job_id}", "issues": []}


async def test_index_status_url_is_a_readable_resource(client, tree):
    started = await call(client, "index", {"root": str(tree), "async": False, "maxAge": 300})
    res = await read_json(client, started["statusUrl"])
    assert res["root"] == str(tree) and res["status"] == "completed" and res["directories"] == started["directories"]


async def test_jobs_resources_list_by_status(client, app, indexed, tree):
    pending = store_jobs.create_job(app.engine, root=str(tree / "Videos"))
    failed = store_jobs.create_job(app.engine, root=str(tree / "docs"))
    store_jobs.finish_job(app.engine, job_id=failed, status="failed", error_message="disk on fire")
    everything = await read_json(client, "synthesis://jobs")
    assert [j["id"] for j in everything["jobs"]] == [failed, pending, indexed["jobId"]]
    assert everything["total"] == 3 and everything["hasMore"] is False
    expected = {"pending": [pending], "running": [], "completed": [indexed["jobId"]], "failed": [failed]}
    for status, ids in expected.items():
        res = await read_json(client, f"synthesis://jobs/{status}")
        assert res["status"] == status and [j["id"] for j in res["jobs"]] == ids and res["total"] == len(ids)
    assert (await read_json(client, "synthesis://jobs/failed"))["jobs"][0]["error"] == "disk on fire"


def test_jobs_listing_is_bounded_and_says_so(app, tree):
    for _ in range(4):
        store_jobs.create_job(app.engine, root=str(tree))
    res = jobs_listing(app.engine, status="pending", limit=3)
    assert len(res["jobs"]) == 3 and res["total"] == 4 and res["hasMore"] is True and "list-jobs" in res["hint"]


@pytest.mark.parametrize("job, message", [("999", "no job with id 999"),
                                          ("abc", "is not a job id; job ids are whole numbers")])
async def test_unknown_or_malformed_job_id_is_explained(client, indexed, job, message):
    with pytest.raises(MCPError, match=message) as err:
        await client.read_resource(f"synthesis://jobs/{job}")
    assert err.value.error.code == -32602
