"""Per-file statistics and the sound "may this file hold a matching row?" test.

A bound predicate is evaluated over a file's min/max/null counts as a *set of possible truth values*
(``TRUE``, ``FALSE``, ``NULL``) — an over-approximation of what the predicate yields on the file's rows.
``AND``/``OR``/``NOT`` combine the sets with Kleene logic, so negation needs no special rules, and a file is
skipped only when ``TRUE`` is impossible. Anything not understood is "all three possible".
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from enum import Enum
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa

from txlake.delta.actions import Add
from txlake.delta.colmap import physical_name
from txlake.delta.files import STRING_STATS_PREFIX, parse_partition_value
from txlake.expr.nodes import (
    FLIPPED,
    And,
    Cast,
    ColumnRef,
    Compare,
    CompareOp,
    Const,
    InList,
    IsNull,
    Like,
    Node,
    Not,
    Or,
)
from txlake.expr.types import family, is_monotone_widening, round_to_float32
from txlake.variant import is_variant

B = TypeVar("B", bool, np.ndarray)


class Truth(Enum):
    TRUE = "true"
    FALSE = "false"
    NULL = "null"


T, F, U = Truth.TRUE, Truth.FALSE, Truth.NULL
ANY = frozenset({T, F, U})

_AND = {
    (T, T): T, (T, F): F, (T, U): U,
    (F, T): F, (F, F): F, (F, U): F,
    (U, T): U, (U, F): F, (U, U): U,
}  # fmt: skip
_OR = {
    (T, T): T, (T, F): T, (T, U): T,
    (F, T): T, (F, F): F, (F, U): U,
    (U, T): T, (U, F): U, (U, U): U,
}  # fmt: skip
_NOT = {T: F, F: T, U: U}


# ------------------------------------------------------------------------------------------- FileStats


_PARSED: dict[tuple[Any, ...], tuple[pa.Schema, FileStats]] = {}
"""Parsed statistics by (schema, stats JSON, partition values, partition columns); cleared when full."""
_PARSED_MAX = 1 << 16


@dataclass(frozen=True)
class FileStats:
    """Typed statistics of one data file (Delta ``stats`` plus partition values as exact bounds).

    ``min_values``/``max_values``/``null_count`` mirror Delta's JSON (struct columns nest as dicts) but hold
    values of the column's Python type (``date``, ``datetime``, ``Decimal``...). Bounds are widened where the
    encoding loses precision (timestamp max + 1 ms, floats by one ulp), so they are always safe bounds.
    """

    num_records: int | None
    min_values: Mapping[str, Any] = field(default_factory=dict)
    max_values: Mapping[str, Any] = field(default_factory=dict)
    null_count: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def unknown(cls) -> FileStats:
        """Stats of a file nothing is known about (everything may match)."""
        return cls(num_records=None)

    @classmethod
    def from_add(cls, add: Add, schema: pa.Schema, partition_columns: Sequence[str]) -> FileStats:
        """Parse an add action's ``stats`` JSON and partition values against the table schema (remembered: the
        same file is pruned again by every statement and every snapshot that holds it)."""
        values = add.partition_values
        key = (id(schema), add.stats, tuple(values.items()) if values else (), tuple(partition_columns))
        hit = _PARSED.get(key)
        if hit is not None and hit[0] is schema:
            return hit[1]
        stats = cls.from_json(add.stats, schema, partition_values=values, partition_columns=partition_columns)
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()
        _PARSED[key] = (schema, stats)  # (the schema is kept alive with its id)
        return stats

    @classmethod
    def from_json(
        cls,
        stats: str | None,
        schema: pa.Schema,
        *,
        partition_values: Mapping[str, str | None] | None = None,
        partition_columns: Sequence[str] = (),
    ) -> FileStats:
        doc: Any = {}
        if stats:
            try:
                doc = json.loads(stats, parse_float=Decimal)
            except ValueError:
                doc = {}
        if not isinstance(doc, dict):
            doc = {}
        raw_records = doc.get("numRecords")
        num_records = raw_records if isinstance(raw_records, int) and not isinstance(raw_records, bool) else None
        mins = _typed_values(doc.get("minValues"), schema, is_max=False)
        maxs = _typed_values(doc.get("maxValues"), schema, is_max=True)
        nulls = _typed_counts(doc.get("nullCount"), schema)
        values = partition_values or {}
        for name in partition_columns:
            if name not in schema.names:
                continue
            mins.pop(name, None)
            maxs.pop(name, None)
            nulls.pop(name, None)
            key = physical_name(schema.field(name))  # partition values are keyed by physical names too
            if key not in values:
                continue  # unknown, not NULL
            try:
                value = parse_partition_value(values.get(key), schema.field(name).type)
            except (ValueError, TypeError, ArithmeticError):
                continue
            if value is None:
                if num_records is not None:
                    nulls[name] = num_records
                continue
            mins[name] = value
            maxs[name] = value
            nulls[name] = 0
        return cls(num_records=num_records, min_values=mins, max_values=maxs, null_count=nulls)

    def column(self, name: str, path: Sequence[str] = ()) -> ColumnStats:
        """Bounds and null count of one (possibly nested) column; missing entries are ``None``."""
        keys = (name, *path)
        return ColumnStats(
            lo=_lookup(self.min_values, keys),
            hi=_lookup(self.max_values, keys),
            null_count=_count(_lookup(self.null_count, keys)),
            num_records=self.num_records,
        )


@dataclass(frozen=True)
class ColumnStats:
    lo: Any
    hi: Any
    null_count: int | None
    num_records: int | None

    @property
    def may_have_nulls(self) -> bool:
        return self.null_count is None or self.null_count > 0

    @property
    def may_have_values(self) -> bool:
        return self.null_count is None or self.num_records is None or self.null_count < self.num_records


def _lookup(values: Mapping[str, Any], keys: Sequence[str]) -> Any:
    current: Any = values
    for key in keys:
        if not isinstance(current, Mapping) or key not in current:
            return None
        current = current[key]
    return None if isinstance(current, Mapping) else current


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _typed_values(raw: Any, schema: pa.Schema | pa.StructType, *, is_max: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if not isinstance(raw, dict):
        return out
    for f in schema:
        key = physical_name(f)  # stats are keyed by physical names (column mapping), results by logical ones
        if key not in raw or is_variant(f.type):  # a variant's stats bound nothing txlake evaluates
            continue
        value = raw[key]
        if pa.types.is_struct(f.type):
            nested = _typed_values(value, f.type, is_max=is_max)
            if nested:
                out[f.name] = nested
            continue
        typed = _typed_bound(value, f.type, is_max=is_max)
        if typed is not None:
            out[f.name] = typed
    return out


def _typed_counts(raw: Any, schema: pa.Schema | pa.StructType) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if not isinstance(raw, dict):
        return out
    for f in schema:
        value = raw.get(physical_name(f))
        if is_variant(f.type):
            continue
        if pa.types.is_struct(f.type) and isinstance(value, dict):
            out[f.name] = _typed_counts(value, f.type)
        elif _count(value) is not None:
            out[f.name] = value
    return out


def _typed_bound(value: Any, t: pa.DataType, *, is_max: bool) -> Any:
    """A JSON stats value as a safe bound of the column's Python type, or ``None`` if unusable."""
    if value is None or isinstance(value, (dict, list)):
        return None
    try:
        if pa.types.is_integer(t):
            if isinstance(value, bool):
                return None
            if isinstance(value, Decimal):
                return int(value) if value == value.to_integral_value() else None
            return value if isinstance(value, int) else None
        if pa.types.is_floating(t):
            if isinstance(value, bool) or not isinstance(value, (int, Decimal, float)):
                return None
            as_float = float(value)
            if math.isnan(as_float):
                return None
            if t.bit_width == 32:
                as_float = round_to_float32(as_float)
            return math.nextafter(as_float, math.inf if is_max else -math.inf)
        if pa.types.is_decimal(t):
            if isinstance(value, bool) or not isinstance(value, (int, Decimal, float, str)):
                return None
            result = Decimal(str(value)) if not isinstance(value, Decimal) else value
            return result if result.is_finite() else None
        if family(t) == "string":
            if not isinstance(value, str):
                return None
            # A max longer than the prefix was truncated by its writer; whether it still bounds is unsure.
            return None if is_max and len(value) > STRING_STATS_PREFIX else value
        if pa.types.is_date(t):
            return date.fromisoformat(value[:10]) if isinstance(value, str) else None
        if pa.types.is_timestamp(t):
            if not isinstance(value, str):
                return None
            stamp = datetime.fromisoformat(value)
            if t.tz is not None and stamp.tzinfo is None:
                stamp = stamp.replace(tzinfo=UTC)
            elif t.tz is None and stamp.tzinfo is not None:
                stamp = stamp.astimezone(UTC).replace(tzinfo=None)
            # Delta truncates timestamp stats to milliseconds, so a max may sit just below the true max.
            return stamp + timedelta(milliseconds=1) if is_max else stamp
        if pa.types.is_boolean(t):
            return value if isinstance(value, bool) else None
    except (ValueError, TypeError, OverflowError, InvalidOperation):
        return None
    return None


