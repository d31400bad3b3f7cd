"""Values with units: sizes (``10MB``, ``1.5GiB``), durations (``500ms``, ``7d``), dates (``2024-01-01``) and
relative times (``now - 7d``); parsed to canonical values and printed back so that parse(print(v)) == v.

Canonical forms: a size is an int of bytes; a duration is a float of seconds; an absolute time is an ISO 8601 string
(``2024-01-01`` at midnight UTC, else ``2024-01-01T12:30:00Z``); a relative time is the string ``now - 7d``
(``now`` alone, or ``now + 1h``), evaluated when a plan runs.
"""

from __future__ import annotations

import math
import re
from datetime import date, datetime, timezone

from dsl.limits import MAX_INT, MAX_NUMBER, NUMBER_RULE

SIZE_UNITS: dict[str, int] = {
    "b": 1,
    "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4, "pb": 1000**5,
    "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4, "pib": 1024**5,
    "k": 1000, "m": 1000**2, "g": 1000**3, "t": 1000**4,
}
_SIZE_PRINT = [("PiB", 1024**5), ("PB", 1000**5), ("TiB", 1024**4), ("TB", 1000**4), ("GiB", 1024**3),
               ("GB", 1000**3), ("MiB", 1024**2), ("MB", 1000**2), ("KiB", 1024), ("KB", 1000)]

DURATION_UNITS: dict[str, float] = {
    "ms": 0.001, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hr": 3600, "d": 86400, "w": 604800,
    "y": 365 * 86400,
}
_DURATION_PRINT = [("d", 86400), ("h", 3600), ("m", 60), ("s", 1), ("ms", 0.001)]  # 7d stays 7d, not 1w

SIZE_HELP = "a number of bytes or a number with a unit: B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB " \
            "(powers of 1024), e.g. 10MB or 1.5GiB"
DURATION_HELP = "a number with a unit: ms, s, m (minutes), h, d, w, y, e.g. 500ms, 90s or 7d"
TIME_HELP = "a date (2024-01-31), a date-time (2024-01-31T12:00:00Z), unix seconds, or a relative time (now - 7d)"

_NUM_UNIT = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?|\.[0-9]+)\s*([A-Za-z]*)\s*")
_RELATIVE = re.compile(r"\s*now\s*(?:([+-])\s*(.+?))?\s*", re.IGNORECASE)


MAX_DURATION = 10_000 * 365 * 86400.0  # seconds: ten thousand years
# unix seconds of 0001-01-01 and 9999-12-31T23:59:59Z: the times a date can spell
MIN_TIMESTAMP, MAX_TIMESTAMP = -62135596800.0, 253402300799.0


class UnitError(ValueError):
    """A value whose unit (or form) is not one we accept; the message says what would be."""


def _number_text(number: str) -> float:
    if len(number) > MAX_NUMBER:
        raise UnitError(f"this number is {len(number):,} characters long; {NUMBER_RULE}")
    return float(number)


def parse_size(value: object) -> int:
    """Bytes from an int, a float with no fraction, or text such as ``10MB`` / ``1.5GiB`` / ``2048``."""
    if isinstance(value, bool):
        raise UnitError(f"{value!r} is not a size; use {SIZE_HELP}")
    if isinstance(value, int):
        if value < 0:
            raise UnitError(f"size {value} is negative; sizes are 0 or more bytes")
        if value > MAX_INT:
            raise UnitError(f"size is out of range; sizes are at most {MAX_INT} bytes")
        return value
    if isinstance(value, float):
        if value < 0 or not math.isfinite(value) or value != int(value):
            raise UnitError(f"size {value} is not a whole, non-negative number of bytes; use {SIZE_HELP}")
        return parse_size(int(value))
    if isinstance(value, str):
        m = _NUM_UNIT.fullmatch(value)
        if m:
            number, unit = m.group(1), m.group(2).lower()
            if unit == "":
                unit = "b"
            factor = SIZE_UNITS.get(unit)
            if factor is None:
                raise UnitError(f"unknown size unit {m.group(2)!r} in {value!r}; use {SIZE_HELP}")
            size = _number_text(number) * factor
            if not size <= MAX_INT:
                raise UnitError(f"size {value!r} is out of range; sizes are at most {MAX_INT} bytes (8EiB)")
            return int(round(size))
    raise UnitError(f"{value!r} is not a size; use {SIZE_HELP}")


def format_size(n: int) -> str:
    """The shortest exact spelling: ``1GiB`` for 1073741824, ``1GB`` for 10**9, ``1500`` for 1500."""
    for unit, factor in _SIZE_PRINT:
        if n and n % factor == 0:
            return f"{n // factor}{unit}"
    return str(n)


