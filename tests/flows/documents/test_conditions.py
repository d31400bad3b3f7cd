"""Plan conditions on extracted text: ``text contains "..."`` and ``text matches "..."``.

On SQLite and PostgreSQL: known conditions select the expected entries through the plan engine's split (the SQL part
narrowed by the full-text index, the residual checked line by line in Python) and in Python alone; the SQL part
really narrows (entries without the text are not read) and is never narrower than the answer (a property test over
random trees); entries without text have no value; plan-explain names the matched line; plan-preview counts and
notes a rule that tests text an earlier extract_text rule fills. And one real plan run that extracts generated
documents and selects on their text in the same execution.

The store-level tests write documents with ``store.documents.write_extracted_many`` (no extraction)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

import flows.documents  # noqa: F401  (installs the documents capability: extract_text and the text field)
from dsl.conditions import Compare, Group, Not
from dsl.model import Plan
from dsl.sql import Superset, split
from flows.documents.model import FILTER_FAILED, Extracted, Page
from flows.plans.preview import explain_path, preview_plan
from flows.core.roots import Roots
from store.documents import DocumentWrite, write_extracted_many
from store.engine import make_engine
from store.entries import T, make_row, upsert_entries
from tests.condition_store import NOW, ConditionStore, condition_store
from tests.conftest import BACKENDS, backend_engine

LONG_LINES = [f"filler line number {i:05d}" for i in range(1, 3001)] + ["the needle is here"]

# name -> its extraction: pages of text (a page with "ocr" read by OCR), an error, or None (never extracted)
DOCS: dict[str, object] = {
    "invoice.pdf": ("pdf", ["Quarterly report\nfor the board", "Invoice INV-204512\nAmount due: 40 EUR",
                            "thanks"]),
    "receipt.md": ("markdown", ["# Receipt\nreceipt number INV-77\ninvoice attached"]),
    "scan.pdf": ("pdf", [("ocr", "SCANNED INVOICE 4711")]),
    "greek.txt": ("text", ["ΟΔΟΣ ΑΣ end\nσοφία"]),
    "signs.txt": ("text", ["100% sure_thing\npath C:\\temp\\x\nquote \"it\" here"]),
    "long.txt": ("text", ["\n".join(LONG_LINES)]),  # two segments: the needle is in the second
    "empty.txt": ("text", [""]),
    "caseless.txt": ("text", ["the \u017fun and \u212aelvin"]),
    "locked.pdf": FILTER_FAILED,
    "unread.txt": None,
}
NAMES = set(DOCS)
WITH_TEXT = {n for n, d in DOCS.items() if isinstance(d, tuple)}


def _extracted(name: str, spec) -> Extracted:
    if spec == FILTER_FAILED:
        return Extracted(path=name, format="pdf", error_code=FILTER_FAILED, error="encrypted PDF")
    fmt, pages = spec
    out = []
    for i, page in enumerate(pages, 1):
        ocr = isinstance(page, tuple)
        out.append(Page(number=i, text=page[1] if ocr else page, ocr=ocr))
    return Extracted(path=name, format=fmt, pages=out, total_pages=len(out))


def fill(engine, root: Path) -> dict[str, int]:
    rows = [make_row(str(root / name), kind="file", size=100 + i, mtime=NOW - 60, ctime=NOW - 60, inode=None,
                     scan_id=None, indexed_at=NOW) for i, name in enumerate(sorted(DOCS))]
    with engine.begin() as conn:
        upsert_entries(conn, rows)
        ids = dict(conn.execute(select(T.c.name, T.c.id)).all())
    write_extracted_many(engine, [DocumentWrite(ids[n], 1, 1.0, "k", _extracted(n, spec))
                                  for n, spec in DOCS.items() if spec is not None])
    return ids


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store(request, tmp_path_factory):
    with condition_store(request, tmp_path_factory, backend=request.param, files=DOCS, fill=fill,
                         prefix="assay_text") as found:
        yield found


def plan_of(root: Path, rules: list[dict]) -> Plan:
    return Plan.from_object({"name": "p", "sources": [{"name": "lib", "type": "filesystem.index",
                                                       "config": {"path": str(root)}}], "rules": rules})


def when(expression: str):
    """The condition of ``expression`` as a plan reads it (the DSL's expression text)."""
    return plan_of(Path("/x"), [{"name": "r", "when": expression,
                                 "outcomes": [{"type": "selection_set", "selectionSetName": "s"}]}]).rules[0].when


# --- known conditions ----------------------------------------------------------------------------------------------

CASES = [  # (expression, the entries it selects)
    ('text contains "Invoice"', {"invoice.pdf"}),
    ('text contains "invoice"', {"receipt.md"}),  # case-sensitive, like every text comparison of plans
    ('text contains "INVOICE"', {"scan.pdf"}),  # OCR text counts like any other
    (r'text matches "INV-\d{6}"', {"invoice.pdf"}),
    (r'text matches "INV-\d+"', {"invoice.pdf", "receipt.md"}),
    ('text matches "(?i)invoice"', {"invoice.pdf", "receipt.md", "scan.pdf"}),
    ('text matches "(?i)KELVIN"', {"caseless.txt"}),  # the Kelvin sign is a K to RE2 and lowers to k
    ('text matches "(?i)SUN"', {"caseless.txt"}),  # the long s is an s to RE2 but lowers to itself
    ('text matches "^thanks$"', {"invoice.pdf"}),  # ^ and $ are the line's ends
    ('text matches "report$"', {"invoice.pdf"}),
    ('text contains "Amount due: 40 EUR\\nthanks"', set()),  # a value never spans two lines
    ('text contains "Quarterly report" and text contains "40 EUR"', {"invoice.pdf"}),  # lines of different pages
    ('text contains "Σ"', {"greek.txt"}),  # a capital sigma folds by its neighbours: the index must not miss it
    ('text contains "ΑΣ end"', {"greek.txt"}),
    ('text contains "ΟΔΟΣ"', {"greek.txt"}),
    ('text contains "σοφ"', {"greek.txt"}),
    ('text contains "0% s"', {"signs.txt"}),  # % and _ are literal, never LIKE wildcards
    ('text contains "e_t"', {"signs.txt"}),
    ('text contains "x_y"', set()),
    ('text contains "C:\\\\temp"', {"signs.txt"}),
    ('text contains "\\"it\\""', {"signs.txt"}),
    ('text contains "the needle is"', {"long.txt"}),
    ('text contains "number 02999"', {"long.txt"}),
    ('text contains "in"', {"receipt.md", "long.txt", "signs.txt", "caseless.txt"}),  # too short for the index
    ('text contains ""', WITH_TEXT),  # every extracted document has a line (an empty one at least)
    ('not (text contains "Invoice")', NAMES - {"invoice.pdf"}),  # no text is a missing value: not is true
    ('none (text matches "INV", text contains "Σ")', NAMES - {"invoice.pdf", "receipt.md", "scan.pdf",
                                                                         "greek.txt"}),
    ('text contains "Invoice" or name = "locked.pdf"', {"invoice.pdf", "locked.pdf"}),
    ('size >= 105 and text matches "[a-z]+ing"', {"signs.txt"}),
    ('text contains "anything" or name = "unread.txt"', {"unread.txt"}),
]


@pytest.mark.parametrize("expression, expected", CASES, ids=[c[0] for c in CASES])
def test_text_conditions_select_the_same_entries_through_the_index_and_line_by_line(store, expression, expected):
    cond = when(expression)
    assert store.split_names(cond) == expected
    assert store.python_names(cond) == expected


@pytest.mark.parametrize("expression, read", [
    ('text contains "Invoice"', {"invoice.pdf", "receipt.md", "scan.pdf"}),  # the folded trigrams of "invoice"
    (r'text matches "INV-\d{6}"', {"invoice.pdf", "receipt.md"}),  # those whose folded text holds "inv-"
    ('text contains "needle" and size > 0', {"long.txt"}),
    ('text contains "ΑΣ end"', {"greek.txt"}),
    ('text matches "(?i)invoice"', {"invoice.pdf", "receipt.md", "scan.pdf"}),  # its lower-case run
    (r'text matches "\d"', WITH_TEXT),  # no literal to look up: only "has extracted text"
    ('text contains "Invoice" or name = "locked.pdf"', {"invoice.pdf", "receipt.md", "scan.pdf", "locked.pdf"}),
])
def test_the_sql_part_reads_only_entries_the_index_says_may_match(store, expression, read):
    push, residual = split(when(expression))
    assert isinstance(push, Superset) and residual is not None
    assert store.sql_names(push) == read


def test_the_prefilter_lists_the_entries_the_text_engine_finds(store):
    clause = store.sql.clause(split(when('text contains "Invoice"'))[0])
    with store.engine.connect() as conn:
        sql = str(select(T.c.id).where(clause).compile(conn, compile_kwargs={"literal_binds": True}))
        listed = set(conn.execute(select(T.c.name).where(clause)).scalars())
    assert " IN (" in sql and "document_fts" not in sql
    assert listed == {"invoice.pdf", "receipt.md", "scan.pdf"}


# --- SQL never narrower than the answer, on random trees --------------------------------------------------------

VALUES = ["Invoice", "invoice", "INV-", "report", "Σ", "ΑΣ", "σ", "0% s", "e_t", "needle", "in", "", "thanks",
          "line number 0", "EUR\nthanks", "\"it\"", "C:\\temp"]
PATTERNS = [r"INV-\d{6}", r"INV-\d+", "(?i)invoice", "(?i)SUN", "(?i)kelvin", "^thanks$", "report$", "[a-z]+ing",
            "ΑΣ|σοφ", "numb?er 01", "e.t", r"\d{5}", "(due|EUR) 40", "^$", "x*"]


@st.composite
def text_leaves(draw):
    kind = draw(st.sampled_from(["contains", "matches", "size", "name"]))
    if kind == "contains":
        return Compare(field="text", op="contains", value=draw(st.sampled_from(VALUES)))
    if kind == "matches":
        return Compare(field="text", op="matches", value=draw(st.sampled_from(PATTERNS)))
    if kind == "size":
        return Compare(field="size", op=">", value=draw(st.integers(99, 110)))
    return Compare(field="name", op="in", value=draw(st.lists(st.sampled_from(sorted(NAMES)), min_size=1,
                                                               max_size=3)))


trees = st.recursive(text_leaves(), lambda kids: st.one_of(
    st.builds(lambda t, cs: Group(type=t, conditions=cs), st.sampled_from(["all", "all", "any", "none"]),
              st.lists(kids, max_size=3)),
    st.builds(lambda c: Not(condition=c), kids)), max_leaves=5)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(cond=trees)
def test_the_engine_split_selects_what_python_alone_selects_on_random_trees(store, cond):
    assert store.split_names(cond) == store.python_names(cond)


@pytest.fixture(scope="module", params=BACKENDS)
def scratch(request, tmp_path_factory):
    """A store with one entry whose document the test rewrites."""
    with backend_engine(request, tmp_path_factory, "assay_scratch") as engine:
        with engine.begin() as conn:
            upsert_entries(conn, [make_row("/scratch/doc.txt", kind="file", size=1, mtime=NOW, ctime=NOW, inode=None,
                                           scan_id=None, indexed_at=NOW)])
        yield ConditionStore(engine, Path("/scratch"))


TRICKY = "aAbΣσςİiIßẞK\u212a%_\\\"' \t😀ée\u0301"  # case folding that changes lengths or depends on neighbours


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.text(alphabet=TRICKY, max_size=12), min_size=1, max_size=4), data=st.data())
def test_a_value_taken_from_a_line_is_always_found_through_the_index(scratch, lines, data):
    (row,) = scratch.rows
    write_extracted_many(scratch.engine, [DocumentWrite(row["id"], 1, 1.0, "k", Extracted(
        path="doc.txt", format="text", pages=[Page(1, "\n".join(lines))], total_pages=1))])
    line = data.draw(st.sampled_from(lines))
    start = data.draw(st.integers(0, len(line)))
    value = line[start:start + data.draw(st.integers(0, 8))]
    cond = Compare(field="text", op="contains", value=value)
    assert scratch.split_names(cond) == {"doc.txt"}
    other = Compare(field="text", op="contains", value=value + "Z")  # never in the text: Z is not in the alphabet
    assert scratch.split_names(other) == scratch.python_names(other) == set()


