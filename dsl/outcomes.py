"""Outcome types of the plan language: what a rule does with the entries it matched.

Each type is one model here, registered by name; each is run by the executor a capability declares (the outcome
registry is ``flows.core.outcomes``); a plan with a type no installed capability runs is refused at validation (see
``flows.plans.checks.check_plan``). The reference's JSON form
(``{type: selection_set, selectionSetName, operation}``, ``{type: classifier, classifierOperation, maxWidth, ...}``,
``{type: chained, outcomes, stopOnError}``) is accepted exactly.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias, Union

from pydantic import (BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError, ValidationInfo,
                      ValidatorFunctionWrapHandler, field_validator, model_validator)

from dsl.conditions import Condition
from dsl.fields import UnknownField, field_spec
from dsl.templates import parse_template

_SET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class OutcomeBase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: str
    when: Condition | None = Field(default=None, description="apply this outcome only to matches that also pass")

    def params(self) -> dict[str, Any]:
        """What identifies the work this outcome does (its parameters, not its condition), for work keys."""
        return self.model_dump(mode="json", exclude={"when"})


class SelectionSetOutcome(OutcomeBase):
    """Add matched entries to a resource set (created if missing), or remove them from it."""

    type: Literal["selection_set"] = "selection_set"
    selectionSetName: str = Field(description="the resource set")
    operation: Literal["add", "remove"] = "add"

    @field_validator("selectionSetName")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _SET_NAME.fullmatch(v):
            raise ValueError(f"{v!r} is not a valid resource-set name; use 1-128 letters, digits, '-', '_' or '.', "
                             "starting with a letter or digit")
        return v


class ClassifierOutcome(OutcomeBase):
    """Thumbnails, video timelines and extracted metadata (the classifier module)."""

    type: Literal["classifier"] = "classifier"
    classifierOperation: Literal["generate_thumbnail", "generate_timeline", "extract_metadata", "all"] = "all"
    maxWidth: int | None = Field(default=None, ge=1, le=8192)
    maxHeight: int | None = Field(default=None, ge=1, le=8192)
    quality: int | None = Field(default=None, ge=1, le=100)

    @field_validator("maxWidth", "maxHeight", "quality", mode="wrap")
    @classmethod
    def _bounds(cls, value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
        """Out-of-range or non-integer sizes and qualities say what is accepted."""
        try:
            return handler(value)
        except ValidationError:
            if info.field_name == "quality":
                accepted = "a whole number from 1 to 100 (JPEG quality), or leave it out for 80"
            else:
                accepted = ("a whole number of pixels from 1 to 8192, or leave it out for the preference "
                            f"thumbnail.{'max_width' if info.field_name == 'maxWidth' else 'max_height'} (320)")
            raise ValueError(f"{info.field_name} {value!r} is not accepted; give {accepted}") from None


class ExtractTextOutcome(OutcomeBase):
    """Extract the text of matched documents (PDF, EPUB, Markdown, text, code, HTML, DOCX; OCR for pages without a
    text layer) and index it for full-text search (the documents module)."""

    type: Literal["extract_text"] = "extract_text"
    ocr: bool | None = Field(default=None, description="read pages without a text layer with OCR; default: the "
                                                       "server's ASSAY_OCR setting (on)")


class EmbedOutcome(OutcomeBase):
    """Chunk the text of matched entries and embed it for semantic search (the embedding module)."""

    type: Literal["embed"] = "embed"
    collection: str = Field(default="default", min_length=1, max_length=200)
    chunk_size: int = Field(default=1000, ge=50, le=100_000)
    overlap: int = Field(default=200, ge=0)
    model: str | None = None  # None: the server's ASSAY_EMBED_MODEL (the packaged all-MiniLM-L6-v2)
    backend: Literal["torch", "onnx", "onnx-int8", "openvino"] | None = None  # None: the server's default

    @model_validator(mode="after")
    def _overlap_below_size(self) -> "EmbedOutcome":
        if self.overlap >= self.chunk_size:
            raise ValueError(f"overlap ({self.overlap}) must be smaller than chunk_size ({self.chunk_size})")
        return self


class LabelClass(BaseModel):
    """A class of a label outcome with a description: what gets embedded and scored (``name`` is the label given)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=128)
    description: str = Field(min_length=1, max_length=2000,
                             description="what the class means, e.g. 'a bill asking for payment, with amounts due'")


