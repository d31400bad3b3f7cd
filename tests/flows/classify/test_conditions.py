"""Conditions on what the classifier produces (width, height, duration, pages, title, author, hash, duplicates,
exif.<tag>, metadata.<key>): the issue's examples in the DSL, YAML and JSON forms select the same entries in SQL and
in Python on SQLite and PostgreSQL; duplicates counts the others; missing values; plan-explain shows the values
seen; plan-preview says when a rule depends on an earlier classifier rule; and one real plan that classifies three
JPEGs and selects the wide ones in the same run.

The store-level tests write entries, hashes and metadata_values rows directly (no media)."""

from __future__ import annotations


import json
from pathlib import Path

import pytest
from sqlalchemy import insert, select, text, update

import flows.classify  # noqa: F401  (installs the classifier: its executor, fields and producer)
from dsl import parse_plan_text
from dsl.conditions import Compare, Group, Not
from dsl.model import Plan
from flows.plans.preview import explain_path, preview_plan
from flows.core.roots import Roots
from store.engine import make_engine
from store.entries import T, make_row, upsert_entries
from store.models import MetadataValue
from tests.condition_store import NOW, ConditionStore, condition_store

MV = MetadataValue.__table__
H1 = "xxh128:" + "1" * 32
H2 = "xxh128:" + "2" * 32
H3 = "xxh128:" + "3" * 32
H4 = "xxh128:" + "4" * 32
H5 = "xxh128:" + "5" * 32

# name -> (content hash, metadata_values as the classifier writes them: numbers as numbers, text as text)
CORPUS: dict[str, tuple[str | None, dict]] = {
    "wide.jpg": (H1, {"width": 4000, "height": 3000, "format": "JPEG", "exif.Make": "FUJIFILM",
                      "exif.Model": "X-T4", "exif.ISO": 400}),
    "wide-copy.jpg": (H1, {"width": 4000, "height": 3000, "format": "JPEG", "exif.Model": "X-T4"}),
    "wide-third.jpg": (H1, {"width": 4000, "height": 3000, "format": "JPEG", "exif.Model": "X-T4"}),
    "small.jpg": (H2, {"width": 800, "height": 600, "format": "JPEG", "exif.Model": "iPhone 13"}),
    "long.mp4": (H3, {"duration": 900.0, "width": 1280, "height": 720, "video_codec": "h264", "fps": 25.0}),
    "short.mp4": (H4, {"duration": 30.5, "width": 3840, "height": 2160, "video_codec": "hevc"}),
    "book.pdf": (H5, {"pages": 120, "title": "Annual Report 2024", "author": "Ann Smith"}),
    "leaflet.pdf": (None, {"pages": 2, "title": "Leaflet"}),  # metadata without a hash (an older run, say)
    "notes.txt": (None, {}),  # never classified
}
NAMES = set(CORPUS)
HASHED = {n for n, (h, _) in CORPUS.items() if h}
WIDE = {"wide.jpg", "wide-copy.jpg", "wide-third.jpg"}


def fill(engine, root: Path) -> None:
    rows = [make_row(str(root / name), kind="file", size=1000 + i, mtime=NOW - 60, ctime=NOW - 60, inode=None,
                     scan_id=None, indexed_at=NOW) for i, name in enumerate(sorted(CORPUS))]
    with engine.begin() as conn:
        upsert_entries(conn, rows)
        ids = dict(conn.execute(select(T.c.name, T.c.id)).all())
        meta = []
        for name, (hash_, values) in CORPUS.items():
            if hash_:
                conn.execute(update(T).where(T.c.id == ids[name]).values(hash=hash_))
            for key, value in values.items():
                number = isinstance(value, (int, float))
                meta.append({"entry_id": ids[name], "key": key, "num_value": value if number else None,
                             "text_value": None if number else value})
        conn.execute(insert(MV), meta)


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store(request, tmp_path_factory):
    with condition_store(request, tmp_path_factory, backend=request.param, files=CORPUS, fill=fill,
                         prefix="assay_cls") as found:
        yield found