# --- plan-explain and plan-preview -------------------------------------------------------------------------------

SELECT = {"type": "selection_set", "selectionSetName": "hits"}


def leaves(node: dict) -> list[dict]:
    return [node] if "children" not in node else [leaf for child in node["children"] for leaf in leaves(child)]


def _explained(store, expression: str, name: str) -> list[dict]:
    p = plan_of(store.root, [{"name": "r", "when": expression, "outcomes": [SELECT]}])
    out = explain_path(store.engine, p, roots=Roots.of([str(store.root)]), path=str(store.root / name))
    return leaves(out["rules"][0]["condition"])


def test_explain_names_the_line_that_matched(store):
    (leaf,) = _explained(store, r'text matches "INV-\d{6}"', "invoice.pdf")
    assert leaf["passed"] is True
    assert leaf["seen"] == {"line": 3, "text": "Invoice INV-204512", "page": 2}
    assert leaf["note"] == "matched line 3 on page 2: Invoice INV-204512"
    (leaf,) = _explained(store, 'text contains "the needle"', "long.txt")  # formats without pages: no page
    assert leaf["note"] == f"matched line {len(LONG_LINES)}: the needle is here"
    (leaf,) = _explained(store, 'text contains "INVOICE"', "scan.pdf")
    assert leaf["note"] == "matched line 1 on page 1 (read with OCR): SCANNED INVOICE 4711"


