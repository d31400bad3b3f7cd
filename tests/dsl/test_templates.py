"""Name and destination templates: every syntax form, fallbacks, date and number formats, missing fields, unsafe
values, parse errors with their columns, and a parser whose work grows linearly with the template."""

from __future__ import annotations

import sys
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from dsl import templates
from dsl.templates import (MAX_FIELDS, MAX_TEMPLATE, FieldFormatError, MissingField, Placeholder, Template,
                           TemplateError, parse_template)

TAKEN = datetime(2023, 7, 14, 10, 22, 1)
FIELDS: dict[str, Any] = {
    "name": "report.pdf", "stem": "report", "extension": "pdf", "parent": "Downloads",
    "mtime": TAKEN, "size": 12345, "ratio": 0.25, "label": "invoice",
    "exif.DateTimeOriginal": "2023:07:14 10:22:01", "exif.Model": "Canon EOS R5", "metadata.title": "Q3 figures",
}


def render(text: str, fields: dict[str, Any] | None = None) -> str:
    return parse_template(text).render((FIELDS if fields is None else fields).get)


# --- syntax forms ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("plain.txt", "plain.txt"),
    ("{name}", "report.pdf"),
    ("{stem}-copy.{extension}", "report-copy.pdf"),
    ("{parent}/{metadata.title}", "Downloads/Q3 figures"),
    ("Documents/{mtime:%Y}/", "Documents/2023/"),
    ("{mtime:%H:%M}", "10:22"),  # the format runs to "|" or "}", so it may hold ":"
    ("{exif.Model|unknown}/{name}", "Canon EOS R5/report.pdf"),
    ("{exif.Lens|unknown}/{name}", "unknown/report.pdf"),
    ("{exif.Lens:%Y|no date}", "no date"),
    ("{label|}{stem}", "invoicereport"),
    ("{missing|}{stem}", "report"),  # an empty fallback
    ("{missing|a:b|c}", "a:b|c"),  # a fallback is everything after the first "|"
    ("{{draft}} {name}", "{draft} report.pdf"),
    ("}}{{", "}{"),
    ("{{{name}}}", "{report.pdf}"),
    ("{size:08d}", "00012345"),
    ("{size:,}", "12,345"),
    ("{ratio:.0%}", "25%"),  # a "%" at the end is the number's percent, not strftime
    ("{label:_>9}", "__invoice"),
    ("{mtime:%Y/%m}/", "2023/07/"),  # a date format's own text is kept, slashes included
    ("{mtime:}", "2023-07-14 10:22:01"),  # an empty format is no format
])
def test_each_syntax_form_renders(text, expected):
    assert render(text) == expected


def test_fields_lists_each_field_once_in_order_of_first_use():
    template = parse_template("{mtime:%Y}/{exif.Model|x}/{mtime:%m}/{name}{{literal}}")
    assert template.fields() == ("mtime", "exif.Model", "name")
    assert parse_template("no fields").fields() == ()


def test_template_parses_on_construction_and_compares_by_text():
    assert Template("{name}") == parse_template("{name}")
    assert parse_template("a{b:%Y|c}d").parts == ("a", Placeholder("b", "%Y", "c", 2), "d")
    with pytest.raises(TemplateError):
        Template("{name")


@pytest.mark.parametrize("name", ["exif.DateTimeOriginal", "metadata.title", "_x", "a1.2b", "exif.x-y",
                                  "a.b.c-1", "x" * templates.MAX_FIELD_NAME])
def test_field_names_that_are_accepted(name):
    assert parse_template(f"{{{name}}}").fields() == (name,)


def test_lookup_is_called_once_per_field_and_render():
    calls: list[str] = []

    def lookup(field: str) -> Any:
        calls.append(field)
        return FIELDS.get(field)

    template = parse_template("{mtime:%Y}/{mtime:%m}/{exif.Lens|a}{exif.Lens|b}/{name}")
    assert template.render(lookup) == "2023/07/ab/report.pdf"
    assert calls == ["mtime", "exif.Lens", "name"]


def test_a_lookup_that_raises_key_error_is_a_missing_field():
    def lookup(field: str) -> Any:
        raise KeyError(field)

    assert parse_template("{label|none}").render(lookup) == "none"
    with pytest.raises(MissingField):
        parse_template("{label}").render(lookup)


def test_falsy_values_other_than_none_are_present():
    assert render("{a}-{b}-{c}", {"a": 0, "b": False, "c": ""}) == "0-False-"


# --- dates -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", [
    TAKEN,
    TAKEN.timestamp(),  # epoch float, local time
    int(TAKEN.timestamp()),
    "2023:07:14 10:22:01",  # EXIF
    "2023:07:14 10:22:01.37",  # EXIF with sub-seconds
    "2023:07:14 10:22:01+02:00",  # EXIF with an offset: kept, not converted
    "2023:07:14 10:22:01\0",  # EXIF NUL padding
    "2023-07-14T10:22:01",
    "2023-07-14T10:22:01Z",
    "2023-07-14 10:22:01.123456+05:30",
])
def test_date_formats_take_datetimes_epoch_numbers_exif_and_iso_strings(value):
    assert render("{when:%Y-%m-%d %H.%M}", {"when": value}) == "2023-07-14 10.22"


