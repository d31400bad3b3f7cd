"""completion/complete for resource-template arguments, through the Python SDK client's `complete`."""

from __future__ import annotations

import pytest
from mcp_types import PromptReference, ResourceTemplateReference

from tests.conftest import call, index_sync


async def complete(client, template: str, argument: str, value: str):
    result = await client.complete(ResourceTemplateReference(uri=template), {"name": argument, "value": value})
    return result.completion


@pytest.fixture
async def named(client, app, tree):
    index_sync(app, tree)
    for name in ("photos", "photos-2024", "videos"):
        await call(client, "resource-set-create", {"name": name})
    await call(client, "plan-create", {"text": f"plan tidy\nsource home index {tree}\nrule r when size > 1\n"
                                               "  do selection_set big\n"})


async def test_the_server_says_it_completes(client):
    assert client.server_capabilities.completions is not None


@pytest.mark.parametrize("template", ["synthesis://resource-sets/{name}", "synthesis://resource-sets/{name}/stats",
                                      "synthesis://resource-sets/{name}/entries{?limit,offset}"])
async def test_set_names_complete_in_every_set_template(client, named, template):
    got = await complete(client, template, "name", "pho")
    assert got.values == ["photos", "photos-2024"] and got.total == 2 and not got.has_more
    everything = await complete(client, template, "name", "")
    assert everything.values == ["photos", "photos-2024", "videos"] and everything.total == 3


async def test_metric_and_plan_names_and_job_ids_complete(client, named):
    assert (await complete(client, "synthesis://resource-sets/{name}/metrics/{metric}", "metric", "s")).values == \
        ["size", "symlinks"]
    assert (await complete(client, "synthesis://plans/{name}/executions", "name", "t")).values == ["tidy"]
    assert (await complete(client, "synthesis://jobs/{id}", "id", "")).values == ["1"]


async def test_resource_ids_complete_in_the_map_template(client, named, tree):
    await call(client, "map-build", {"resource": str(tree / "Photos" / "notes.txt")})
    got = await complete(client, "synthesis://maps/{resource_id}", "resource_id", "no")
    assert got.values == ["notes"] and got.total == 1


async def test_a_prefix_with_like_wildcards_is_taken_literally(client, named):
    await call(client, "resource-set-create", {"name": "a_b"})
    await call(client, "resource-set-create", {"name": "axb"})
    assert (await complete(client, "synthesis://resource-sets/{name}", "name", "a_")).values == ["a_b"]


async def test_paths_complete_from_the_folder_typed_so_far(client, named, tree):
    rel = str(tree).lstrip("/")
    assert (await complete(client, "synthesis://nodes/{+path}", "path", rel + "/Ph")).values == [rel + "/Photos"]
    inside = await complete(client, "synthesis://nodes/{+path}", "path", rel + "/Photos/")
    assert inside.values == [rel + "/Photos/notes.txt", rel + "/Photos/photo.jpg", rel + "/Photos/vacation"]
    top = await complete(client, "synthesis://nodes/{+path}", "path", rel + "/")
    assert ".hidden" not in " ".join(top.values) and rel + "/docs" in top.values
    hidden = await complete(client, "synthesis://nodes/{+path}", "path", rel + "/.")
    assert hidden.values == [rel + "/.hidden"]


async def test_path_completion_offers_the_roots_and_nothing_outside_them(client, named, tree):
    rel = str(tree).lstrip("/")
    assert (await complete(client, "synthesis://nodes/{+path}", "path", "")).values == [rel]
    assert (await complete(client, "synthesis://nodes/{+path}", "path", rel[:-2])).values == [rel]
    assert (await complete(client, "synthesis://nodes/{+path}", "path", "etc/")).values == []
    assert (await complete(client, "synthesis://nodes/{+path}", "path", rel + "/../../")).values == []


async def test_path_completion_stops_at_one_hundred_and_gives_the_total(client, app, tree):
    folder = tree / "many"
    folder.mkdir()
    for i in range(150):
        (folder / f"f{i:03d}.txt").write_text("")
    got = await complete(client, "synthesis://nodes/{+path}", "path", str(folder).lstrip("/") + "/f1")
    assert len(got.values) == 50 and got.values[0].endswith("/f100.txt") and got.total == 50 and not got.has_more
    every = await complete(client, "synthesis://nodes/{+path}", "path", str(folder).lstrip("/") + "/")
    assert len(every.values) == 100 and every.total == 150 and every.has_more
    assert every.values == sorted(every.values)


async def test_unknown_templates_arguments_and_prompts_complete_to_nothing(client, named):
    assert (await complete(client, "synthesis://nodes{?limit,offset}", "limit", "1")).values == []
    assert (await complete(client, "synthesis://resource-sets/{name}", "colour", "r")).values == []
    result = await client.complete(PromptReference(name="nope"), {"name": "x", "value": ""})
    assert result.completion.values == []
