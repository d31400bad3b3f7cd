"""Resource ids (flows.addresses.ids): readable names from file names, unique, stable, and safe to reserve from two
threads at once; on SQLite and on PostgreSQL."""

from __future__ import annotations

import itertools
import re
import threading

import pytest
from sqlalchemy import func, insert, select

from flows.addresses.ids import candidates, existing_ids, reserve_ids, slug
from flows.addresses.model import RESOURCE_ID_PATTERN, hit_address
from flows.citations.address import parse_address
from store.models import Entry, ResourceMapRow
from tests.conftest import BACKENDS, backend_engine

E = Entry.__table__
R = ResourceMapRow.__table__
_next = itertools.count(1)


@pytest.fixture(scope="module", params=BACKENDS)
def engine(request, tmp_path_factory):
    with backend_engine(request, tmp_path_factory, "citation_ids") as eng:
        yield eng


def entries(engine, *paths: str) -> list[tuple[int, str, str]]:
    """Entries for ``paths`` (each test its own folder, so the module's store is shared), as reserve_ids items."""
    folder = f"/data/t{next(_next)}"
    items = []
    with engine.begin() as conn:
        for rel in paths:
            path = f"{folder}/{rel}"
            entry_id = conn.execute(insert(E).values(path=path, parent=path.rsplit("/", 1)[0],
                                                     name=path.rsplit("/", 1)[1], kind="file", indexed_at=0.0)
                                    .returning(E.c.id)).scalar_one()
            items.append((entry_id, path, "document"))
    return items


@pytest.mark.parametrize("name, expected", [
    ("lecture 01", "lecture_01"),
    ("Report (final) v2", "Report_final_v2"),
    ("résumé", "resume"),
    ("...hidden", "hidden"),
    ("__init__", "init"),
    ("報告", "resource"),
    ("---", "resource"),
    ("", "resource"),
    ("a" * 300, "a" * 100),
    ("notes.v2-draft", "notes.v2-draft"),
])
def test_slug_keeps_a_readable_id_of_the_name(name, expected):
    assert slug(name) == expected
    assert re.fullmatch(RESOURCE_ID_PATTERN, slug(name))


def test_candidates_are_the_stem_then_the_extension_then_numbers():
    assert list(itertools.islice(candidates("/x/report.pdf"), 4)) == ["report", "report_pdf", "report_2", "report_3"]
    assert list(itertools.islice(candidates("/x/Makefile"), 2)) == ["Makefile", "Makefile_2"]
    assert list(itertools.islice(candidates("/x/.bashrc"), 2)) == ["bashrc", "bashrc_2"]
    assert next(candidates("/x/my talk (1).MP4")) == "my_talk_1"
    for name in ("/x/" + "é" * 300 + ".tar.gz", "/x/ .  .", "/x/a.b.c.d"):
        assert all(re.fullmatch(RESOURCE_ID_PATTERN, c) for c in itertools.islice(candidates(name), 3))


def test_ids_are_stable_and_collisions_take_the_next_candidate(engine):
    items = entries(engine, "report.pdf", "report.md", "other/report.pdf", "other/report.md", "notes.txt")
    first = reserve_ids(engine, items)
    # in the order asked: the plain name, then the extension, then a number
    assert [first[e] for e, _, _ in items] == ["report", "report_md", "report_pdf", "report_2", "notes"]
    assert reserve_ids(engine, list(reversed(items))) == first  # asked again, in any order: the same ids
    with engine.connect() as conn:
        rows = conn.execute(select(R.c.entry_id, R.c.kind, R.c.origin)
                            .where(R.c.entry_id.in_([e for e, _, _ in items]))).all()
    assert sorted(rows) == sorted((e, "document", "none") for e, _, _ in items)  # one row each, id only


