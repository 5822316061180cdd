"""Row-level DELETE, UPDATE and MERGE on Arrow tables (copy-on-write; file bookkeeping is the caller's).

Semantics follow Delta Lake: rows where a condition is NULL are neither deleted nor updated; a target row
matched by several source rows makes a merge ambiguous (:class:`~txlake.errors.MergeCardinalityError`)
unless the only matched clause is an unconditional delete; new values are cast to the column type and a
lossy or invalid cast is a :class:`~txlake.errors.SchemaMismatchError` (decimal scale is rounded half-up,
as Spark's store assignment does).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from txlake.delta.schema import cast_problem, spark_type_name
from txlake.errors import MergeCardinalityError, PredicateError, SchemaMismatchError
from txlake.expr import (
    BoundExpression,
    BoundPredicate,
    Predicate,
    common_type,
    parse_expression,
    parse_predicate,
    split_conjuncts,
)

ColumnMap = Mapping[str, str] | Literal["*"]

_CAST_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError)


# ------------------------------------------------------------------------------------------- helpers


def replace_masked(column: pa.Array, mask: pa.Array, replacements: pa.Array) -> pa.Array:
    """``column`` with its rows where ``mask`` is true replaced, in order, by ``replacements`` (one per true
    row): ``pc.replace_with_mask``, which has no kernel for structs, lists and maps; those are taken from
    ``column`` followed by ``replacements``."""
    if not pa.types.is_nested(column.type):
        return pc.replace_with_mask(column, mask, replacements)
    if isinstance(replacements, pa.ChunkedArray):
        replacements = replacements.combine_chunks()
    hits = np.asarray(mask.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)
    indices = np.arange(len(column), dtype=np.int64)
    indices[hits] = len(column) + np.arange(int(hits.sum()), dtype=np.int64)
    return pa.concat_arrays([column, replacements.cast(column.type)]).take(pa.array(indices))


def conform_column(values: pa.Array | pa.ChunkedArray, target: pa.Field, *, table: str | None = None) -> pa.Array:
    """``values`` cast to ``target``'s type; lossy/invalid casts and NULLs in NOT NULL columns raise."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    t = target.type
    if values.type != t:
        source = values.type
        try:
            if pa.types.is_decimal(t) and (pa.types.is_decimal(source) or pa.types.is_floating(source)):
                values = pc.round(values, ndigits=t.scale, round_mode="half_towards_infinity")
            values = pc.cast(values, t, safe=True)
        except _CAST_ERRORS as exc:
            raise SchemaMismatchError(
                f"values of type {spark_type_name(source)} cannot be stored in column {target.name!r} "
                f"({spark_type_name(t)}): {cast_problem(exc)}",
                table=table,
                columns=[target.name],
            ) from exc
    if not target.nullable and values.null_count:
        raise SchemaMismatchError(
            f"NULL cannot be stored in NOT NULL column {target.name!r}", table=table, columns=[target.name]
        )
    return values


def _matches(predicate: BoundPredicate | None, data: pa.Table) -> pa.BooleanArray:
    if predicate is None:
        return pa.repeat(pa.scalar(True), data.num_rows)
    return predicate.matches(data)


def _count_true(mask: pa.BooleanArray) -> int:
    return int(pc.sum(pc.cast(mask, pa.int64())).as_py() or 0)


def _resolve_target_column(schema: pa.Schema, key: str, alias: str | None, table: str | None) -> str:
    name = key.strip().strip("`")
    if alias is not None and name.lower().startswith(alias.lower() + "."):
        name = name[len(alias) + 1 :].strip("`")
    exact = [n for n in schema.names if n == name]
    hits = exact or [n for n in schema.names if n.lower() == name.lower()]
    if len(hits) != 1:
        raise SchemaMismatchError(f"no column {key!r} in the target", table=table, columns=[key])
    return str(hits[0])


# -------------------------------------------------------------------------------------- delete/update