def C(field: str, op: str, value) -> Compare:
    return Compare(field=field, op=op, value=value)


# --- the issue's examples, in the three forms --------------------------------------------------------------------

EXAMPLES = [  # (expression text, JSON object form, the entries selected)
    ("width > 3000", {"field": "width", "op": ">", "value": 3000}, WIDE | {"short.mp4"}),
    ("duration > 10min", {"field": "duration", "op": ">", "value": "10min"}, {"long.mp4"}),
    ("pages >= 20", {"field": "pages", "op": ">=", "value": 20}, {"book.pdf"}),
    ('exif.Model = "X-T4"', {"field": "exif.Model", "op": "=", "value": "X-T4"}, WIDE),
    (f'hash = "{H1}"', {"field": "hash", "op": "=", "value": H1}, WIDE),
    ("duplicates > 0", {"field": "duplicates", "op": ">", "value": 0}, WIDE),
    ("metadata.video_codec = h264", {"field": "metadata.video_codec", "op": "=", "value": "h264"}, {"long.mp4"}),
]


def _rule_when(plan: Plan):
    return plan.rules[0].when


def forms(root: Path, expression: str, obj: dict) -> dict[str, Plan]:
    dsl = f"plan p\nsource home index {root}\nrule r when {expression}\n  do selection_set picked\n"
    yaml_text = (f"name: p\nsources:\n  - {{name: home, type: filesystem.index, config: {{path: '{root}'}}}}\n"
                 f"rules:\n  - name: r\n    when: {json.dumps(expression)}\n"
                 "    outcomes: [{type: selection_set, selectionSetName: picked}]\n")
    json_text = json.dumps({"name": "p", "sources": [{"name": "home", "type": "filesystem.index",
                                                      "config": {"path": str(root)}}],
                            "rules": [{"name": "r", "when": obj,
                                       "outcomes": [{"type": "selection_set", "selectionSetName": "picked"}]}]})
    return {"dsl": parse_plan_text(dsl, format="dsl"), "yaml": parse_plan_text(yaml_text, format="yaml"),
            "json": parse_plan_text(json_text, format="json")}