# ------------------------------------------------------------------------------------------ pruning


def may_match(node: Node, stats: FileStats) -> bool:
    """``False`` only if no row of the file can make ``node`` TRUE."""
    if stats.num_records == 0:
        return False
    return T in truths(node, stats)


def truths(node: Node, stats: FileStats) -> frozenset[Truth]:
    """The truth values ``node`` may take on some row of the file (an over-approximation)."""
    if isinstance(node, Const):
        if node.value is None:
            return frozenset({U})
        if isinstance(node.value, bool):
            return frozenset({T if node.value else F})
        return ANY
    if isinstance(node, And):
        return _combine([truths(a, stats) for a in node.args], _AND)
    if isinstance(node, Or):
        return _combine([truths(a, stats) for a in node.args], _OR)
    if isinstance(node, Not):
        return frozenset(_NOT[v] for v in truths(node.arg, stats))
    if isinstance(node, IsNull):
        column = _column_stats(node.arg, stats)
        if column is None:
            return frozenset({T, F})
        out = set()
        if column.may_have_nulls:
            out.add(T)
        if column.may_have_values:
            out.add(F)
        return frozenset(out)
    if isinstance(node, Compare):
        return _compare(node, stats)
    if isinstance(node, InList):
        return _in_list(node, stats)
    if isinstance(node, Like):
        return _like(node, stats)
    if pa.types.is_boolean(node.type) and _column_stats(node, stats) is not None:
        return _compare(Compare(type=pa.bool_(), op="=", left=node, right=Const(type=pa.bool_(), value=True)), stats)
    return ANY


