"""How the documents' hits are cited (flows.documents.citing): each file in the modality of its format, its resource
id reserved once for all the hits; on SQLite and on PostgreSQL."""

from __future__ import annotations

import itertools

import pytest
from sqlalchemy import insert, select

from flows.documents.citing import document_modality, hit_ids
from store.models import Entry, ResourceMapRow
from tests.conftest import BACKENDS, backend_engine

E = Entry.__table__
R = ResourceMapRow.__table__
_next = itertools.count(1)


@pytest.fixture(scope="module", params=BACKENDS)
def engine(request, tmp_path_factory):
    with backend_engine(request, tmp_path_factory, "documents_citing") as eng:
        yield eng


def entries(engine, *paths: str) -> list[tuple[int, str]]:
    """(entry id, path) of new entries for ``paths``, each test in its own folder (the module's store is shared)."""
    folder = f"/data/t{next(_next)}"
    items = []
    with engine.begin() as conn:
        for rel in paths:
            path = f"{folder}/{rel}"
            entry_id = conn.execute(insert(E).values(path=path, parent=folder, name=rel, kind="file",
                                                     indexed_at=0.0).returning(E.c.id)).scalar_one()
            items.append((entry_id, path))
    return items


@pytest.mark.parametrize("path, modality", [("/x/a.pdf", "document"), ("/x/b.EPUB", "document"),
                                            ("/x/c.md", "text"), ("/x/d.py", "text"), ("/x/e.docx", "text"),
                                            ("/x/scan.png", "image")])
def test_a_document_is_cited_in_the_modality_of_its_format(path, modality):
    assert document_modality(path) == modality


def test_hit_ids_reserve_with_the_modality_of_each_file_and_skip_deleted_entries(engine):
    items = entries(engine, "guide.pdf", "guide.md")
    ids = hit_ids(engine, items + [items[0], (10**9, "/gone/x.md")])
    assert ids == {items[0][0]: "guide", items[1][0]: "guide_md"}  # the deleted entry gets none, nothing fails
    with engine.connect() as conn:
        rows = conn.execute(select(R.c.resource_id, R.c.kind).where(R.c.resource_id.in_(["guide", "guide_md"])))
        kinds = {resource_id: kind for resource_id, kind in rows}
    assert kinds == {"guide": "document", "guide_md": "text"}