def delete_rows(data: pa.Table, where: BoundPredicate | None) -> tuple[pa.Table, int]:
    """Rows kept after ``DELETE WHERE where`` and the number deleted (NULL conditions keep the row)."""
    if where is None:
        return data.slice(0, 0), data.num_rows
    hit = where.matches(data)
    kept = data.filter(pc.invert(hit))
    return kept, data.num_rows - kept.num_rows


def update_rows(
    data: pa.Table,
    set: Mapping[str, BoundExpression],
    where: BoundPredicate | None,
    *,
    table: str | None = None,
) -> tuple[pa.Table, int]:
    """All rows after ``UPDATE SET col = expr, ... WHERE where`` and the number updated.

    Expressions are evaluated on the matching rows only (so ``CASE``-free guards in ``where`` protect them);
    the result keeps ``data.schema`` exactly.
    """
    targets = {_resolve_target_column(data.schema, col, None, table): expr for col, expr in set.items()}
    hit = _matches(where, data)
    count = _count_true(hit)
    if count == 0:
        return data, 0
    subset = data.filter(hit) if count < data.num_rows else data
    columns = []
    for i, f in enumerate(data.schema):
        column = data.column(i).combine_chunks()
        expr = targets.get(f.name)
        if expr is not None:
            new = conform_column(expr.evaluate(subset), f, table=table)
            column = new if count == data.num_rows else replace_masked(column, hit, new)
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=data.schema), count


# --------------------------------------------------------------------------------------------- merge


@dataclass(frozen=True)
class MergeResult:
    """Outcome of a merge over a target given as per-file tables.

    ``files[i]`` is ``None`` when file ``i`` is unchanged, else the rows that replace it (possibly empty).
    ``touched``/``matched`` have one entry per input target row (files concatenated in order): updated or
    deleted, and matched by some source row.
    """

    files: tuple[pa.Table | None, ...]
    inserted: pa.Table
    num_updated: int
    num_deleted: int
    num_inserted: int
    touched: pa.BooleanArray
    matched: pa.BooleanArray
    originals: tuple[pa.Table, ...] = field(repr=False, default=())

    @property
    def changed_files(self) -> tuple[int, ...]:
        return tuple(i for i, f in enumerate(self.files) if f is not None)

    @property
    def num_copied(self) -> int:
        """Unchanged rows rewritten because their file changed (Delta's ``numTargetRowsCopied``)."""
        rewritten: int = sum(new.num_rows for new in self.files if new is not None)
        return rewritten - self.num_updated

    @property
    def target(self) -> pa.Table:
        """All target rows after the merge, excluding inserted rows (file order kept)."""
        parts = [o if n is None else n for o, n in zip(self.originals, self.files, strict=True)]
        if not parts:
            return self.inserted.slice(0, 0)
        return pa.concat_tables(parts)


@dataclass(frozen=True)
class _Clause:
    kind: Literal["update", "delete"]
    condition: BoundPredicate | None


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _struct_field(name: str, schema: pa.Schema) -> pa.Field:
    return pa.field(name, pa.struct(list(schema)))


def _context(parts: Sequence[tuple[str, pa.Table]]) -> pa.Table:
    """A table with one struct column per alias, so ``alias.col`` resolves as a struct field."""
    arrays = []
    fields = []
    for alias, data in parts:
        struct = data.to_struct_array()
        arrays.append(struct.combine_chunks() if isinstance(struct, pa.ChunkedArray) else struct)
        fields.append(_struct_field(alias, data.schema))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


