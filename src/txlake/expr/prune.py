"""File pruning over many files at once: the statistics of a file list parsed once, predicates evaluated per column.

:func:`txlake.expr.stats.truths` answers "which truth values may this predicate take on this file?" one file
at a time. :class:`StatsIndex` gives the same answer for every file of a list together: each file's possible
truth values are three boolean arrays (may be TRUE / FALSE / NULL), comparisons of a column with a constant
are numpy comparisons over the column's bounds, and ``AND``/``OR``/``NOT`` combine the arrays with the same
Kleene tables. Any node it does not vectorize (casts, ``IN``, ``LIKE``, boolean expressions...) is answered
by the per-file evaluator, so the result is exactly :func:`~txlake.expr.stats.may_match` for every file.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from txlake.delta.actions import Add
from txlake.delta.files import STRING_STATS_PREFIX
from txlake.expr.nodes import FLIPPED, And, ColumnRef, Compare, CompareOp, Const, IsNull, Node, Not, Or
from txlake.expr.stats import ColumnStats, FileStats, T, Truth, U, range_truths_by_op, truths
from txlake.expr.types import family

F_ = Truth.FALSE


@dataclass(frozen=True, slots=True)
class _Truths:
    """Per file: whether TRUE, FALSE, NULL are possible."""

    t: np.ndarray
    f: np.ndarray
    u: np.ndarray

    @property
    def some(self) -> np.ndarray:
        result: np.ndarray = self.t | self.f | self.u
        return result


@dataclass(frozen=True, slots=True)
class _Column:
    lo: np.ndarray  # object arrays; unknown bounds hold None
    hi: np.ndarray
    lo_known: np.ndarray
    hi_known: np.ndarray
    may_nulls: np.ndarray
    may_values: np.ndarray
    exact: np.ndarray


class StatsIndex:
    """The statistics of a fixed list of files (parsed on first use), for pruning them by any predicate."""

    def __init__(self, files: Sequence[Add], schema: pa.Schema, partition_columns: Sequence[str]) -> None:
        self.files = list(files)
        self._schema = schema
        self._partition_columns = tuple(partition_columns)
        self._stats: list[FileStats] | None = None
        self._columns: dict[tuple[str, ...], _Column] = {}

    @property
    def stats(self) -> list[FileStats]:
        if self._stats is None:
            schema, parts = self._schema, self._partition_columns
            self._stats = [FileStats.from_add(a, schema, parts) for a in self.files]
        return self._stats

    def matching(self, node: Node) -> list[Add]:
        """The files where some row may make ``node`` (a bound predicate's tree) TRUE, in list order."""
        if not self.files:
            return []
        result = self._truths(node)
        records = np.array([s.num_records != 0 for s in self.stats], dtype=bool)
        keep = result.t & records
        return [a for a, k in zip(self.files, keep.tolist(), strict=True) if k]

    # --------------------------------------------------------------------------------------- evaluation

    def _truths(self, node: Node) -> _Truths:
        n = len(self.files)
        if isinstance(node, Const) and (node.value is None or isinstance(node.value, bool)):
            value = node.value
            return _Truths(np.full(n, value is True), np.full(n, value is False), np.full(n, value is None))
        if isinstance(node, (And, Or)):
            parts = [self._truths(a) for a in node.args]
            result = parts[0]
            for other in parts[1:]:
                result = _and(result, other) if isinstance(node, And) else _or(result, other)
            return result
        if isinstance(node, Not):
            inner = self._truths(node.arg)
            return _Truths(inner.f, inner.t, inner.u)
        if isinstance(node, IsNull) and isinstance(node.arg, ColumnRef):
            column = self._column(node.arg)
            return _Truths(column.may_nulls, column.may_values, np.zeros(n, dtype=bool))
        if isinstance(node, Compare):
            vector = self._compare(node)
            if vector is not None:
                return vector
        return self._per_file(node)

    def _per_file(self, node: Node) -> _Truths:
        sets = [truths(node, s) for s in self.stats]
        return _Truths(
            np.array([T in s for s in sets], dtype=bool),
            np.array([F_ in s for s in sets], dtype=bool),
            np.array([U in s for s in sets], dtype=bool),
        )

    def _column(self, ref: ColumnRef) -> _Column:
        key = (ref.name, *ref.path)
        column = self._columns.get(key)
        if column is None:
            column = self._columns[key] = _build_column([s.column(ref.name, ref.path) for s in self.stats], ref.type)
        return column

    def _compare(self, node: Compare) -> _Truths | None:
        """``column op constant`` (either way round) over every file, or ``None`` to evaluate per file."""
        op: CompareOp = node.op
        ref, other = node.left, node.right
        if not isinstance(other, Const):
            ref, other, op = node.right, node.left, FLIPPED[op]
        if not isinstance(ref, ColumnRef) or not isinstance(other, Const) or ref.type != other.type:
            return None
        kind = family(ref.type)
        value = other.value
        if kind not in {"numeric", "string", "date", "timestamp"} or isinstance(value, bool):
            return None
        column = self._column(ref)
        n = len(self.files)
        if value is None:
            if op == "<=>":
                return _Truths(column.may_nulls, column.may_values, np.zeros(n, dtype=bool))
            some = column.may_nulls | column.may_values
            return _Truths(np.zeros(n, dtype=bool), np.zeros(n, dtype=bool), some)
        ranges = _range_truths("=" if op == "<=>" else op, column, value, pa.types.is_floating(ref.type))
        if ranges is None:
            return None
        can_true, can_false = ranges
        t = column.may_values & can_true
        f = column.may_values & can_false
        if op == "<=>":
            return _Truths(t, f | column.may_nulls, np.zeros(n, dtype=bool))
        return _Truths(t, f, column.may_nulls.copy())


def _and(a: _Truths, b: _Truths) -> _Truths:
    some_a, some_b = a.some, b.some
    return _Truths(
        a.t & b.t,
        (a.f & some_b) | (b.f & some_a),
        (a.u & (b.t | b.u)) | (b.u & (a.t | a.u)),
    )


def _or(a: _Truths, b: _Truths) -> _Truths:
    some_a, some_b = a.some, b.some
    return _Truths(
        (a.t & some_b) | (b.t & some_a),
        a.f & b.f,
        (a.u & (b.f | b.u)) | (b.u & (a.f | a.u)),
    )


def _build_column(stats: list[ColumnStats], dtype: pa.DataType) -> _Column:
    lo = np.empty(len(stats), dtype=object)
    hi = np.empty(len(stats), dtype=object)
    lo[:] = [s.lo for s in stats]
    hi[:] = [s.hi for s in stats]
    exact_kind = family(dtype) in {"numeric", "date", "boolean"} and not pa.types.is_floating(dtype)
    if family(dtype) == "string":
        exact = np.array(
            [isinstance(s.lo, str) and isinstance(s.hi, str) and len(s.lo) < STRING_STATS_PREFIX for s in stats],
            dtype=bool,
        )
    else:
        exact = np.full(len(stats), exact_kind)
    return _Column(
        lo=lo,
        hi=hi,
        lo_known=np.array([s.lo is not None for s in stats], dtype=bool),
        hi_known=np.array([s.hi is not None for s in stats], dtype=bool),
        may_nulls=np.array([s.may_have_nulls for s in stats], dtype=bool),
        may_values=np.array([s.may_have_values for s in stats], dtype=bool),
        exact=exact,
    )


def _compared(bounds: np.ndarray, known: np.ndarray, value: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """(bound < value, bound == value) where the bound is known (False elsewhere); ``None`` if incomparable."""
    less = np.zeros(len(bounds), dtype=bool)
    equal = np.zeros(len(bounds), dtype=bool)
    if known.any():
        present = bounds[known]
        try:
            less[known] = (present < value).astype(bool)
            equal[known] = (present == value).astype(bool)
        except TypeError:
            return None
    return less, equal


def _range_truths(op: CompareOp, column: _Column, value: Any, floating: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """Per file: (may ``x op value`` be TRUE, may it be FALSE) for non-null ``x`` within the bounds — the
    vector form of :func:`txlake.expr.stats._range_truths`."""
    lo = _compared(column.lo, column.lo_known, value)
    hi = _compared(column.hi, column.hi_known, value)
    if lo is None or hi is None:
        return None
    lo_less, lo_equal = lo
    hi_less, hi_equal = hi
    unknown_lo, unknown_hi = ~column.lo_known, ~column.hi_known
    lo_le = unknown_lo | lo_less | lo_equal
    lo_lt = unknown_lo | lo_less
    hi_ge = unknown_hi | ~hi_less
    hi_gt = unknown_hi | ~(hi_less | hi_equal)
    all_equal = column.exact & column.lo_known & column.hi_known & lo_equal & hi_equal
    can_true, can_false = range_truths_by_op(op, lo_le, lo_lt, hi_ge, hi_gt, ~all_equal)
    if floating:
        # NaN is not bounded by min/max; Spark orders it above every number (see stats._range_truths)
        can_false = np.ones(len(can_false), dtype=bool)
        if op in ("!=", ">", ">=") or (isinstance(value, float) and math.isnan(value)):
            can_true = np.ones(len(can_true), dtype=bool)
    return can_true, can_false
