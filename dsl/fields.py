"""The fields a condition can test, with their types, the operators that apply, and who produces them.

Fields of the entries table are always available. Fields that later modules fill (metadata from classifiers, text
content, zero-shot labels, semantic similarity) parse now; a plan that uses one before its producer is installed is
refused at validation, naming what is missing (see :func:`missing_producer`). A capability installs its producer
with :func:`install_producer` when it is imported.

Where a field's value lives: an entries ``column``, a ``metadata_values`` row (``metadata_key``), or neither: a
``computed`` field (``duplicates``) is worked out from the store when it is tested. ``dsl`` does not know how: the
SQL context gives the expression (``SqlContext.computed``), the evaluation context the value of one entry
(``EvalContext.computed``); the store side keeps a registry that capabilities fill (``flows.core.conditions``).
A ``registered`` field (``label``, ``similarity``) is tested whole by its capability's registration: the SQL context
gives a clause for a leaf (``SqlContext.field_clause``: exact for ``label``, a superset for ``similarity``), the
evaluation context the verdict and what was seen (``EvalContext.field``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

FieldType = Literal["text", "number", "size", "time", "duration", "choice", "set", "content", "label",
                    "similarity", "metadata"]

TEXT_OPS = ("=", "!=", "in", "contains", "startswith", "endswith", "matches", "glob")
NUMBER_OPS = ("=", "!=", "<", "<=", ">", ">=", "between", "in")
CHOICE_OPS = ("=", "!=", "in")
OPERATORS = ("=", "!=", "<", "<=", ">", ">=", "in", "contains", "startswith", "endswith", "matches", "glob",
             "between")
OPS_BY_TYPE: dict[str, tuple[str, ...]] = {
    "text": TEXT_OPS,
    "number": NUMBER_OPS,
    "size": NUMBER_OPS,
    "time": ("=", "!=", "<", "<=", ">", ">=", "between"),
    "duration": NUMBER_OPS,
    "choice": CHOICE_OPS,
    "set": ("=", "!=", "in"),  # set = photos: a member of photos; set in [a, b]: of any
    "content": ("contains", "matches"),
    "label": ("=", "!=", "in"),
    "similarity": ("<", "<=", ">", ">=", "between"),
    "metadata": OPERATORS,  # open-ended keys (exif.*, metadata.*): text or number, as the value says
}


@dataclass(frozen=True)
class FieldSpec:
    name: str
    type: FieldType
    description: str
    column: str | None = None  # the entries column, for fields stored there
    metadata_key: str | None = None  # the metadata_values key, for classifier-produced fields
    producer: str | None = None  # the module that fills it; None: always available
    choices: tuple[str, ...] = ()
    needs_arg: bool = False  # similarity("a phrase")
    computed: bool = False  # worked out from the store when tested (no column, no metadata row)
    # tested by what its capability registers (flows.core.conditions.register_field): "exact", SQL decides it (an
    # EXISTS over the capability's rows, e.g. label over entry_labels); "superset", SQL only narrows, Python decides
    # (similarity, from the entry's chunk vectors); None: not such a field
    registered: Literal["exact", "superset"] | None = None

    @property
    def operators(self) -> tuple[str, ...]:
        return OPS_BY_TYPE[self.type]


# producer -> what provides it (for "not installed" messages)
PRODUCERS: dict[str, str] = {
    "metadata": "the classifier module (outcome type classifier with classifierOperation extract_metadata)",
    "text": "the text-extraction module (document search)",
    "labels": "the zero-shot labelling module (outcome type label)",
    "embeddings": "the embedding module (outcome type embed)",
}
INSTALLED_PRODUCERS: set[str] = set()  # modules add their name here when imported (install_producer)


def install_producer(name: str) -> None:
    """Mark ``name`` (a key of PRODUCERS) as installed: conditions on the fields it fills are accepted. Called by a
    capability's package when it is imported; calling it again changes nothing."""
    if name not in PRODUCERS:
        raise ValueError(f"unknown producer {name!r}; known: {', '.join(PRODUCERS)}")
    INSTALLED_PRODUCERS.add(name)