def _combine(sets: list[frozenset[Truth]], table: Mapping[tuple[Truth, Truth], Truth]) -> frozenset[Truth]:
    result = sets[0]
    for other in sets[1:]:
        result = frozenset(table[(a, b)] for a in result for b in other)
    return result


@dataclass(frozen=True)
class _Bounds:
    """Column bounds converted into the comparison's type; ``exact`` when lo/hi are the true min/max."""

    lo: Any
    hi: Any
    exact: bool
    nan: bool
    stats: ColumnStats


def _column_stats(node: Node, stats: FileStats) -> ColumnStats | None:
    """Stats of the column behind ``node`` if ``node`` is a column or an order-preserving widening of one."""
    if isinstance(node, Cast) and node.mode == "widen" and is_monotone_widening(node.arg.type, node.type):
        node = node.arg
    if isinstance(node, ColumnRef):
        return stats.column(node.name, node.path)
    return None


def _bounds(node: Node, stats: FileStats) -> _Bounds | None:
    column = _column_stats(node, stats)
    if column is None:
        return None
    source = node.arg.type if isinstance(node, Cast) else node.type
    target = node.type
    lo, hi = column.lo, column.hi
    exact = family(source) in {"numeric", "date", "boolean"} and not pa.types.is_floating(source)
    if family(source) == "string":
        exact = isinstance(lo, str) and isinstance(hi, str) and len(lo) < STRING_STATS_PREFIX
    nan = pa.types.is_floating(source) or pa.types.is_floating(target)
    lo, hi = _convert_bound(lo, source, target, down=True), _convert_bound(hi, source, target, down=False)
    if pa.types.is_floating(target) and not pa.types.is_floating(source):
        exact = False
    return _Bounds(lo=lo, hi=hi, exact=exact, nan=nan, stats=column)