class LabelOutcome(OutcomeBase):
    """Zero-shot labels from an embedding model, into metadata and/or sets (the labelling module).

    ``classes``: each a name (the name itself is embedded) or ``{name, description}`` (the description is embedded);
    a class scores the cosine between its vector and the document's (the normalised mean of its chunk vectors) and
    is assigned when the score reaches ``threshold``. ``into``: where assigned labels go (metadata ``label`` and
    ``label.<class>``, resource sets named after the classes, or both). ``collection``: use that collection's stored
    chunk vectors of an entry when it has them with the same model (else the text is chunked and embedded now).
    ``model``: None for the server's ASSAY_EMBED_MODEL.
    """

    type: Literal["label"] = "label"
    classes: list[Union[str, LabelClass]] = Field(min_length=1, max_length=200)
    threshold: float = Field(default=0.3, ge=0, le=1)
    into: Literal["metadata", "sets", "both"] = "metadata"
    model: str | None = None
    collection: str | None = Field(default=None, min_length=1, max_length=200)

    @field_validator("classes", mode="after")
    @classmethod
    def _class_names(cls, classes: list[str | LabelClass]) -> list[str | LabelClass]:
        for c in classes:
            name = c if isinstance(c, str) else c.name
            if not name.strip() or len(name) > 128:
                raise ValueError(f"class name {name!r} is not accepted; give 1-128 characters, not only blanks")
        return classes

    @model_validator(mode="before")
    @classmethod
    def _class_objects(cls, data: Any) -> Any:
        """A class without a description is its name: ``{name: x}`` and ``x`` are the same plan."""
        if isinstance(data, dict) and isinstance(data.get("classes"), list):
            data = dict(data)
            data["classes"] = [c.get("name") if isinstance(c, dict) and set(c) <= {"name", "description"}
                               and c.get("description") is None and "name" in c else c for c in data["classes"]]
        return data

    @model_validator(mode="after")
    def _names(self) -> "LabelOutcome":
        names = self.class_names()
        seen: set[str] = set()
        for name in names:
            if name in seen:
                raise ValueError(f"class {name!r} is given twice; give each class once")
            seen.add(name)
            if self.into != "metadata" and not _SET_NAME.fullmatch(name):
                raise ValueError(f"class {name!r} is not a valid resource-set name, which into={self.into} needs; "
                                 "use 1-128 letters, digits, '-', '_' or '.', starting with a letter or digit (or "
                                 "into=metadata)")
        return self

    def class_names(self) -> list[str]:
        return [c if isinstance(c, str) else c.name for c in self.classes]

    def class_texts(self) -> list[str]:
        """What is embedded for each class: its description, else its name."""
        return [c if isinstance(c, str) else c.description for c in self.classes]


class MapOutcome(OutcomeBase):
    """Build a citation map of each matched file (the citations module): ``strategy`` auto (the best the file has),
    outline (PDF bookmarks), headings (Markdown), chapters (video, audio), scenes (video cuts; audio: silences) or
    windows; ``window``: pages, lines or seconds per node of the windows strategy. A file's map is rebuilt only when
    the file or the parameters changed; a map an agent supplied is never replaced by a plan."""

    type: Literal["map"] = "map"
    strategy: Literal["auto", "outline", "headings", "chapters", "scenes", "windows"] = "auto"
    window: float | None = Field(default=None, gt=0)


Conflict = Literal["skip", "rename_new", "overwrite", "fail"]
CONFLICT_HELP = ("what to do when the destination exists: skip (leave the file where it is, the default), "
                 "rename_new (name the new one 'name (2).ext'), overwrite (replace it; the old one goes to the trash), "
                 "fail (that file's error)")
# the fields a name or destination template may use besides the condition fields (dsl.fields): the file's name
# parts, and its folder's name
TEMPLATE_NAME_FIELDS = ("name", "stem", "extension", "parent", "path")


def _template(text: str, *, what: str) -> str:
    """Parse ``text`` as a template (syntax errors say where) and check its fields exist."""
    template = parse_template(text)
    for name in template.fields():
        if name in TEMPLATE_NAME_FIELDS:
            continue
        try:
            field_spec(name)
        except UnknownField:
            raise ValueError(f"{what} {text!r} uses field {name!r}, which assay does not know; use "
                             f"{', '.join(TEMPLATE_NAME_FIELDS)}, a field of the conditions (mtime, size, "
                             "media_type, width, title, ...) or exif.<tag> / metadata.<key>") from None
    return text


