"""Where the settings (``flows.core.settings``) are read from besides the values given: the environment and the YAML
config file, each a pydantic-settings source; and the small helpers over nested settings values they share.

A setting that has an environment variable declares it in its type, ``Annotated[list[str], Env("ASSAY_ROOTS",
sep=os.pathsep)]``, and :class:`EnvironmentSource` reads every declared variable, from ``os.environ`` or from a
mapping it is given. The names are older than the model and follow no one pattern (``CORS_ORIGINS``,
``ASSAY_OCR``, ``ASSAY_SEARCH_EF``), and most settings sit in a section (``documents.ocr``), whose fields
pydantic-settings' own environment source does not read by alias; so each variable is declared where its setting
is, and one source reads them all. A variable that is unset or blank leaves its setting alone; the value is checked
by the model (``on`` / ``off``, numbers and their limits), and a bad one is named by its variable
(:meth:`EnvironmentSource.origin`). :class:`YamlFileSource` reads the file given with ``--config``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Iterable, Iterator, Mapping

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from store.errors import InvalidInput

Key = tuple[str, ...]  # where a setting sits in the model: ("server", "port"); its YAML key joined by dots


class ConfigError(InvalidInput):
    """A setting, a config file or an environment variable assay cannot use."""

    code = "INVALID_CONFIG"


@dataclass(frozen=True)
class Env:
    """The environment variable of a setting; ``sep``: what separates a list's items in it."""

    name: str
    sep: str | None = None


def env_of(field: FieldInfo) -> Env | None:
    return next((m for m in field.metadata if isinstance(m, Env)), None)


def section_of(field: FieldInfo) -> type[BaseModel] | None:
    """The model of a section field (``server: ServerSection``), else None (a setting)."""
    kind = field.annotation
    return kind if isinstance(kind, type) and issubclass(kind, BaseModel) else None


def leaves(model: type[BaseModel], at: Key = ()) -> Iterator[tuple[Key, FieldInfo]]:
    """Every setting of ``model`` with its place, sections walked in order."""
    for name, field in model.model_fields.items():
        section = section_of(field)
        if section is not None:
            yield from leaves(section, (*at, name))
        else:
            yield (*at, name), field


@lru_cache(maxsize=None)
def file_model(model: type[BaseModel]) -> type[BaseModel]:
    """The shape of a YAML config file for ``model``: its keys, every one optional (null: not set), checked as the
    model checks them."""
    fields: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        section = section_of(field)
        if section is not None:
            kind: Any = file_model(section)
        else:
            kind = Annotated[(field.annotation, *field.metadata)] if field.metadata else field.annotation
        fields[name] = (kind | None, None)
    return create_model(f"{model.__name__}File", __config__=ConfigDict(extra="forbid"), **fields)


def variables(model: type[BaseModel]) -> dict[str, Key]:
    """Every environment variable of ``model`` and the setting it sets."""
    return {env.name: key for key, field in leaves(model) if (env := env_of(field)) is not None}


# --- nested settings values ({"server": {"port": 3000}}) ---------------------------------------------------------


def put(tree: dict[str, Any], key: Key, value: Any) -> None:
    for part in key[:-1]:
        tree = tree.setdefault(part, {})
    tree[key[-1]] = value


def lookup(tree: Mapping[str, Any], key: Key) -> tuple[bool, Any]:
    """(whether ``key`` is set in ``tree``, its value)."""
    for part in key:
        if not isinstance(tree, Mapping) or part not in tree:
            return False, None
        tree = tree[part]
    return True, tree


def remove(tree: dict[str, Any], key: Key) -> None:
    section: Any = tree
    for part in key[:-1]:
        section = section.get(part)
        if not isinstance(section, dict):
            return
    section.pop(key[-1], None)


def merged(low: Mapping[str, Any], high: Mapping[str, Any]) -> dict[str, Any]:
    """``low`` with ``high`` over it, sections merged key by key."""
    out = dict(low)
    for key, value in high.items():
        both = isinstance(value, Mapping) and isinstance(out.get(key), Mapping)
        out[key] = merged(out[key], value) if both else value
    return out


def unset_dropped(values: Mapping[str, Any], *, lists: bool = True) -> dict[str, Any]:
    """``values`` without the ones that say "not set": None, and (``lists``: the command line's) empty lists."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, Mapping):
            value = unset_dropped(value, lists=lists)
        if value is None or (lists and isinstance(value, (list, tuple)) and not value):
            continue
        out[key] = value
    return out


# --- the sources -------------------------------------------------------------------------------------------------


class EnvironmentSource(PydanticBaseSettingsSource):
    """The declared variables that are set in ``environ`` (default: ``os.environ``), as nested settings values."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str] | None = None) -> None:
        super().__init__(settings_cls)
        self.environ = os.environ if environ is None else environ
        self.read: dict[Key, tuple[str, str]] = {}  # setting -> (variable, its text), once called

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # the source reads every section at once (__call__)

    def __call__(self) -> dict[str, Any]:
        values: dict[str, Any] = {}
        self.read = {}
        for key, field in leaves(self.settings_cls):
            env = env_of(field)
            raw = self.environ.get(env.name, "").strip() if env is not None else ""
            if env is None or not raw:
                continue
            self.read[key] = (env.name, raw)
            put(values, key, [p.strip() for p in raw.split(env.sep) if p.strip()] if env.sep else raw)
        return values

    def origin(self, key: Key) -> str | None:
        """How a setting came from the environment (``ASSAY_OCR='maybe'``), if it did."""
        found = self.read.get(key)
        return f"{found[0]}={found[1]!r}" if found else None


class YamlFileSource(PydanticBaseSettingsSource):
    """The YAML config file: settings under their YAML keys; a key without a value is not set. Read when made, so a
    file that cannot be read, is not YAML or has a key the model does not know is refused at once."""

    def __init__(self, settings_cls: type[BaseSettings], path: Path) -> None:
        super().__init__(settings_cls)
        self.path = path
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}", field="config") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {path} is not valid YAML: {exc}", field="config") from None
        if not isinstance(data, dict):
            raise ConfigError(f"config file {path} must hold a mapping of settings, not {type(data).__name__}",
                              field="config")
        unknown = list(_unknown_keys(settings_cls, data))
        if unknown:
            raise ConfigError(f"config file {path}: unknown key(s) {', '.join(unknown)}. Known keys: "
                              f"{', '.join('.'.join(key) for key, _ in leaves(settings_cls))}", field="config")
        try:  # the file's values are checked here, even those a higher layer (environment, command line) replaces
            file_model(settings_cls).model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
            raise ConfigError(f"config file {path}: {problems}", field="config") from None
        self.data = unset_dropped(data, lists=False)

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # the file is read whole (__call__)

    def __call__(self) -> dict[str, Any]:
        return self.data


def _unknown_keys(model: type[BaseModel], data: Mapping[Any, Any], at: Key = ()) -> Iterable[str]:
    for name, value in data.items():
        field = model.model_fields.get(str(name))
        if field is None:
            yield ".".join((*at, str(name)))
            continue
        section = section_of(field)
        if section is not None and isinstance(value, Mapping):
            yield from _unknown_keys(section, value, (*at, str(name)))