def _convert_bound(value: Any, source: pa.DataType, target: pa.DataType, *, down: bool) -> Any:
    """A bound of ``source`` values as a bound of the same values cast to ``target``."""
    if value is None or source == target:
        return value
    if pa.types.is_floating(target):
        if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
            return None
        # Arrow's cast may round differently from Python by an ulp: widen to stay a bound.
        return math.nextafter(float(value), -math.inf if down else math.inf)
    if pa.types.is_timestamp(target):
        if isinstance(value, datetime):
            stamp = value
        elif isinstance(value, date):
            stamp = datetime(value.year, value.month, value.day)
        else:
            return None
        if target.tz is not None and stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=UTC)
        return stamp
    return value


def _cmp(a: Any, b: Any) -> int | None:
    """Three-way comparison of Python values, ``None`` when they are not comparable."""
    try:
        if a < b:
            return -1
        if a > b:
            return 1
        return 0 if a == b else None
    except TypeError:
        return None


def _constant_value(node: Node) -> tuple[bool, Any]:
    if isinstance(node, Const):
        return True, node.value
    return False, None


def _compare(node: Compare, stats: FileStats) -> frozenset[Truth]:
    op: CompareOp = node.op
    column_node, other = node.left, node.right
    is_const, value = _constant_value(other)
    if not is_const:
        column_node, other = node.right, node.left
        is_const, value = _constant_value(other)
        op = FLIPPED[op]
    if not is_const:
        return ANY if op != "<=>" else frozenset({T, F})
    bounds = _bounds(column_node, stats)
    if bounds is None and isinstance(value, bool) and pa.types.is_boolean(column_node.type):
        return _boolean_compare(op, truths(column_node, stats), value)
    if bounds is None:
        return ANY if op != "<=>" else frozenset({T, F})
    column = bounds.stats
    if value is None:
        if op == "<=>":
            return _null_check(column)
        return frozenset({U}) if (column.may_have_nulls or column.may_have_values) else frozenset()
    out: set[Truth] = set()
    if column.may_have_nulls:
        out.add(F if op == "<=>" else U)
    if column.may_have_values:
        can_true, can_false = _range_truths("=" if op == "<=>" else op, bounds, value)
        if can_true:
            out.add(T)
        if can_false:
            out.add(F)
    return frozenset(out)


def _boolean_compare(op: CompareOp, inner: frozenset[Truth], value: bool) -> frozenset[Truth]:
    """``x = TRUE``, ``x <=> FALSE``, ... for a boolean expression ``x`` with possible values ``inner``."""
    wanted = T if value else F
    if op == "<=>":
        out = {T} if wanted in inner else set()
        if inner - {wanted}:
            out.add(F)
        return frozenset(out)
    if op in ("=", "!="):
        same = inner if value else frozenset(_NOT[v] for v in inner)
        return same if op == "=" else frozenset(_NOT[v] for v in same)
    return ANY


def _null_check(column: ColumnStats) -> frozenset[Truth]:
    out = set()
    if column.may_have_nulls:
        out.add(T)
    if column.may_have_values:
        out.add(F)
    return frozenset(out)