def test_ids_taken_earlier_are_skipped_and_names_are_kept_readable(engine):
    (a,) = entries(engine, "lecture 01.mp4")
    (b,) = entries(engine, "lecture 01.mp4")
    (c,) = entries(engine, "lecture_01.mp4")
    ids = {}
    for item in (a, b, c):
        ids.update(reserve_ids(engine, [item]))
    assert [ids[a[0]], ids[b[0]], ids[c[0]]] == ["lecture_01", "lecture_01_mp4", "lecture_01_2"]
    odd = entries(engine, "  spaced out .pdf", "Ünïcödé.md", "...leading.txt", "日本語.pdf")
    named = reserve_ids(engine, odd)
    assert [named[e] for e, _, _ in odd][:3] == ["spaced_out", "Unicode", "leading"]
    assert named[odd[3][0]].startswith("resource")
    assert all(re.fullmatch(RESOURCE_ID_PATTERN, r) for r in named.values())


def test_a_common_name_takes_the_smallest_free_number_past_the_first_candidates(engine):
    first = entries(engine, *(f"d{i}/README.md" for i in range(12)))
    ids = reserve_ids(engine, first)
    assert [ids[e] for e, _, _ in first] == ["README", "README_md"] + [f"README_{n}" for n in range(2, 12)]
    with engine.begin() as conn:  # a gap, and ids that only look numbered, are not in the way
        conn.execute(R.delete().where(R.c.resource_id == "README_5"))
        conn.execute(insert(R).values(resource_id="README_05", kind="text", origin="none", created_at=0.0))
    more = entries(engine, *(f"e{i}/README.md" for i in range(3)))
    again = reserve_ids(engine, more)
    assert [again[e] for e, _, _ in more] == ["README_5", "README_12", "README_13"]


def test_reading_ids_of_entries_that_have_them_writes_nothing(engine):
    items = entries(engine, *(f"doc{i}.pdf" for i in range(50)))
    reserve_ids(engine, items)
    with engine.connect() as conn:
        before = conn.execute(select(func.count()).select_from(R)).scalar()
    again = reserve_ids(engine, items)
    assert existing_ids(engine, [e for e, _, _ in items]) == again and len(again) == 50
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(R)).scalar() == before


def test_two_threads_reserving_the_same_names_get_one_id_per_entry(engine):
    shared = entries(engine, *(f"s{i}/paper{i % 4}.pdf" for i in range(12)))
    own = [entries(engine, *(f"o{i}/paper{i % 4}.pdf" for i in range(6))) for _ in range(2)]
    results: list[dict[int, str]] = [{}, {}]
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def work(k: int) -> None:
        try:
            barrier.wait()
            results[k] = reserve_ids(engine, shared + own[k])
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for e, _, _ in shared:
        assert results[0][e] == results[1][e]  # the same entry: the same id for both callers
    every = {**results[0], **results[1]}
    assert len(every) == 24 and len(set(every.values())) == 24  # distinct entries: distinct ids
    with engine.connect() as conn:
        rows = conn.execute(select(R.c.entry_id, R.c.resource_id).where(R.c.entry_id.in_(list(every)))).all()
    assert dict(rows) == every and len(rows) == 24  # one row per entry


@pytest.mark.parametrize("modality, place, expected", [
    ("document", {"page": 3, "page_end": 3, "line_start": 40, "line_end": 52}, "doc://rules#pages=3"),
    ("document", {"page": 3, "page_end": 4, "line_start": 40, "line_end": 80}, "doc://rules#pages=3-4"),
    ("document", {"page": None, "line_start": 1, "line_end": 2}, "doc://rules"),
    ("text", {"line_start": 10, "line_end": 20}, "text://rules#lines=10-20"),
    ("text", {"line_start": 7, "line_end": 7}, "text://rules#lines=7"),
    ("image", {"line_start": 1, "line_end": 3}, "image://rules"),
])
def test_a_hit_address_is_canonical_and_parses_back(modality, place, expected):
    address = hit_address("rules", modality, **place)
    assert address == expected and parse_address(address).format() == address