def _literal_text(text: str) -> str:
    """A template's text outside its fields (``{{`` and ``}}`` are literal braces)."""
    out: list[str] = []
    i = 0
    while i < len(text):
        if text.startswith("{{", i) or text.startswith("}}", i):
            out.append(text[i])
            i += 2
        elif text[i] == "{":
            end = text.find("}", i)
            i = len(text) if end < 0 else end + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


class MoveOutcome(OutcomeBase):
    """Move each matched file to `to`, a destination template over the file's fields: a folder when it ends with "/"
    (the file keeps its name: `Documents/{mtime:%Y}/`), else the new path (`Photos/{exif.Model}/{stem}.{extension}`).
    A relative destination is under the root the file is in; an absolute one must be under a root. A file the
    template cannot name (a field it lacks, with no fallback) or that it would place outside the roots is that
    file's error. `conflict`: skip (default), rename_new, overwrite (the old file goes to the trash) or fail."""

    type: Literal["move"] = "move"
    to: str = Field(min_length=1, max_length=1000, description="the destination template")
    conflict: Conflict = Field(default="skip", description=CONFLICT_HELP)

    @field_validator("to")
    @classmethod
    def _to(cls, v: str) -> str:
        return _template(v, what="destination")


class CopyOutcome(MoveOutcome):
    """Copy each matched file to `to` (read as move reads it); the copy is indexed too."""

    type: Literal["copy"] = "copy"  # type: ignore[assignment]


class RenameOutcome(OutcomeBase):
    """Rename each matched file in its folder by `name`, a name template (`{mtime:%Y-%m-%d} {name}`); `conflict`
    as for move."""

    type: Literal["rename"] = "rename"
    name: str = Field(min_length=1, max_length=1000, description="the new name's template (no '/')")
    conflict: Conflict = Field(default="skip", description=CONFLICT_HELP)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if "/" in _literal_text(v):
            raise ValueError(f"name {v!r} has a '/'; a rename stays in the file's folder (use move to change "
                             "folders)")
        return _template(v, what="name")


class TrashOutcome(OutcomeBase):
    """Move each matched file to the trash of its volume (restorable with undo; the trash keeps it for the
    retention setting's days)."""

    type: Literal["trash"] = "trash"


class ChainedOutcome(OutcomeBase):
    """Several outcomes in order on the same matches; with stopOnError an entry that fails one skips the rest."""

    type: Literal["chained"] = "chained"
    outcomes: list["Outcome"] = Field(min_length=1)
    stopOnError: bool = False


OUTCOME_MODELS: dict[str, type[OutcomeBase]] = {}


def register_outcome_model(cls: type[OutcomeBase]) -> type[OutcomeBase]:
    name = cls.model_fields["type"].default
    if name in OUTCOME_MODELS:
        raise ValueError(f"outcome type {name!r} is registered twice")
    OUTCOME_MODELS[name] = cls
    return cls


for _cls in (SelectionSetOutcome, ChainedOutcome, ClassifierOutcome, ExtractTextOutcome, EmbedOutcome, LabelOutcome,
             MapOutcome, MoveOutcome, CopyOutcome, RenameOutcome, TrashOutcome):
    register_outcome_model(_cls)


def _tag(data: Any) -> str | None:
    if isinstance(data, OutcomeBase):
        return data.type
    return data.get("type") if isinstance(data, dict) else None


if TYPE_CHECKING:
    Outcome: TypeAlias = OutcomeBase  # statically: one of the registered models, each an OutcomeBase
else:
    Outcome = Annotated[
        Union[tuple(Annotated[cls, Tag(name)] for name, cls in OUTCOME_MODELS.items())],
        Discriminator(_tag, custom_error_type="invalid_outcome",
                      custom_error_message="unknown outcome type; known: " + ", ".join(OUTCOME_MODELS)),
    ]

ChainedOutcome.model_rebuild()


def iter_outcomes(outcomes: list[OutcomeBase]) -> Iterator[OutcomeBase]:
    """Every outcome, chained ones and their members, depth first."""
    for outcome in outcomes:
        yield outcome
        if isinstance(outcome, ChainedOutcome):
            yield from iter_outcomes(outcome.outcomes)