@pytest.mark.parametrize("expression, obj, expected", EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_the_issue_examples_select_the_same_entries_in_every_form_in_sql_and_python(store, expression, obj,
                                                                                      expected):
    plans = forms(store.root, expression, obj)
    conds = {form: _rule_when(p) for form, p in plans.items()}
    assert conds["dsl"] == conds["yaml"] == conds["json"]
    assert store.names(conds["dsl"]) == expected


def test_durations_are_compared_in_seconds_with_units():
    plan = parse_plan_text("plan p\nsource home index /x\nrule r when duration > 10min\n", format="dsl")
    assert _rule_when(plan) == C("duration", ">", 600.0)


def test_the_issue_examples_pass_validation_now_the_classifier_is_installed(store):
    from flows.plans.checks import check_plan

    for expression, obj, _ in EXAMPLES:
        for plan in forms(store.root, expression, obj).values():
            assert check_plan(plan, roots=Roots.of([str(store.root)])) == [], expression


# --- operators on numbers and text, missing values -----------------------------------------------------------------

CASES = [
    ("width between", C("width", "between", [1000, 3840]), {"long.mp4", "short.mp4"}),
    ("width in", C("width", "in", [800, 1280]), {"small.jpg", "long.mp4"}),
    ("height <", C("height", "<", 720), {"small.jpg"}),
    ("height <=", C("height", "<=", 720), {"small.jpg", "long.mp4"}),
    ("width = a number", C("width", "=", 800), {"small.jpg"}),
    ("duration between units", C("duration", "between", ["30s", "31s"]), {"short.mp4"}),
    ("duration <", C("duration", "<", "1min"), {"short.mp4"}),
    ("pages <", C("pages", "<", 20), {"leaflet.pdf"}),
    ("title contains", C("title", "contains", "Report"), {"book.pdf"}),
    ("title startswith", C("title", "startswith", "Lea"), {"leaflet.pdf"}),
    ("title matches", C("title", "matches", r"\d{4}$"), {"book.pdf"}),
    ("title glob", C("title", "glob", "Annual*"), {"book.pdf"}),
    ("title is case-sensitive", C("title", "contains", "report"), set()),
    ("author endswith", C("author", "endswith", "Smith"), {"book.pdf"}),
    ("exif.Model in", C("exif.Model", "in", ["X-T4", "iPhone 13"]), WIDE | {"small.jpg"}),
    ("exif number", C("exif.ISO", ">=", 400), {"wide.jpg"}),
    ("exif text orders by code point", C("exif.Model", "<", "Y"), WIDE),  # "iPhone 13" > "Y"
    ("metadata.* number", C("metadata.fps", ">", 24), {"long.mp4"}),
    ("metadata.* text", C("metadata.format", "=", "JPEG"), WIDE | {"small.jpg"}),
    ("metadata.* key that no entry has", C("metadata.nosuch", "=", "x"), set()),
    ("hash startswith", C("hash", "startswith", "xxh128:"), HASHED),
    ("hash in", C("hash", "in", [H2, H3]), {"small.jpg", "long.mp4"}),
    ("duplicates counts the OTHER entries", C("duplicates", "=", 2), WIDE),
    ("duplicates = 0: hashed and alone", C("duplicates", "=", 0), HASHED - WIDE),
    ("duplicates between", C("duplicates", "between", [1, 5]), WIDE),
    # missing values: false for every operator but != (exactly "not ="), as for any missing value
    ("no width: != is true", C("width", "!=", 800), NAMES - {"small.jpg"}),
    ("no width: not > is true", Not(condition=C("width", ">", 100)), {"book.pdf", "leaflet.pdf", "notes.txt"}),
    ("no width: < is false", C("width", "<", 10**9), NAMES - {"book.pdf", "leaflet.pdf", "notes.txt"}),
    ("no hash: duplicates = 0 is false", Group(type="all", conditions=[
        C("duplicates", "=", 0), C("name", "in", ["leaflet.pdf", "notes.txt"])]), set()),
    ("no hash: duplicates != 0 is true", C("duplicates", "!=", 0), WIDE | {"leaflet.pdf", "notes.txt"}),
    ("no hash: hash != is true", C("hash", "!=", H1), NAMES - WIDE),
    ("a number is not text", C("metadata.width", "=", "4000"), set()),
    ("combined", Group(type="all", conditions=[C("width", ">", 3000), C("duplicates", ">", 0),
                                               C("exif.Model", "=", "X-T4")]), WIDE),
]


@pytest.mark.parametrize("cond, expected", [pytest.param(c, e, id=i) for i, c, e in CASES])
def test_operators_on_numbers_text_and_missing_values_agree_in_sql_and_python(store, cond, expected):
    assert store.names(cond) == expected


def test_duplicates_is_pushed_down_through_the_partial_hash_index(store):
    if store.engine.dialect.name != "sqlite":
        pytest.skip("the query plan is checked on SQLite")
    query = select(T.c.id).where(store.sql.clause(C("duplicates", ">", 0)))
    sql = str(query.compile(store.engine, compile_kwargs={"literal_binds": True}))
    with store.engine.connect() as conn:
        plan = " | ".join(row[-1] for row in conn.execute(text("EXPLAIN QUERY PLAN " + sql)))
    assert "SEARCH dup USING COVERING INDEX ix_entries_hash (hash=?)" in plan, plan


def test_duplicates_follow_hash_changes(store, tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'dups.db'}")
    fill(engine, store.root)
    with engine.begin() as conn:  # small.jpg turns out to be a copy of the wide ones; wide.jpg is rehashed away
        conn.execute(update(T).where(T.c.name == "small.jpg").values(hash=H1))
        conn.execute(update(T).where(T.c.name == "wide.jpg").values(hash=H4))
    s = ConditionStore(engine, store.root)
    assert s.names(C("duplicates", "=", 2)) == {"wide-copy.jpg", "wide-third.jpg", "small.jpg"}
    assert s.names(C("duplicates", "=", 1)) == {"wide.jpg", "short.mp4"}
    engine.dispose()


# --- plan-explain and plan-preview ---------------------------------------------------------------------------------


def plan_of(root: Path, rules: list[dict]) -> Plan:
    return Plan.from_object({"name": "p", "sources": [{"name": "home", "type": "filesystem.index",
                                                       "config": {"path": str(root)}}], "rules": rules})


def leaves(node: dict) -> list[dict]:
    return [node] if "children" not in node else [leaf for child in node["children"] for leaf in leaves(child)]


def test_explain_names_the_values_it_saw_for_classifier_fields(store):
    p = plan_of(store.root, [{"name": "r", "when": "width > 3000 and duplicates > 0 and exif.Model = \"X-T4\" "
                                                  "and duration > 10min and metadata.nosuch = 1",
                              "outcomes": [{"type": "selection_set", "selectionSetName": "s"}]}])
    out = explain_path(store.engine, p, roots=Roots.of([str(store.root)]), path=str(store.root / "wide.jpg"))
    seen = {leaf["field"]: (leaf["seen"], leaf["passed"]) for leaf in leaves(out["rules"][0]["condition"])}
    assert seen == {"width": (4000, True), "duplicates": (2, True), "exif.Model": ("X-T4", True),
                    "duration": (None, False), "metadata.nosuch": (None, False)}
    out = explain_path(store.engine, p, roots=Roots.of([str(store.root)]), path=str(store.root / "notes.txt"))
    seen = {leaf["field"]: leaf["seen"] for leaf in leaves(out["rules"][0]["condition"])}
    assert seen["width"] is None and seen["duplicates"] is None


CLASSIFY = {"name": "classify", "when": "media_type = image",
            "outcomes": [{"type": "classifier", "classifierOperation": "extract_metadata"}]}


def test_preview_notes_a_rule_whose_condition_an_earlier_classifier_rule_fills(store):
    p = plan_of(store.root, [CLASSIFY, {"name": "wide", "when": "width > 3000 and size > 0",
                                        "outcomes": [{"type": "selection_set", "selectionSetName": "wide"}]}])
    out = preview_plan(store.engine, p, roots=Roots.of([str(store.root)]))
    classify, wide = out["rules"]
    assert "notes" not in classify
    assert wide["matched"] == 4  # what is classified now: the three wide photos and the 4K video
    assert wide["notes"] == [
        "uses width, filled by the classifier outcome of rule 'classify'; entries it has not processed yet are "
        "counted as not matching here (plan-execute runs rule 'classify' first, so more may match then)"]
    explained = explain_path(store.engine, p, roots=Roots.of([str(store.root)]), path=str(store.root / "small.jpg"))
    assert explained["rules"][1]["notes"] == wide["notes"]


def test_preview_warns_when_a_rule_tests_what_its_own_classifier_outcome_fills(store):
    p = plan_of(store.root, [{"name": "self", "when": "duplicates > 0",
                              "outcomes": [{"type": "chained", "outcomes": [
                                  {"type": "classifier"}, {"type": "selection_set", "selectionSetName": "d"}]}]}])
    rule = preview_plan(store.engine, p, roots=Roots.of([str(store.root)]))["rules"][0]
    assert len(rule["notes"]) == 1
    assert rule["notes"][0].startswith("its condition uses duplicates, which its own classifier outcome fills: the "
                                       "condition is tested before that outcome runs")


def test_preview_notes_an_outcome_condition_after_a_classifier_outcome_of_the_same_rule(store):
    p = plan_of(store.root, [{"name": "r", "when": "media_type = image", "outcomes": [
        {"type": "classifier", "classifierOperation": "all"},
        {"type": "selection_set", "selectionSetName": "x-t4", "when": "exif.Model = X-T4"}]}])
    rule = preview_plan(store.engine, p, roots=Roots.of([str(store.root)]))["rules"][0]
    assert "notes" not in rule
    assert "note" not in rule["outcomes"][0]
    assert rule["outcomes"][1]["note"].startswith("its condition uses exif.Model, filled by an earlier classifier "
                                                  "outcome of this rule")
    assert rule["outcomes"][1]["would_add"] == 3  # what is classified now


def test_preview_has_no_note_when_no_classifier_outcome_fills_the_fields(store):
    thumbnails_only = {**CLASSIFY, "outcomes": [{"type": "classifier", "classifierOperation": "generate_thumbnail"}]}
    p = plan_of(store.root, [thumbnails_only, {"name": "wide", "when": "width > 3000 and hash startswith xxh",
                                               "outcomes": [{"type": "selection_set", "selectionSetName": "w"}]},
                             {"name": "big", "when": "size > 0",
                              "outcomes": [{"type": "selection_set", "selectionSetName": "b"}]}])
    out = preview_plan(store.engine, p, roots=Roots.of([str(store.root)]))
    assert all("notes" not in rule for rule in out["rules"])


# --- one real run: classify, then select on the result -------------------------------------------------------------


def test_a_plan_classifies_photos_and_a_later_rule_selects_the_wide_ones_in_one_execution(tmp_path, monkeypatch):
    from flows.classify import executor as cx
    from flows.plans.service import PlanService
    from store import sets as store_sets
    from examples import mediagen as media

    data_dir = tmp_path / "data"
    data_dir.mkdir()
    monkeypatch.setattr(cx.DEFAULT_RUN, "classify", None)  # the real worker (flows.classify.worker)
    monkeypatch.setattr(cx.DEFAULT_RUN, "pool_mode", "thread")
    monkeypatch.setattr("flows.core.capability._data_dir", data_dir)
    root = tmp_path / "photos"
    for name, size in {"narrow.jpg": (320, 240), "wide.jpg": (640, 480), "wider.jpg": (1024, 512)}.items():
        media.jpeg(root / name, size)
    engine = make_engine(f"sqlite:///{data_dir / 'assay.db'}")
    service = PlanService(engine, Roots.of([str(root)]), use_prefect=False)
    try:
        plan = parse_plan_text(f"plan classify-then-select\nsource photos index {root}\n"
                               "rule classify when media_type = image\n  do classifier extract_metadata\n"
                               "rule wide when width > 500\n  do selection_set wide\n", format="dsl")
        service.save(plan, create=True)
        row = service.execute(plan, wait=True)
        assert row["status"] == "success", row
        assert row["summary"]["rules"]["wide"]["matched"] == 2
        found = store_sets.describe_set(engine, name="wide", include_entries=True, limit=10)
        assert sorted(Path(e["path"]).name for e in found["entries"]) == ["wide.jpg", "wider.jpg"]
    finally:
        service.shutdown()
        engine.dispose()


def test_without_the_classifier_duplicates_is_refused_with_the_usual_message(store, monkeypatch):
    from dsl import fields as dsl_fields
    from dsl.evaluate import FieldNotAvailable
    from flows.core import conditions as cond_sql
    from flows.plans.checks import check_plan

    monkeypatch.setattr(dsl_fields, "INSTALLED_PRODUCERS", dsl_fields.INSTALLED_PRODUCERS - {"metadata"})
    plan = plan_of(store.root, [{"name": "r", "when": "duplicates > 0",
                                 "outcomes": [{"type": "selection_set", "selectionSetName": "d"}]}])
    (problem,) = check_plan(plan, roots=Roots.of([str(store.root)]))
    assert problem.path == "rules[0].when"
    assert problem.message.startswith("field 'duplicates' is filled by the classifier module")
    monkeypatch.delitem(cond_sql.COMPUTED, "duplicates")  # nothing computes it: evaluation says so too
    with pytest.raises(FieldNotAvailable, match="field 'duplicates' is filled by the classifier module"):
        store.sql.clause(C("duplicates", ">", 0))
    with pytest.raises(FieldNotAvailable, match="not installed"):
        store.py.evaluate(C("duplicates", ">", 0), store.rows[0])