def _entry(name: str, type_: FieldType, description: str, **kw: Any) -> FieldSpec:
    return FieldSpec(name=name, type=type_, description=description, column=kw.pop("column", name), **kw)


def _meta(name: str, type_: FieldType, description: str) -> FieldSpec:
    return FieldSpec(name=name, type=type_, description=description, metadata_key=name, producer="metadata")


KINDS = ("file", "directory", "symlink", "other")
MEDIA_TYPES = ("image", "video", "audio", "document", "text", "other")

FIELDS: dict[str, FieldSpec] = {f.name: f for f in [
    _entry("path", "text", "absolute path"),
    _entry("name", "text", "file name with its extension"),
    _entry("extension", "text", "lower-case extension with its dot (.jpg); empty for none"),
    _entry("parent", "text", "path of the containing directory"),
    _entry("kind", "choice", "file, directory, symlink or other", choices=KINDS),
    _entry("size", "size", "bytes (directories: their whole subtree)"),
    _entry("mtime", "time", "modification time"),
    _entry("ctime", "time", "inode change time"),
    _entry("depth", "number", "number of path components below /"),
    _entry("media_type", "choice", "image, video, audio, document, text or other (from the extension)",
           choices=MEDIA_TYPES),
    _entry("mime", "text", "MIME type, e.g. image/jpeg"),
    _entry("hash", "text", "content hash, xxh128:<32 hex> (set by the classifier's metadata operation)"),
    FieldSpec("set", "set", "membership in a resource set: set = photos"),
    _meta("width", "number", "image or video width in pixels"),
    _meta("height", "number", "image or video height in pixels"),
    _meta("duration", "duration", "audio or video duration, stored in seconds (write 90s, 10min, 1.5h)"),
    _meta("pages", "number", "number of pages of a document"),
    _meta("title", "text", "document title"),
    _meta("author", "text", "document author"),
    FieldSpec("duplicates", "number", "how many other entries have the same content hash (no value before the file "
              "is hashed)", producer="metadata", computed=True),
    FieldSpec("text", "content", "the text content of a document", producer="text"),
    FieldSpec("label", "label", "a zero-shot label given by a label outcome: label = invoice", producer="labels",
              registered="exact"),
    FieldSpec("similarity", "similarity", "semantic similarity (cosine, 0-1) of the entry's best chunk to a phrase: "
              "similarity(\"...\") > 0.4", producer="embeddings", needs_arg=True, registered="superset"),
]}

# Prefixes of open-ended metadata keys: exif.Model, metadata.codec
PREFIXES: dict[str, str] = {"exif.": "an EXIF tag of an image, e.g. exif.Model",
                            "metadata.": "any key a classifier extracted, e.g. metadata.codec"}


class UnknownField(ValueError):
    pass


def field_spec(name: str) -> FieldSpec:
    """The spec of ``name``; open-ended ``exif.*`` / ``metadata.*`` keys are text-or-number metadata fields."""
    spec = FIELDS.get(name)
    if spec is not None:
        return spec
    for prefix in PREFIXES:
        if name.startswith(prefix) and len(name) > len(prefix):
            key = name if prefix == "exif." else name[len(prefix):]
            return FieldSpec(name=name, type="metadata", description=PREFIXES[prefix], metadata_key=key,
                             producer="metadata")
    raise UnknownField(f"unknown field {name!r}; known fields: {', '.join(FIELDS)}, "
                       "and exif.<tag> / metadata.<key>")


def missing_producer(spec: FieldSpec) -> str | None:
    """Why ``spec`` cannot be evaluated yet, or None when it can."""
    if spec.producer is None or spec.producer in INSTALLED_PRODUCERS:
        return None
    return (f"field {spec.name!r} is filled by {PRODUCERS[spec.producer]}, which is not installed in this version "
            f"of assay; fields available now: {', '.join(n for n, f in FIELDS.items() if f.producer is None)}")