def _range_truths(op: CompareOp, b: _Bounds, v: Any) -> tuple[bool, bool]:
    """(may be TRUE, may be FALSE) of ``x op v`` for non-null ``x`` within the bounds."""
    lo = _cmp(b.lo, v) if b.lo is not None else None  # sign of lo - v
    hi = _cmp(b.hi, v) if b.hi is not None else None  # sign of hi - v
    lo_le = lo is None or lo <= 0  # some x may be <= v
    lo_lt = lo is None or lo < 0
    hi_ge = hi is None or hi >= 0
    hi_gt = hi is None or hi > 0
    all_equal = b.exact and lo == 0 and hi == 0
    can_true, can_false = range_truths_by_op(op, lo_le, lo_lt, hi_ge, hi_gt, not all_equal)
    if b.nan:
        # A floating column may hold NaN, which min/max do not bound. Spark orders NaN above every number and
        # NaN = NaN: a NaN row makes `>`, `>=` and `!=` TRUE, the others FALSE (all but `!=`, for v NaN).
        can_false = True
        if op in ("!=", ">", ">=") or _is_nan(v):
            can_true = True
    return can_true, can_false


def range_truths_by_op(op: CompareOp, lo_le: B, lo_lt: B, hi_ge: B, hi_gt: B, differs: B) -> tuple[B, B]:
    """(may ``x op v`` be TRUE, may it be FALSE) from how the bounds compare with ``v``: some ``x`` may be
    ``<= v`` (``lo_le``), ``< v``, ``>= v`` (``hi_ge``), ``> v``; not every ``x`` is exactly ``v`` (``differs``).
    The same for one file (bools) and for many (numpy boolean arrays)."""
    if op == "=":
        return lo_le & hi_ge, differs
    if op == "!=":
        return differs, lo_le & hi_ge
    if op == "<":
        return lo_lt, hi_ge
    if op == "<=":
        return lo_le, hi_gt
    if op == ">":
        return hi_gt, lo_le
    return hi_ge, lo_lt  # ">="


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _in_list(node: InList, stats: FileStats) -> frozenset[Truth]:
    if not all(isinstance(v, Const) for v in node.values):
        return ANY
    bounds = _bounds(node.arg, stats)
    if bounds is None:
        return ANY
    values = [v.value for v in node.values if isinstance(v, Const)]
    present = [v for v in values if v is not None]
    has_null = len(present) < len(values)
    column = bounds.stats
    out: set[Truth] = set()
    if column.may_have_nulls:
        out.add(U)
    if column.may_have_values:
        can_true = any(_range_truths("=", bounds, v)[0] for v in present)
        can_false = all(_range_truths("=", bounds, v)[1] for v in present)
        if can_true:
            out.add(T)
        if can_false:
            out.add(U if has_null else F)
    return frozenset(out)


def _like(node: Like, stats: FileStats) -> frozenset[Truth]:
    if node.mode != "like":
        return ANY
    bounds = _bounds(node.arg, stats)
    if bounds is None or family(node.arg.type) != "string":
        return ANY
    prefix = _like_prefix(node.pattern)
    column = bounds.stats
    out: set[Truth] = {F} if column.may_have_values else set()
    if column.may_have_nulls:
        out.add(U)
    if not column.may_have_values:
        return frozenset(out)
    if not prefix:
        out.add(T)
        return frozenset(out)
    upper = _prefix_successor(prefix)
    below = bounds.hi is not None and _is_less(bounds.hi, prefix)
    above = upper is not None and bounds.lo is not None and not _is_less(bounds.lo, upper)
    if not (below or above):
        out.add(T)
    return frozenset(out)


def _is_less(a: Any, b: Any) -> bool:
    result = _cmp(a, b)
    return result is not None and result < 0


def _like_prefix(pattern: str) -> str:
    """The literal characters a LIKE pattern starts with (stops at the first wildcard or escape)."""
    prefix = []
    for ch in pattern:
        if ch in "%_\\":
            break
        prefix.append(ch)
    return "".join(prefix)


def _prefix_successor(prefix: str) -> str | None:
    """The smallest string greater than every string starting with ``prefix`` (``None`` if unbounded)."""
    chars = list(prefix)
    while chars:
        last = ord(chars[-1])
        if last < 0x10FFFF:
            chars[-1] = chr(last + 1 if last + 1 != 0xD800 else 0xE000)
            return "".join(chars)
        chars.pop()
    return None
