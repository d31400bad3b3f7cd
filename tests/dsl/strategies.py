"""Hypothesis strategies: random, valid condition trees over the real fields, outcomes, sources and whole plans."""

from __future__ import annotations

from datetime import datetime, timezone

from hypothesis import strategies as st

from dsl.conditions import Compare, Group, Not
from dsl.fields import FIELDS, KINDS, MEDIA_TYPES
from dsl.model import NAME_RE, Plan
from dsl.units import format_duration

names = st.from_regex(NAME_RE, fullmatch=True)
texts = st.text(max_size=12)
nonblank = st.text(min_size=1, max_size=12).filter(lambda s: s.strip())
finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
numbers = st.one_of(st.integers(-10**12, 10**12), finite)
regexes = st.sampled_from([r"\d+", r"^report_\d{4}\.pdf$", r"(copy( \d+)?)", "a|b", r"\\", r"[\"']", ".*", "x{2,}"])
durations = st.one_of(  # at most ten thousand years (dsl.units.MAX_DURATION)
    st.builds(lambda n, u: f"{n}{u}", st.integers(0, 500_000), st.sampled_from(["ms", "s", "m", "h", "d", "w"])),
    st.builds(lambda n: f"{n}y", st.integers(0, 10**4)),
    st.floats(0, 10**9, allow_nan=False))
absolute_times = st.one_of(
    st.dates(min_value=datetime(1971, 1, 1).date(), max_value=datetime(2200, 1, 1).date()).map(str),
    st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2200, 1, 1))
    .map(lambda d: d.replace(tzinfo=timezone.utc).isoformat()),
    st.integers(0, 2**33))
relative_times = st.one_of(st.just("now"), st.builds(
    lambda sign, n: f"now {sign} {format_duration(n)}", st.sampled_from("+-"), st.integers(1, 10**8)))
times = st.one_of(absolute_times, relative_times)


def _values_for(spec_type: str, name: str, op: str):
    if spec_type == "size":
        return st.one_of(st.integers(0, 10**15), st.builds(lambda n, u: f"{n}{u}", st.integers(0, 9999),
                                                           st.sampled_from(["B", "KB", "MiB", "GB", "TiB"])))
    if spec_type == "time":
        return times
    if spec_type == "duration":
        return durations
    if spec_type in ("number",):
        return numbers
    if spec_type == "similarity":
        return st.floats(0, 1)
    if spec_type == "choice":
        return st.sampled_from(KINDS if name == "kind" else MEDIA_TYPES)
    if spec_type == "set":
        return names
    if spec_type == "metadata":
        return st.one_of(texts, numbers) if op != "matches" else regexes
    return regexes if op == "matches" else texts


@st.composite
def compares(draw):
    name = draw(st.sampled_from([*FIELDS, "exif.Model", "metadata.codec", "metadata.two words", "exif.and"]))
    if name.startswith(("exif.", "metadata.")):
        spec_type, ops = "metadata", ("=", "!=", "<", ">=", "in", "contains", "startswith", "matches", "glob")
    else:
        spec_type, ops = FIELDS[name].type, FIELDS[name].operators
    op = draw(st.sampled_from(ops))
    values = _values_for(spec_type, name, op)
    arg = draw(nonblank) if name == "similarity" else None
    if op == "in":
        value = draw(st.lists(values, min_size=1, max_size=3))
    elif op == "between":
        low, high = draw(values), draw(values)
        value = [low, high]
        try:
            Compare(field=name, op=op, value=value, arg=arg)
        except ValueError:
            value = [high, low]
    else:
        value = draw(values)
    return Compare(field=name, op=op, value=value, arg=arg)


def _groups(children):
    return st.one_of(
        st.builds(lambda t, cs: Group(type=t, conditions=cs), st.sampled_from(["all", "any", "none"]),
                  st.lists(children, max_size=4)),
        st.builds(lambda c: Not(condition=c), children))


conditions = st.recursive(compares(), _groups, max_leaves=8)
maybe_condition = st.one_of(st.none(), conditions)

class_names = st.text(min_size=1, max_size=12).filter(lambda s: s.strip())


@st.composite
def label_outcomes(draw) -> dict:
    """A label outcome: classes as names or {name, description} (names that are options of the outcome, such as
    threshold, included: the printer lists those as classes=[...]), unique, set names when into fills sets."""
    into = draw(st.sampled_from([None, "metadata", "sets", "both"]))
    name = names if into in ("sets", "both") else st.one_of(class_names, st.sampled_from(["threshold", "into"]))
    chosen = draw(st.lists(name, min_size=1, max_size=3, unique=True))
    classes = [draw(st.one_of(st.just(n), st.fixed_dictionaries({"name": st.just(n), "description": nonblank})))
               for n in chosen]
    out = {"type": "label", "classes": classes, **draw(st.fixed_dictionaries({}, optional={
        "threshold": st.floats(0, 1), "model": st.one_of(st.none(), nonblank),
        "collection": st.one_of(st.none(), nonblank)}))}
    if into is not None:
        out["into"] = into
    return out


