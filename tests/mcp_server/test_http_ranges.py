"""mcp_server.http.byte_range: the one byte range of a Range header the content route serves (206), or the whole
file for what it does not take, or 416 past the end."""

from __future__ import annotations

import pytest

from mcp_server.http import byte_range


@pytest.mark.parametrize("header,expected", [
    ("bytes=0-99", (0, 99)),
    ("bytes=100-", (100, 999)),
    ("bytes=-100", (900, 999)),
    ("bytes=990-2000", (990, 999)),  # an end past the file is the last byte
    ("bytes=-5000", (0, 999)),
    (None, None), ("", None), ("items=0-1", None), ("bytes=0-1,5-6", None), ("bytes=x-y", None),
    ("bytes=5-1", None),
    ("bytes=1000-", "unsatisfiable"), ("bytes=-0", "unsatisfiable"),
])
def test_a_range_header_becomes_the_span_served(header, expected):
    assert byte_range(header, 1000) == expected


def test_an_empty_file_has_no_satisfiable_range():
    assert byte_range("bytes=0-", 0) == "unsatisfiable"
    assert byte_range("bytes=-1", 0) == "unsatisfiable"