def test_explain_says_why_nothing_matched(store):
    (leaf,) = _explained(store, 'text contains "zebra"', "receipt.md")
    assert leaf["passed"] is False and leaf["note"] == "no line matches (3 lines of extracted text)"
    (leaf,) = _explained(store, 'text contains "zebra"', "locked.pdf")
    assert leaf["note"] == "no extracted text: extraction failed (FILTER_FAILED: encrypted PDF)"
    (leaf,) = _explained(store, 'text contains "zebra"', "unread.txt")
    assert leaf["seen"] is None and leaf["note"] == "no extracted text (the file has not been extracted)"


def test_explain_cuts_a_long_matching_line_around_the_match():
    from flows.documents.conditions import EXCERPT, excerpt

    line = "a" * 1000 + "TARGET" + "b" * 1000
    cut = excerpt(line, line.index("TARGET"))
    assert "TARGET" in cut and cut.startswith("...") and cut.endswith("...")
    assert len(cut) == EXCERPT + 6
    assert excerpt("short", 0) == "short"


def test_preview_counts_text_matches_and_shows_samples(store):
    p = plan_of(store.root, [{"name": "inv", "when": r'text matches "INV-\d+"', "outcomes": [SELECT]}])
    rule = preview_plan(store.engine, p, roots=Roots.of([str(store.root)]))["rules"][0]
    assert rule["matched"] == 2
    assert sorted(Path(s["path"]).name for s in rule["samples"]) == ["invoice.pdf", "receipt.md"]
    assert rule["outcomes"][0]["would_apply_to"] == 2
    assert "notes" not in rule


