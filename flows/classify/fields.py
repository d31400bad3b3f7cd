"""Condition fields the classifier fills, declared by its capability (``flows.classify.capability``).

- ``width``, ``height``, ``duration`` (seconds), ``pages``, ``title``, ``author``, ``exif.<tag>`` and
  ``metadata.<key>`` are rows of ``metadata_values`` that the metadata operation writes; ``dsl.fields`` already
  knows them (producer ``metadata``), and installing the producer (the capability declares it) makes plans that
  test them valid.
- ``hash`` is the ``entries.hash`` column ("xxh128:<32 hex>"), set by the same operation.
- ``duplicates`` is computed: how many OTHER entries have the same content hash. An entry without a hash has no
  value (so ``duplicates > 0`` and ``duplicates = 0`` are false for it and ``duplicates != 0`` true, as for any
  missing value). In SQL it is a count correlated with the entries table that the partial index
  ``ix_entries_hash`` answers; in Python the same query for one entry.
"""

from __future__ import annotations

from typing import Any, Mapping

from sqlalchemy import and_, func, select
from sqlalchemy.engine import Connection

from flows.classify.model import parse_operations
from flows.core.conditions import ComputedField, Filler
from store.entries import T

PRODUCER = "metadata"


def _same_hash(other, hash_value) -> Any:
    # "hash IS NOT NULL" lets the planners use the partial index ix_entries_hash (its WHERE clause)
    return and_(other.c.hash.is_not(None), other.c.hash == hash_value)


def duplicates_sql():
    """``duplicates`` for the current row of the entries table: (the count of the other entries with the same
    hash, whether the row has a hash)."""
    other = T.alias("dup")
    count = (select(func.count()).select_from(other)
             .where(_same_hash(other, T.c.hash), other.c.id != T.c.id).scalar_subquery())
    return count, T.c.hash.is_not(None)


def duplicates_value(conn: Connection, entry: Mapping[str, Any]) -> int | None:
    """``duplicates`` of one entry row (its ``hash`` as the row has it, like every column field evaluated in
    Python): None without a hash, else how many other entries share it."""
    hash_value = entry.get("hash")
    if hash_value is None:
        return None
    return conn.execute(select(func.count()).select_from(T)
                        .where(_same_hash(T, hash_value), T.c.id != entry["id"])).scalar_one()


DUPLICATES = ComputedField(name="duplicates", sql=duplicates_sql, value=duplicates_value)


def classifier_fills(outcome, spec) -> bool:
    """Whether a classifier outcome fills the field ``spec``: the metadata operation (``extract_metadata`` or
    ``all``) writes the metadata fields, the hash and so the duplicates."""
    return "metadata" in parse_operations(outcome.classifierOperation) and \
        (spec.producer == PRODUCER or spec.name == "hash")


FILLS = Filler("classifier", classifier_fills)
