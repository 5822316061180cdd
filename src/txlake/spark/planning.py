"""Read planning for the data source: file pruning by pushed-down Spark filters, and file packing into tasks.

Pushed filters are translated into txlake predicates (Spark SQL text) and used only to drop files whose
statistics or partition values prove they hold no matching row (``may_match``). Spark still applies every
filter to the rows, so pruning only has to be sound, never exact.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)
from sqlglot import exp

from txlake.delta.actions import Add
from txlake.errors import PredicateError
from txlake.expr import BoundPredicate, FileStats, parse_predicate

DEFAULT_MAX_PARTITION_BYTES = 128 * 1024 * 1024
DEFAULT_OPEN_COST_BYTES = 4 * 1024 * 1024

_COMPARISONS: dict[type[Filter], str] = {
    EqualTo: "=",
    GreaterThan: ">",
    GreaterThanOrEqual: ">=",
    LessThan: "<",
    LessThanOrEqual: "<=",
}


# ---------------------------------------------------------------------------------------- filters -> SQL


def _column_sql(path: Sequence[str]) -> str:
    return ".".join(exp.to_identifier(part, quoted=True).sql(dialect="spark") for part in path)


def literal_sql(value: Any) -> str | None:
    """A Spark SQL literal for a pushed-down filter value, or ``None`` when it has no safe literal form."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else None
    if isinstance(value, Decimal):
        return format(value, "f") if value.is_finite() else None
    if isinstance(value, str):
        return str(exp.Literal.string(value).sql(dialect="spark"))
    if isinstance(value, datetime):
        if value.tzinfo is None:  # TIMESTAMP_NTZ
            return f"CAST('{value.isoformat(sep=' ')}' AS TIMESTAMP_NTZ)"
        # txlake predicates read timestamp literals in UTC: give the instant in UTC
        return f"TIMESTAMP '{value.astimezone(UTC).replace(tzinfo=None).isoformat(sep=' ')}'"
    if isinstance(value, date):
        return f"DATE '{value.isoformat()}'"
    return None  # bytes, arrays, variants...: no pruning from these


def filter_sql(f: Filter) -> str | None:
    """A txlake predicate implied by the Spark filter ``f`` (every row passing ``f`` satisfies it), or ``None``."""
    if isinstance(f, Not):
        inner = filter_sql(f.child)
        # NOT is only sound when the inner predicate is equivalent to the filter, not merely implied by it
        if inner is None or isinstance(f.child, (StringStartsWith, StringEndsWith, StringContains)):
            return None
        return f"NOT ({inner})"
    column = _column_sql(f.attribute) if hasattr(f, "attribute") else None
    if column is None:
        return None
    if isinstance(f, IsNull):
        return f"{column} IS NULL"
    if isinstance(f, IsNotNull):
        return f"{column} IS NOT NULL"
    if isinstance(f, (StringEndsWith, StringContains)):
        return f"{column} IS NOT NULL"
    if isinstance(f, StringStartsWith):
        text = literal_sql(f.value)
        return None if text is None else f"{column} >= {text}"  # every string starting with v sorts at or after v
    if isinstance(f, EqualNullSafe):
        if f.value is None:
            return f"{column} IS NULL"
        text = literal_sql(f.value)
        return None if text is None else f"{column} <=> {text}"
    if isinstance(f, In):
        values = [literal_sql(v) for v in f.value]
        if not values or any(v is None for v in values):
            return None
        return f"{column} IN ({', '.join(v for v in values if v is not None)})"
    op = _COMPARISONS.get(type(f))
    if op is None:
        return None
    text = literal_sql(getattr(f, "value", None))
    if text is None or text == "NULL":
        return None
    return f"{column} {op} {text}"


def pruning_predicates(filters: Iterable[Filter], schema: pa.Schema) -> list[BoundPredicate]:
    """Bound txlake predicates for the filters that can prune files (the others are skipped)."""
    out = []
    for f in filters:
        sql = filter_sql(f)
        if sql is None:
            continue
        try:
            out.append(parse_predicate(sql).bind(schema))
        except PredicateError:
            continue
    return out


def prune(
    files: Sequence[Add], predicates: Sequence[BoundPredicate], schema: pa.Schema, partition_columns: Sequence[str]
) -> list[Add]:
    """The files that may hold a row satisfying every predicate."""
    if not predicates:
        return list(files)
    kept = []
    for add in files:
        stats = FileStats.from_add(add, schema, partition_columns)
        if all(p.may_match(stats) for p in predicates):
            kept.append(add)
    return kept


# --------------------------------------------------------------------------------------- task packing


@dataclass(frozen=True, slots=True)
class PackingPolicy:
    """How files become read tasks, as Spark packs file splits (``spark.sql.files.*``)."""

    max_partition_bytes: int = DEFAULT_MAX_PARTITION_BYTES
    open_cost_bytes: int = DEFAULT_OPEN_COST_BYTES
    parallelism: int = 1

    def split_bytes(self, files: Sequence[Add]) -> int:
        total = sum(a.size + self.open_cost_bytes for a in files)
        per_core = total // max(self.parallelism, 1)
        return max(1, min(self.max_partition_bytes, max(self.open_cost_bytes, per_core)))


def pack_files(files: Sequence[Add], policy: PackingPolicy) -> list[tuple[Add, ...]]:
    """Group whole files into tasks of about ``policy.split_bytes`` each (largest first, next-fit).

    Few small files get one task each (the split size shrinks to spread them over the cores); many small
    files share tasks so that per-task overhead does not dominate.
    """
    if not files:
        return []
    limit = policy.split_bytes(files)
    groups: list[tuple[Add, ...]] = []
    current: list[Add] = []
    size = 0
    for add in sorted(files, key=lambda a: (-a.size, a.path)):
        cost = add.size + policy.open_cost_bytes
        if current and size + cost > limit:
            groups.append(tuple(current))
            current, size = [], 0
        current.append(add)
        size += cost
    if current:
        groups.append(tuple(current))
    return groups