class _MergePlan:
    """Binds a merge's ON condition and clauses against the target and source schemas."""

    def __init__(
        self,
        target_schema: pa.Schema,
        source_schema: pa.Schema,
        *,
        on: str,
        target_alias: str,
        source_alias: str,
        table: str | None,
    ) -> None:
        if target_alias.lower() == source_alias.lower():
            raise ValueError("target_alias and source_alias must differ")
        self.target_schema = target_schema
        self.source_schema = source_schema
        self.t = target_alias
        self.s = source_alias
        self.table = table
        self.aliases = (target_alias, source_alias)
        self.joined_schema = pa.schema(
            [_struct_field(target_alias, target_schema), _struct_field(source_alias, source_schema)]
        )
        self.source_only = pa.schema([_struct_field(source_alias, source_schema)])
        self.keys: list[tuple[BoundExpression, BoundExpression, pa.DataType]] = []
        residual: list[Predicate] = []
        condition = parse_predicate(on)
        condition.bind(self.joined_schema, aliases=self.aliases)  # validates the whole condition
        for part in split_conjuncts(condition):
            key = self._equi_key(part)
            if key is None:
                residual.append(part)
            else:
                self.keys.append(key)
        self.residual = (
            Predicate.conjunction(*residual).bind(self.joined_schema, aliases=self.aliases) if residual else None
        )

    def _equi_key(self, part: Predicate) -> tuple[BoundExpression, BoundExpression, pa.DataType] | None:
        """``t.a = s.b`` (either order) as (target side, source side, join key type), else ``None``."""
        pairs = part.equalities()
        if len(pairs) != 1:
            return None
        sides = [parse_expression(sql).bind(self.joined_schema, aliases=self.aliases) for sql in pairs[0]]
        owners = [next(iter(side.columns)) for side in sides]
        if owners == [self.s, self.t]:
            sides.reverse()
        elif owners != [self.t, self.s]:
            return None
        target_side, source_side = sides
        key_type = common_type(target_side.type, source_side.type)
        if key_type is None:
            raise PredicateError(
                f"merge condition {part.sql!r} compares {target_side.type} with {source_side.type}",
                expression=part.sql,
            )
        return target_side, source_side, key_type

    def bind_condition(self, sql: str | None) -> BoundPredicate | None:
        if sql is None:
            return None
        return parse_predicate(sql).bind(self.joined_schema, aliases=self.aliases)

    def bind_update(self, mapping: ColumnMap) -> dict[str, BoundExpression]:
        return {
            column: parse_expression(sql).bind(self.joined_schema, aliases=self.aliases)
            for column, sql in self._assignments(mapping).items()
        }

    def bind_insert(self, mapping: ColumnMap) -> dict[str, BoundExpression]:
        return {
            column: parse_expression(sql).bind(self.source_only, aliases=(self.s,))
            for column, sql in self._assignments(mapping).items()
        }

    def _assignments(self, mapping: ColumnMap) -> dict[str, str]:
        """Target column -> SQL text; ``"*"`` takes every target column from the source by name."""
        if mapping == "*":
            out: dict[str, str] = {}
            missing = []
            for name in self.target_schema.names:
                hits = [n for n in self.source_schema.names if n.lower() == name.lower()]
                exact = [n for n in hits if n == name]
                if not hits:
                    missing.append(name)
                    continue
                out[name] = f"{_quote(self.s)}.{_quote((exact or hits)[0])}"
            if missing:
                raise SchemaMismatchError(
                    f"source lacks target columns {missing} needed by '*'", table=self.table, columns=missing
                )
            return out
        if isinstance(mapping, str):
            raise ValueError(f"a column map must be a mapping or '*', got {mapping!r}")
        out = {}
        for key, sql in mapping.items():
            out[_resolve_target_column(self.target_schema, key, self.t, self.table)] = sql
        return out