def test_preview_notes_a_rule_whose_text_an_earlier_extract_text_rule_fills(store):
    p = plan_of(store.root, [{"name": "extract", "when": "size > 0", "outcomes": [{"type": "extract_text"}]},
                             {"name": "inv", "when": 'text contains "Invoice"', "outcomes": [SELECT]}])
    extract, inv = preview_plan(store.engine, p, roots=Roots.of([str(store.root)]))["rules"]
    assert "notes" not in extract
    assert inv["matched"] == 1
    assert inv["notes"] == [
        "uses text, filled by the extract_text outcome of rule 'extract'; entries it has not processed yet are "
        "counted as not matching here (plan-execute runs rule 'extract' first, so more may match then)"]


# --- one real run: extract, then select on the text ------------------------------------------------------------------


def test_a_plan_extracts_documents_and_later_rules_select_on_their_text_in_one_execution(tmp_path):
    from flows.plans.service import PlanService
    from store import sets as store_sets
    from examples.mediagen import documents as dm

    root = tmp_path / "lib"
    dm.pdf_with_outline(root / "rules.pdf")
    dm.markdown(root / "notes.md")
    (root / "plain.txt").write_text("Attack dice everywhere, but not in a PDF\n")
    engine = make_engine(f"sqlite:///{tmp_path / 'assay.db'}")
    service = PlanService(engine, Roots.of([str(root)]), use_prefect=False)
    try:
        plan = Plan.from_object({"name": "extract-then-select", "sources": [
            {"name": "lib", "type": "filesystem.index", "config": {"path": str(root)}}], "rules": [
            {"name": "extract", "when": "extension in [.pdf, .md]", "outcomes": [{"type": "extract_text"}]},
            {"name": "dice", "when": 'text matches "(Attack|defence) dice"',
             "outcomes": [{"type": "selection_set", "selectionSetName": "dice"}]},
            {"name": "shuffle", "when": 'text contains "Shuffle" and not (text contains "Quest")',
             "outcomes": [{"type": "selection_set", "selectionSetName": "shuffle"}]}]})
        service.save(plan, create=True)
        row = service.execute(plan, wait=True)
        assert row["status"] == "success", row
        assert row["summary"]["rules"]["dice"]["matched"] == 1
        assert row["summary"]["rules"]["shuffle"]["matched"] == 1

        def members(name):
            found = store_sets.describe_set(engine, name=name, include_entries=True, limit=10)
            return sorted(Path(e["path"]).name for e in found["entries"])

        assert members("dice") == ["rules.pdf"]  # plain.txt has the words but was never extracted
        assert members("shuffle") == ["notes.md"]
        out = explain_path(engine, plan, roots=Roots.of([str(root)]), path=str(root / "rules.pdf"))
        (leaf,) = leaves(out["rules"][1]["condition"])
        assert re.fullmatch(r"matched line \d+ on page 4: Attack dice are rolled against defence dice\.",
                            leaf["note"]), leaf
    finally:
        service.shutdown()
        engine.dispose()
