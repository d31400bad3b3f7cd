"""Resource queries: resource-sum, resource-time-range, resource-metric-range, resource-is, resource-fuzzy-match and
resource-search, over a resource set alone or with its descendants (each entry counted once)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from mcp_server.tools.common import READ_ONLY, Limit, Offset, StrList, ToolSet, tool
from store import set_queries
from store.filters import EntryFilter

if TYPE_CHECKING:
    from mcp_server.app import AssayApp

SetName = Annotated[str, Field(description="Resource-set name")]
IncludeChildren = Annotated[bool, Field(description="Include child sets (descendants in the DAG; an entry reached "
                                                    "by two paths counts once)")]
Metric = Literal["size", "count", "files", "directories", "symlinks"]
assert set(get_args(Metric)) == set(set_queries.METRICS)


class QueryEntry(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str
    path: str
    size: int
    kind: str
    mtime: str | None


class BreakdownItem(BaseModel):
    name: str
    value: int


class SumResponse(BaseModel):
    resource_set: str
    metric: str
    value: int
    breakdown: list[BreakdownItem] = Field(description="The metric for each direct child set with its descendants")
    direct_value: int = Field(description="The metric over the set's own members only")
    include_children: bool
    depth: int | None
    sets_counted: int


class EntryPage(BaseModel):
    resource_set: str
    include_children: bool
    entries: list[QueryEntry]
    total_count: int
    returned_count: int
    offset: int
    limit: int
    has_more: bool


class TimeRangeResponse(EntryPage):
    field: str
    min: str | None = Field(description="The lower bound as understood (ISO 8601, UTC)")
    max: str | None = Field(description="The upper bound as understood (a bare date means the end of that day)")


class MetricRangeResponse(EntryPage):
    metric: str
    min: int | float | None
    max: int | float | None


class IsResponse(EntryPage):
    field: str
    value: str | int


class FuzzyResponse(EntryPage):
    field: str
    pattern: str
    mode: str
    case_sensitive: bool


class SearchResponse(EntryPage):
    sort_by: str
    sort_desc: bool


def register(tools: ToolSet, app: AssayApp) -> None:
    def run(query, **kwargs) -> dict:
        return set_queries.run(app.engine, query, **kwargs)

    @tool(tools, "resource-sum", READ_ONLY)
    def resource_sum(
        name: SetName,
        metric: Annotated[Metric, Field(description="Metric to aggregate: size (bytes of the file entries), count "
                                                    "(entries), files, directories, symlinks")],
        include_children: Annotated[bool, Field(description="Aggregate through the DAG (descendant sets)")] = True,
        depth: Annotated[int | None, Field(ge=0, description="Traversal depth limit (null = unlimited)")] = None,
    ) -> SumResponse:
        """Hierarchical aggregation of a metric across the DAG: the total for the set and its descendants (each
        entry counted once however many paths reach it), with a breakdown per direct child set."""
        return SumResponse(**run(set_queries.resource_sum, name=name, metric=metric,
                                 include_children=include_children, depth=depth))

    @tool(tools, "resource-time-range", READ_ONLY)
    def resource_time_range(
        name: SetName,
        field: Annotated[Literal["mtime", "ctime", "added_at", "indexed_at"],
                         Field(description="Time field: mtime, ctime, added_at (when the entry joined the set), "
                                           "indexed_at")],
        min: Annotated[str | float | None, Field(description="Minimum time (ISO 8601 or Unix timestamp)")] = None,
        max: Annotated[str | float | None, Field(description="Maximum time (ISO 8601 or Unix timestamp; a bare "
                                                             "date includes that whole day)")] = None,
        include_children: IncludeChildren = True,
        limit: Limit = 100,
        offset: Offset = 0,
    ) -> TimeRangeResponse:
        """Filter a set's entries by a time field within a range, oldest path first; one page with the total."""
        return TimeRangeResponse(**run(set_queries.time_range, name=name, field=field, min=min, max=max,
                                       include_children=include_children, limit=limit, offset=offset))

    @tool(tools, "resource-metric-range", READ_ONLY)
    def resource_metric_range(
        name: SetName,
        metric: Annotated[Literal["size", "depth", "mtime", "ctime"],
                          Field(description="Metric field: size (bytes; a directory's is its subtree's), depth, "
                                            "mtime, ctime (unix seconds)")],
        min: Annotated[int | None, Field(description="Minimum value")] = None,
        max: Annotated[int | None, Field(description="Maximum value")] = None,
        include_children: IncludeChildren = True,
        limit: Limit = 100,
        offset: Offset = 0,
    ) -> MetricRangeResponse:
        """Filter a set's entries by a numeric metric within a range, largest first; one page with the total."""
        return MetricRangeResponse(**run(set_queries.metric_range, name=name, metric=metric, min=min, max=max,
                                         include_children=include_children, limit=limit, offset=offset))

    @tool(tools, "resource-is", READ_ONLY)
    def resource_is(
        name: SetName,
        field: Annotated[str, Field(description="Field to match: " + ", ".join(set_queries.IS_FIELDS))],
        value: Annotated[str | int, Field(description="Exact value to match (case-sensitive; paths must lie inside "
                                                      "the allowed roots)")],
        include_children: IncludeChildren = True,
        limit: Limit = 100,
        offset: Offset = 0,
    ) -> IsResponse:
        """Exact match on a field value (kind, path, parent, name, extension, media_type, ...), in path order."""
        if field in set_queries.PATH_FIELDS and isinstance(value, str):
            value = app.roots.resolve(value, field="value", follow_last=field != "path")
        return IsResponse(**run(set_queries.field_is, name=name, field=field, value=value,
                                include_children=include_children, limit=limit, offset=offset))

    @tool(tools, "resource-fuzzy-match", READ_ONLY)
    def resource_fuzzy_match(
        name: SetName,
        field: Annotated[str, Field(description="Text field to search: " + ", ".join(set_queries.TEXT_FIELDS))],
        pattern: Annotated[str, Field(description="Pattern to match")],
        mode: Annotated[Literal["contains", "prefix", "suffix", "regex", "glob"],
                        Field(description="Match mode: contains (LIKE %pattern%), prefix (LIKE pattern%), suffix "
                                          "(LIKE %pattern), regex (searched anywhere), glob (whole value, * crosses "
                                          "/). % and _ are literal in the LIKE modes")] = "contains",
        case_sensitive: Annotated[bool, Field(description="Case-sensitive matching")] = False,
        include_children: IncludeChildren = True,
        limit: Limit = 100,
        offset: Offset = 0,
    ) -> FuzzyResponse:
        """Fuzzy/pattern matching on a text field of a set's entries, in path order; one page with the total."""
        return FuzzyResponse(**run(set_queries.fuzzy_match, name=name, field=field, pattern=pattern, mode=mode,
                                   case_sensitive=case_sensitive, include_children=include_children, limit=limit,
                                   offset=offset))

    @tool(tools, "resource-search", READ_ONLY)
    def resource_search(
        name: SetName,
        include_children: Annotated[bool, Field(description="Include child sets")] = False,
        kind: Annotated[Literal["file", "directory", "symlink", "other"] | None,
                        Field(description="Filter by kind (file, directory)")] = None,
        extension: Annotated[StrList | None, Field(description="Filter by extension (.jpg, pdf), or a list")] = None,
        path_contains: Annotated[str | None, Field(description="Filter paths containing string")] = None,
        name_contains: Annotated[str | None, Field(description="Filter names containing string")] = None,
        min_size: Annotated[int | None, Field(ge=0, description="Minimum file size in bytes")] = None,
        max_size: Annotated[int | None, Field(ge=0, description="Maximum file size in bytes")] = None,
        min_mtime: Annotated[str | float | None,
                             Field(description="Minimum modification time (ISO date or unix seconds)")] = None,
        max_mtime: Annotated[str | float | None,
                             Field(description="Maximum modification time (ISO date or unix seconds)")] = None,
        limit: Limit = 100,
        offset: Offset = 0,
        sort_by: Annotated[Literal["size", "name", "mtime", "path", "ctime"],
                           Field(description="Sort field (size, name, mtime, path, ctime)")] = "size",
        sort_desc: Annotated[bool, Field(description="Sort descending")] = True,
    ) -> SearchResponse:
        """Comprehensive search of a set's entries with multiple filter criteria combined (AND), sorted and
        paginated with the total count."""
        filters = EntryFilter(kind=kind, extension=extension, path_contains=path_contains,
                              name_contains=name_contains, min_size=min_size, max_size=max_size,
                              min_mtime=min_mtime, max_mtime=max_mtime)
        return SearchResponse(**run(set_queries.search, name=name, filters=filters,
                                    include_children=include_children, sort_by=sort_by, sort_desc=sort_desc,
                                    limit=limit, offset=offset))