def _join_pairs(plan: _MergePlan, target: pa.Table, source: pa.Table) -> tuple[pa.Array, pa.Array]:
    """(target row, source row) index pairs satisfying the ON condition, sorted by target then source row."""
    n, m = target.num_rows, source.num_rows
    if plan.keys:
        t_ctx, s_ctx = _context([(plan.t, target)]), _context([(plan.s, source)])
        left: dict[str, pa.Array] = {}
        right: dict[str, pa.Array] = {}
        for i, (t_key, s_key, key_type) in enumerate(plan.keys):
            left[f"k{i}"] = pc.cast(t_key.evaluate(t_ctx), key_type)
            right[f"k{i}"] = pc.cast(s_key.evaluate(s_ctx), key_type)
        left["__t"] = pa.array(range(n), pa.int64())
        right["__s"] = pa.array(range(m), pa.int64())
        try:
            joined = pa.table(left).join(pa.table(right), keys=[f"k{i}" for i in range(len(plan.keys))])
        except _CAST_ERRORS as exc:
            raise PredicateError(f"cannot join on these key types: {exc}") from exc
        joined = joined.filter(pc.and_(pc.is_valid(joined["__t"]), pc.is_valid(joined["__s"])))
        t_idx, s_idx = joined["__t"].combine_chunks(), joined["__s"].combine_chunks()
    else:
        # No equality between the sides: a nested-loop join (fine for the small sources merges use).
        t_idx = pa.array([i for i in range(n) for _ in range(m)], pa.int64())
        s_idx = pa.array([j for _ in range(n) for j in range(m)], pa.int64())
    if plan.residual is not None and len(t_idx):
        ctx = _context([(plan.t, target.take(t_idx)), (plan.s, source.take(s_idx))])
        keep = plan.residual.matches(ctx)
        t_idx, s_idx = t_idx.filter(keep), s_idx.filter(keep)
    order = pc.sort_indices(pa.table({"t": t_idx, "s": s_idx}), sort_keys=[("t", "ascending"), ("s", "ascending")])
    return t_idx.take(order), s_idx.take(order)


def _clauses(
    plan: _MergePlan, matched_update: ColumnMap | None, matched_delete: bool | str | None, update_condition: str | None
) -> list[_Clause]:
    """Matched clauses in evaluation order: conditional before unconditional, delete before update."""
    conditional: list[_Clause] = []
    unconditional: list[_Clause] = []
    if isinstance(matched_delete, str):
        conditional.append(_Clause("delete", plan.bind_condition(matched_delete)))
    elif matched_delete:
        unconditional.append(_Clause("delete", None))
    if matched_update is not None:
        clause = _Clause("update", plan.bind_condition(update_condition))
        (conditional if clause.condition is not None else unconditional).append(clause)
    elif update_condition is not None:
        raise ValueError("matched_update_condition needs matched_update")
    if len(unconditional) > 1:
        raise ValueError("only one matched clause may be unconditional (give the delete or the update a condition)")
    return conditional + unconditional


def _mask_of(indices: pa.Array, n: int) -> pa.BooleanArray:
    return pc.is_in(pa.array(range(n), pa.int64()), value_set=indices)