def test_an_aware_datetime_and_a_date_are_used_as_they_are():
    aware = datetime(2023, 7, 14, 23, 30, tzinfo=timezone(timedelta(hours=-5)))
    assert render("{when:%d %H}", {"when": aware}) == "14 23"
    assert render("{when:%Y/%m}", {"when": date(2021, 2, 3)}) == "2021/02"


def test_epoch_seconds_are_shown_in_local_time():
    stamp = 1_700_000_000.5
    assert render("{t:%Y-%m-%d %H:%M:%S}", {"t": stamp}) == datetime.fromtimestamp(stamp).strftime("%Y-%m-%d %H:%M:%S")


@pytest.mark.parametrize(("value", "kind"), [
    ("yesterday", "str"),
    ("0000:00:00 00:00:00", "str"),  # an unset EXIF date
    (True, "bool"),
    (1e300, "float"),
    (["2023"], "list"),
])
def test_a_value_that_is_not_a_date_is_the_files_error_naming_field_type_and_format(value, kind):
    with pytest.raises(FieldFormatError) as caught:
        render("{exif.DateTimeOriginal:%Y}/{name}", {"exif.DateTimeOriginal": value, "name": "a.jpg"})
    error = caught.value
    assert isinstance(error, MissingField)
    assert error.field == "exif.DateTimeOriginal"
    assert error.template == "{exif.DateTimeOriginal:%Y}/{name}"
    message = str(error)
    assert "exif.DateTimeOriginal" in message and f"a {kind} " in message and "'%Y'" in message
    assert "{exif.DateTimeOriginal:%Y|unknown}" in message


def test_a_value_that_cannot_take_its_format_uses_the_fallback_when_there_is_one():
    assert render("{exif.DateTimeOriginal:%Y|undated}", {"exif.DateTimeOriginal": "0000:00:00 00:00:00"}) == "undated"
    assert render("{size:08d|?}", {"size": "big"}) == "?"


# --- numbers -----------------------------------------------------------------------------------------------------

def test_number_specs_format_numbers_and_numeric_strings():
    assert render("{size:08d}", {"size": 42}) == "00000042"
    assert render("{size:08d}", {"size": "42"}) == "00000042"
    assert render("{size:.2f}", {"size": "3.14159"}) == "3.14"
    assert render("{size:.1f}", {"size": 2}) == "2.0"


@pytest.mark.parametrize(("value", "kind"), [("big", "str"), (1.5, "float"), (None.__class__, "type")])
def test_a_number_spec_a_value_cannot_take_is_the_files_error(value, kind):
    with pytest.raises(FieldFormatError) as caught:
        render("scan-{size:08d}", {"size": value})
    message = str(caught.value)
    assert caught.value.field == "size"
    assert f"a {kind} " in message and "'08d'" in message and "{size:08d|unknown}" in message


# --- missing fields ----------------------------------------------------------------------------------------------

def test_a_missing_field_without_fallback_names_the_field_and_suggests_one():
    with pytest.raises(MissingField) as caught:
        render("{exif.Model}/{name}", {"name": "a.jpg"})
    error = caught.value
    assert not isinstance(error, FieldFormatError)
    assert (error.field, error.template) == ("exif.Model", "{exif.Model}/{name}")
    assert str(error) == ('the template "{exif.Model}/{name}" needs exif.Model, which this file does not have; give '
                          'a fallback: {exif.Model|unknown}')


def test_the_suggested_fallback_keeps_the_format():
    with pytest.raises(MissingField, match=r"\{exif\.DateTimeOriginal:%Y-%m\|unknown\}"):
        render("{exif.DateTimeOriginal:%Y-%m}", {})


def test_missing_field_can_be_built_with_just_field_and_template():
    error = MissingField("label", "{label}")
    assert isinstance(error, LookupError)
    assert "needs label" in str(error) and "{label|unknown}" in str(error)


# --- unsafe values -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "expected"), [
    ("a/b", "a_b"),
    ("..", "_"),
    (".", "_"),
    ("...", "..."),
    ("a\\b", "a_b"),
    ("a\0b", "a_b"),
    ("  padded \n", "padded"),
    (1.5, "1.5"),
    (" / ", "_"),
    ("../../etc", ".._.._etc"),
])
def test_values_are_made_safe_for_one_path_component(value, expected):
    assert render("{v}", {"v": value}) == expected
    assert render("out/{v}/x", {"v": value}) == f"out/{expected}/x"


def test_literal_text_and_fallbacks_are_kept_as_written():
    assert render("a/../{missing|x/y}/ b /", {}) == "a/../x/y/ b /"