def parse_duration(value: object) -> float:
    """Seconds from a number (seconds) or text such as ``500ms``, ``90s``, ``7d``."""
    if isinstance(value, bool):
        raise UnitError(f"{value!r} is not a duration; use {DURATION_HELP}")
    if isinstance(value, (int, float)):
        if not 0 <= value <= MAX_DURATION:  # also refuses NaN
            raise UnitError(f"duration {value} must be a number of seconds from 0 to {MAX_DURATION:.0f} "
                            "(ten thousand years)")
        return float(value)
    if isinstance(value, str):
        m = _NUM_UNIT.fullmatch(value)
        if m:
            number, unit = m.group(1), m.group(2).lower() or "s"
            factor = DURATION_UNITS.get(unit)
            if factor is None:
                raise UnitError(f"unknown duration unit {m.group(2)!r} in {value!r}; use {DURATION_HELP}")
            seconds = _number_text(number) * factor
            if not seconds <= MAX_DURATION:
                raise UnitError(f"duration {value!r} is out of range; durations are at most ten thousand years")
            return round(seconds, 6)
    raise UnitError(f"{value!r} is not a duration; use {DURATION_HELP}")


def format_duration(seconds: float) -> str:
    """The shortest exact spelling: ``7d``, ``90s``, ``500ms``; ``1.25`` seconds stays ``1250ms``."""
    if seconds == 0:
        return "0s"
    for unit, factor in _DURATION_PRINT:
        count = seconds / factor
        if abs(count - round(count)) < 1e-9 and round(count) >= 1:
            return f"{int(round(count))}{unit}"
    return f"{seconds:g}s"


def parse_timestamp(value: object) -> float:
    """Unix seconds from unix seconds (number or numeric text) or an ISO 8601 date / date-time (naive = UTC)."""
    if isinstance(value, bool):
        raise UnitError(f"{value!r} is not a time; use {TIME_HELP}")
    if isinstance(value, (int, float)):
        if not MIN_TIMESTAMP <= value <= MAX_TIMESTAMP:  # also refuses NaN
            raise UnitError(f"time {value} is out of range; unix seconds lie between {MIN_TIMESTAMP:.0f} "
                            f"(year 1) and {MAX_TIMESTAMP:.0f} (year 9999)")
        return float(value)
    if isinstance(value, (date, datetime)):
        if not isinstance(value, datetime):
            value = datetime.combine(value, datetime.min.time())
        return (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).timestamp()
    if isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"-?\d+(\.\d+)?", text):
            return parse_timestamp(_number_text(text))
        try:
            if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
                parsed = datetime.combine(date.fromisoformat(text), datetime.min.time())
            else:
                parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace(" ", "T", 1))
        except (ValueError, OverflowError):
            raise UnitError(f"{value!r} is not a time; use {TIME_HELP}") from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=timezone.utc)
        return parsed.timestamp()
    raise UnitError(f"{value!r} is not a time; use {TIME_HELP}")


def format_timestamp(ts: float) -> str:
    dt = datetime.fromtimestamp(ts, tz=timezone.utc)
    if dt.hour == dt.minute == dt.second == dt.microsecond == 0:
        return dt.date().isoformat()
    text = dt.isoformat(timespec="microseconds" if dt.microsecond else "seconds")
    return text.replace("+00:00", "Z")


def is_relative(text: object) -> bool:
    return isinstance(text, str) and _RELATIVE.fullmatch(text) is not None


def parse_relative(text: str) -> float:
    """Signed offset in seconds from now of ``now``, ``now - 7d``, ``now + 1h``."""
    m = _RELATIVE.fullmatch(text)
    if not m:
        raise UnitError(f"{text!r} is not a relative time; write now, now - 7d or now + 1h")
    if m.group(1) is None:
        return 0.0
    seconds = parse_duration(m.group(2))
    return -seconds if m.group(1) == "-" else seconds


def format_relative(offset: float) -> str:
    if offset == 0:
        return "now"
    return f"now {'-' if offset < 0 else '+'} {format_duration(abs(offset))}"


def canonical_time(value: object) -> str:
    """The canonical text of a time value: ``now - 7d`` for relative times, an ISO string for absolute ones."""
    if is_relative(value):
        return format_relative(parse_relative(value))  # type: ignore[arg-type]
    return format_timestamp(parse_timestamp(value))


def resolve_time(canonical: str, now: float) -> float:
    """Unix seconds of a canonical time value at the moment ``now``."""
    if is_relative(canonical):
        return now + parse_relative(canonical)
    return parse_timestamp(canonical)