def merge_rows(
    target: pa.Table | Sequence[pa.Table],
    source: pa.Table,
    *,
    on: str,
    matched_update: ColumnMap | None = None,
    matched_delete: bool | str | None = None,
    not_matched_insert: ColumnMap | None = None,
    matched_update_condition: str | None = None,
    not_matched_insert_condition: str | None = None,
    target_alias: str = "t",
    source_alias: str = "s",
    table_name: str | None = None,
    schema: pa.Schema | None = None,
) -> MergeResult:
    """``MERGE INTO target AS t USING source AS s ON on WHEN MATCHED ... WHEN NOT MATCHED THEN INSERT ...``.

    ``target`` is one table or one table per data file; ``schema`` is the target schema (required when
    ``target`` is an empty list). ``on`` may be any condition: conjuncts ``t.a = s.b`` become hash-join keys,
    the rest is evaluated on the joined rows. Expressions refer to ``t.col``/``s.col`` (unqualified names
    resolve when unambiguous); insert expressions see only the source. ``"*"`` maps every target column to
    the source column of the same name.
    """
    parts = [target] if isinstance(target, pa.Table) else list(target)
    if schema is None:
        if not parts:
            raise ValueError("schema= is required when the target has no files")
        schema = parts[0].schema
    if not isinstance(source, pa.Table):
        raise TypeError(f"source must be a pyarrow.Table, got {type(source).__name__}")
    if matched_update is None and not matched_delete and not_matched_insert is None:
        raise ValueError("merge needs at least one clause")
    parts = [p if p.schema == schema else p.select(schema.names).cast(schema) for p in parts]
    all_rows = pa.concat_tables(parts) if parts else schema.empty_table()
    n = all_rows.num_rows

    plan = _MergePlan(
        schema, source.schema, on=on, target_alias=target_alias, source_alias=source_alias, table=table_name
    )
    clauses = _clauses(plan, matched_update, matched_delete, matched_update_condition)
    updates = plan.bind_update(matched_update) if matched_update is not None else {}
    inserts = plan.bind_insert(not_matched_insert) if not_matched_insert is not None else {}
    insert_condition = (
        parse_predicate(not_matched_insert_condition).bind(plan.source_only, aliases=(source_alias,))
        if not_matched_insert_condition is not None
        else None
    )

    t_idx, s_idx = _join_pairs(plan, all_rows, source)
    matched_source = s_idx

    deleted_idx = pa.array([], pa.int64())
    updated_idx = pa.array([], pa.int64())
    new_values: dict[str, pa.Array] = {}
    if clauses and len(t_idx):
        only_delete = len(clauses) == 1 and clauses[0].kind == "delete" and clauses[0].condition is None
        counts = pc.value_counts(t_idx)
        ambiguous = _count_true(pc.greater(counts.field("counts"), 1))
        if ambiguous and not only_delete:
            raise MergeCardinalityError(
                f"{ambiguous} target rows of {table_name or 'the target'} match more than one source row",
                table=table_name,
                rows=ambiguous,
            )
        if ambiguous:
            t_idx = counts.field("values").sort()
            s_idx = pa.array([], pa.int64())
            deleted_idx = t_idx
        else:
            ctx = _context([(target_alias, all_rows.take(t_idx)), (source_alias, source.take(s_idx))])
            remaining = pa.repeat(pa.scalar(True), len(t_idx))
            for clause in clauses:
                hit = remaining if clause.condition is None else pc.and_(remaining, clause.condition.matches(ctx))
                remaining = pc.and_(remaining, pc.invert(hit))
                if clause.kind == "delete":
                    deleted_idx = t_idx.filter(hit)
                else:
                    updated_idx = t_idx.filter(hit)
                    rows = ctx.filter(hit)
                    for column, expr in updates.items():
                        new_values[column] = conform_column(expr.evaluate(rows), schema.field(column), table=table_name)

    deleted = _mask_of(deleted_idx, n)
    updated = _mask_of(updated_idx, n)
    touched = pc.or_(deleted, updated)
    matched = _mask_of(t_idx, n)

    result_rows = all_rows
    if len(updated_idx):
        columns = []
        for f in schema:
            column = all_rows.column(f.name).combine_chunks()
            if f.name in new_values:
                column = replace_masked(column, updated, new_values[f.name])
            columns.append(column)
        result_rows = pa.Table.from_arrays(columns, schema=schema)

    files: list[pa.Table | None] = []
    offset = 0
    for part in parts:
        size = part.num_rows
        if size and pc.any(touched.slice(offset, size)).as_py():
            files.append(result_rows.slice(offset, size).filter(pc.invert(deleted.slice(offset, size))))
        else:
            files.append(None)
        offset += size

    inserted = schema.empty_table()
    if not_matched_insert is not None and source.num_rows:
        unmatched = pc.invert(_mask_of(matched_source, source.num_rows))
        candidates = _context([(source_alias, source.filter(unmatched))])
        if insert_condition is not None:
            candidates = candidates.filter(insert_condition.matches(candidates))
        columns = []
        for f in schema:
            insert_expr = inserts.get(f.name)
            values = (
                insert_expr.evaluate(candidates) if insert_expr is not None else pa.nulls(candidates.num_rows, f.type)
            )
            columns.append(conform_column(values, f, table=table_name))
        inserted = pa.Table.from_arrays(columns, schema=schema)

    return MergeResult(
        files=tuple(files),
        inserted=inserted,
        num_updated=len(updated_idx),
        num_deleted=len(deleted_idx),
        num_inserted=inserted.num_rows,
        touched=touched,
        matched=matched,
        originals=tuple(parts),
    )