# --- parse errors ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "column", "says"), [
    ("x/{year", 3, 'a "{" at column 3 is not closed; write {field}, {field:format} or {field|fallback}, and {{ for '
                   'a literal "{"'),
    ("{", 1, "is not closed"),
    ("{a|b", 1, "is not closed"),
    ("a}b", 2, 'a "}" at column 2 closes no field'),
    ("{name}}", 7, "closes no field"),
    ("{}", 1, "the field at column 1 has no name"),
    ("x{:%Y}", 2, "has no name"),
    ("{|fallback}", 1, "has no name"),
    ("{a{b}}", 3, 'a "{" at column 3 inside the field opened at column 1'),
    ("{a|x{y}", 5, "fields do not nest"),
    ("ab{1abc}", 4, "cannot hold '1' at column 4"),
    ("{na me}", 4, "cannot hold ' ' at column 4"),
    ("{na-me}", 4, "cannot hold '-' at column 4"),
    ("{exif.Date/Time}", 11, "cannot hold '/' at column 11"),
    ("{a..b}", 4, "empty part"),
    ("{.a}", 2, "empty part"),
    ("{a.}", 3, 'ends with "."'),
    ("{é}", 2, "cannot hold 'é'"),
    ("{" + "x" * 201 + "}", 2, "is 201 characters long; a field name is at most 200"),
    ("a\0b", 2, "NUL"),
    ("", 1, "empty"),
])
def test_parse_errors_say_what_where_and_what_is_accepted(text, column, says):
    with pytest.raises(TemplateError) as caught:
        parse_template(text)
    assert caught.value.column == column
    assert says in str(caught.value)
    assert str(caught.value).startswith(f'template "{text[:40]}')


def test_bad_field_names_explain_the_rule():
    with pytest.raises(TemplateError, match=r'the field name "1abc" .*letters, digits and "_".*\{exif\.'):
        parse_template("{1abc}")


def test_the_unclosed_message_is_exactly_as_documented():
    with pytest.raises(TemplateError) as caught:
        parse_template("x/{year")
    assert str(caught.value) == ('template "x/{year": a "{" at column 3 is not closed; write {field}, '
                                 '{field:format} or {field|fallback}, and {{ for a literal "{"')
    assert isinstance(caught.value, ValueError)


def test_templates_longer_than_the_limit_are_refused():
    parse_template("a" * MAX_TEMPLATE)
    with pytest.raises(TemplateError, match="1,001 characters long; a template is at most 1,000") as caught:
        parse_template("a" * (MAX_TEMPLATE + 1))
    assert caught.value.column == MAX_TEMPLATE + 1
    assert len(str(caught.value)) < 200  # the template is shown shortened


def test_templates_with_more_than_fifty_fields_are_refused_at_the_extra_one():
    assert len(parse_template("{a}" * MAX_FIELDS).parts) == MAX_FIELDS
    with pytest.raises(TemplateError, match="more than 50 fields") as caught:
        parse_template("{a}" * (MAX_FIELDS + 1))
    assert caught.value.column == 3 * MAX_FIELDS + 1


# --- linear time -------------------------------------------------------------------------------------------------

PATHOLOGICAL = [
    lambda n: "{" * n,
    lambda n: "{{" * (n // 2),
    lambda n: "}}" * (n // 2),
    lambda n: "{" + "a" * (n - 1),
    lambda n: "{a:" + "%" * (n - 4) + "}",
    lambda n: "{a|" + ":|" * ((n - 4) // 2) + "}",
    lambda n: "{a" + "." * (n - 3) + "}",
    lambda n: "{" + "a." * 99 + "a" + "}" + "x" * (n - 201),
    lambda n: "{a:%Y|b}/" * (n // 9),
    lambda n: "{" + "|" * (n - 2) + "}",
]


def parser_steps(text: str) -> int:
    """The lines of dsl/templates.py run while parsing ``text`` (errors included): a measure of work, not of time."""
    source = str(Path(templates.__file__))
    steps = 0

    def trace(frame: Any, event: str, arg: Any) -> Any:
        nonlocal steps
        if frame.f_code.co_filename != source:
            return None
        if event == "line":
            steps += 1
        return trace

    previous = sys.gettrace()
    sys.settrace(trace)
    try:
        parse_template(text)
    except TemplateError:
        pass
    finally:
        sys.settrace(previous)
    return steps


@pytest.mark.parametrize("make", PATHOLOGICAL)
def test_parsing_work_grows_linearly_with_the_template(make):
    small, large = make(MAX_TEMPLATE // 2), make(MAX_TEMPLATE)
    assert len(large) <= MAX_TEMPLATE
    steps_small, steps_large = parser_steps(small), parser_steps(large)
    assert steps_small >= len(small)  # the count sees the scanner's loop (else the check below would be empty)
    assert steps_large <= 2.2 * steps_small + 50