simple_outcomes = st.one_of(
    st.fixed_dictionaries({"type": st.just("selection_set"), "selectionSetName": names,
                           "operation": st.sampled_from(["add", "remove"]), "when": maybe_condition}),
    st.fixed_dictionaries({"type": st.just("classifier")}, optional={
        "classifierOperation": st.sampled_from(["generate_thumbnail", "generate_timeline", "extract_metadata",
                                                "all"]),
        "maxWidth": st.integers(1, 8192), "quality": st.integers(1, 100), "when": maybe_condition}),
    st.fixed_dictionaries({"type": st.just("embed")}, optional={
        "collection": names, "chunk_size": st.integers(501, 100_000), "overlap": st.integers(0, 500),
        "model": st.one_of(st.none(), texts)}),
    label_outcomes(),
    st.fixed_dictionaries({"type": st.just("map")}, optional={
        "strategy": st.sampled_from(["auto", "outline", "headings", "chapters", "scenes", "windows"]),
        "window": st.floats(0.001, 10**6)}),
)
outcomes = st.one_of(simple_outcomes, st.fixed_dictionaries(
    {"type": st.just("chained"), "outcomes": st.lists(simple_outcomes, min_size=1, max_size=3)},
    optional={"stopOnError": st.booleans(), "when": maybe_condition}))

filesystem_sources = st.fixed_dictionaries(
    {"type": st.sampled_from(["filesystem.index", "filesystem.watch"]),
     "config": st.fixed_dictionaries({"paths": st.lists(nonblank, min_size=1, max_size=3)}, optional={
         "recursive": st.booleans(), "max_depth": st.integers(0, 50), "include_hidden": st.booleans(),
         "follow_symlinks": st.booleans(), "exclude": st.lists(texts, max_size=3),
         "debounce_ms": st.integers(0, 600_000)})},
    optional={"target_set": names})
sources = st.one_of(
    filesystem_sources,
    st.fixed_dictionaries({"type": st.just("selection_set"), "config": st.fixed_dictionaries({"set": names})},
                          optional={"target_set": names}),
    st.fixed_dictionaries({"type": st.just("query"), "config": st.fixed_dictionaries({"query": nonblank})}))

json_values = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12), finite, texts),
                           lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                   st.dictionaries(texts, inner, max_size=3)), max_leaves=6)
rules = st.fixed_dictionaries({"outcomes": st.lists(outcomes, max_size=3)}, optional={"when": conditions})

zones = st.sampled_from(["UTC", "Europe/Berlin", "America/Argentina/Buenos_Aires", "Etc/GMT+5", "Asia/Kolkata"])
intervals = st.one_of(st.integers(1, 10**9), st.floats(1, 10**9), st.builds(
    lambda n, u: f"{n}{u}", st.integers(1, 100_000), st.sampled_from(["s", "m", "h", "d", "w"])))
anchors = st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2200, 1, 1)).flatmap(
    lambda d: st.sampled_from([d.isoformat(), d.replace(tzinfo=timezone.utc).isoformat(), d.date().isoformat()]))
schedules = st.one_of(
    st.fixed_dictionaries({"cron": st.sampled_from(["0 3 * * *", "*/15 * * * *", "0 6 * * MON-FRI", "@daily"])},
                          optional={"timezone": zones}),
    st.fixed_dictionaries({"interval": intervals}, optional={"timezone": zones, "anchor": anchors}),
    st.fixed_dictionaries({"rrule": st.sampled_from(["FREQ=DAILY;BYHOUR=6", "RRULE:FREQ=WEEKLY;BYDAY=MO,TH",
                                                     "DTSTART:20260101T000000\nRRULE:FREQ=DAILY"])},
                          optional={"timezone": zones}))


@st.composite
def plans(draw) -> Plan:
    source_names = draw(st.lists(names, min_size=1, max_size=3, unique=True))
    rule_names = draw(st.lists(names, max_size=3, unique=True))
    data = {
        "name": draw(names),
        "sources": [{"name": n, **draw(sources)} for n in source_names],
        "rules": [{"name": n, **draw(rules)} for n in rule_names],
        **draw(st.fixed_dictionaries({}, optional={
            "description": texts, "mode": st.sampled_from(["oneshot", "continuous"]),
            "status": st.sampled_from(["active", "paused", "disabled"]),
            "preferences": st.dictionaries(texts, json_values, max_size=3)})),
    }
    watched = data.get("mode") == "continuous" or any(s["type"] == "filesystem.watch" for s in data["sources"])
    if not watched and draw(st.booleans()):  # a watched plan has no schedule
        data["schedule"] = draw(schedules)
    return Plan.from_object(data)

