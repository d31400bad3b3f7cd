"""Session preferences (reference 000's session-set-preferences): a fixed list of keys, each with its allowed values,
persisted in the ``preferences`` table so they survive a restart.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Callable

from sqlalchemy import delete, insert, select
from sqlalchemy.engine import Engine

from store.errors import InvalidInput
from store.models import Preference

P = Preference.__table__


@dataclass(frozen=True)
class PreferenceSpec:
    key: str
    default: Any
    accepted: str  # what a caller may send, in words
    check: Callable[[Any], Any]  # returns the normalised value or raises ValueError
    description: str


def _one_of(*choices: str) -> Callable[[Any], Any]:
    def check(value: Any) -> str:
        if isinstance(value, str) and value.strip().lower() in choices:
            return value.strip().lower()
        raise ValueError
    return check


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError


def _int_between(low: int, high: int) -> Callable[[Any], Any]:
    def check(value: Any) -> int:
        if isinstance(value, bool):
            raise ValueError
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value.strip())
        if isinstance(value, int) and low <= value <= high:
            return value
        raise ValueError
    return check


SPECS: dict[str, PreferenceSpec] = {s.key: s for s in (
    PreferenceSpec("default_sort", "name", "one of name, size, mtime", _one_of("name", "size", "mtime"),
                   "Sort field navigate uses when the call gives none"),
    PreferenceSpec("show_hidden", True, "true or false", _boolean,
                   "Whether navigate lists entries whose names start with a dot"),
    PreferenceSpec("thumbnail_size", "medium", "one of small, medium, large", _one_of("small", "medium", "large"),
                   "Size of generated thumbnails"),
    PreferenceSpec("thumbnail.max_width", 320, "a whole number from 16 to 4096", _int_between(16, 4096),
                   "Largest width of a generated thumbnail, in pixels (a classifier outcome's maxWidth overrides)"),
    PreferenceSpec("thumbnail.max_height", 320, "a whole number from 16 to 4096", _int_between(16, 4096),
                   "Largest height of a generated thumbnail, in pixels (a classifier outcome's maxHeight overrides)"),
    PreferenceSpec("timeline.frame_count", 5, "a whole number from 1 to 100", _int_between(1, 100),
                   "How many frames a video timeline spreads evenly over the video's duration"),
)}


def known_keys() -> str:
    return "; ".join(f"{s.key} ({s.accepted})" for s in SPECS.values())


def validate(preferences: Any, *, field: str = "preferences") -> dict[str, Any]:
    """Check every key and value; a null value means "back to the default". All problems are reported together."""
    if not isinstance(preferences, dict):
        raise InvalidInput(f"{field} must be an object of key-value pairs, e.g. "
                           '{"default_sort": "size", "show_hidden": false}; known keys: ' + known_keys(), field=field)
    problems: list[str] = []
    clean: dict[str, Any] = {}
    for key, value in preferences.items():
        spec = SPECS.get(key)
        if spec is None:
            problems.append(f"unknown preference {key!r}")
            continue
        if value is None:
            clean[key] = None
            continue
        try:
            clean[key] = spec.check(value)
        except ValueError:
            problems.append(f"{field}.{key} must be {spec.accepted}, got {json.dumps(value)}")
    if problems:
        raise InvalidInput(f"{'; '.join(problems)}. Known preferences: {known_keys()}", field=field)
    return clean


def load_preferences(engine: Engine) -> dict[str, Any]:
    """Every known preference: the stored value, or its default. Stored keys no longer known are left out."""
    values = {key: spec.default for key, spec in SPECS.items()}
    with engine.connect() as conn:
        for key, value_json in conn.execute(select(P.c.key, P.c.value_json)):
            if key in SPECS:
                values[key] = json.loads(value_json)
    return values


def set_preferences(engine: Engine, preferences: Any) -> tuple[dict[str, Any], list[str]]:
    """Validate, then store all of ``preferences`` in one transaction; returns (every preference now, keys changed)."""
    clean = validate(preferences)
    now = time.time()
    with engine.begin() as conn:
        for key, value in clean.items():
            conn.execute(delete(P).where(P.c.key == key))  # portable upsert: one row per key, in one transaction
            if value is not None:
                conn.execute(insert(P).values(key=key, value_json=json.dumps(value), updated_at=now))
    return load_preferences(engine), list(clean)
