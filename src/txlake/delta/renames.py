"""Renaming and dropping columns, top-level or inside structs, on tables that map columns (metadata only).

A column is named by a path as in Spark SQL: ``s.a`` is field ``a`` of struct column ``s``; a name holding a dot
(or a backtick) is quoted in backticks, a backtick inside doubled: ```a.b`.c`` is field ``c`` of column ``a.b``.
Names match case-insensitively. A new name is one field name, taken as written (no quoting): ``{"s.a": "b"}``
renames ``s.a`` to ``s.b``. With column mapping the data files keep every field under its physical name, so only
the schema changes (PROTOCOL.md "Column Mapping"); stats stay keyed by physical names and keep pruning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from txlake.delta.colmap import mapping_mode
from txlake.errors import InvalidArgumentError, InvalidArgumentTypeError, SchemaMismatchError, UnsupportedFeatureError

ColumnPath = tuple[str, ...]


def parse_column_path(text: str) -> ColumnPath:
    """``"s.a"`` -> ``("s", "a")``; backticks quote a part (```a.b`.c`` -> ``("a.b", "c")``).

    Raises:
        ValueError: an empty part or an unclosed backtick.
    """
    parts: list[str] = []
    i, n = 0, len(text)
    while True:
        if i < n and text[i] == "`":
            part, i = [], i + 1
            while True:
                if i >= n:
                    raise ValueError(f"unclosed backtick in column path {text!r}")
                if text[i] == "`":
                    if i + 1 < n and text[i + 1] == "`":
                        part.append("`")
                        i += 2
                        continue
                    i += 1
                    break
                part.append(text[i])
                i += 1
            name = "".join(part)
            if i < n and text[i] != ".":
                raise ValueError(f"a quoted name must end at a dot in column path {text!r}")
        else:
            end = text.find(".", i)
            end = n if end < 0 else end
            name = text[i:end]
            if "`" in name:
                raise ValueError(f"a backtick inside an unquoted name in column path {text!r}")
            i = end
        if not name:
            raise ValueError(f"empty name in column path {text!r}")
        parts.append(name)
        if i >= n:
            return tuple(parts)
        i += 1  # the dot
        if i >= n:
            raise ValueError(f"column path {text!r} ends with a dot")


def format_column_path(path: ColumnPath) -> str:
    """A path as :func:`parse_column_path` reads it (parts holding a dot or backtick quoted)."""
    return ".".join(f"`{p.replace('`', '``')}`" if ("." in p or "`" in p) else p for p in path)


def _struct_fields(dtype: pa.DataType) -> list[pa.Field] | None:
    return [dtype.field(i) for i in range(dtype.num_fields)] if pa.types.is_struct(dtype) else None


def _resolve(table: str, schema: pa.Schema, given: object, argument: str) -> ColumnPath:
    """The path (in the schema's own spelling) that ``given`` names, or a typed error."""
    if not isinstance(given, str):
        raise InvalidArgumentTypeError(f"{argument} names columns by strings, got {given!r}", argument=argument)
    try:
        wanted = parse_column_path(given)
    except ValueError as exc:
        raise InvalidArgumentError(f"{argument}: {exc}", argument=argument) from exc
    fields: list[pa.Field] | None = list(schema)
    found: list[str] = []
    for depth, part in enumerate(wanted):
        if fields is None:
            parent = format_column_path(tuple(found))
            raise SchemaMismatchError(
                f"{table}.{parent} is not a struct: it has no field {part!r} ({argument}; fields inside arrays and "
                "maps cannot be renamed or dropped)",
                table=table,
                columns=[given],
            )
        hits = [f for f in fields if f.name == part] or [f for f in fields if f.name.lower() == part.lower()]
        if len(hits) != 1:
            where = f"column {part!r}" if depth == 0 else f"field {part!r} in {format_column_path(tuple(found))}"
            names = ", ".join(f.name for f in fields)
            raise SchemaMismatchError(
                f"{table} has no {where} ({argument}; there: {names})", table=table, columns=[given]
            )
        found.append(hits[0].name)
        fields = _struct_fields(hits[0].type)
    return tuple(found)


def renamed_and_dropped(
    table: str,
    schema: pa.Schema,
    partition_columns: Sequence[str],
    configuration: Mapping[str, str],
    rename: Mapping[str, Any],
    drop: Sequence[str],
) -> tuple[pa.Schema, list[str], dict[str, str]]:
    """The schema, partition columns and configuration after renaming and dropping columns and struct fields
    (metadata only); ``delta.dataSkippingStatsColumns`` follows the renames and loses the dropped columns, as
    Spark rewrites it.

    Raises:
        UnsupportedFeatureError: the table does not map columns (``feature="columnMapping"``).
        SchemaMismatchError: a path names no column or field; a rename gives two fields of a struct one name.
        InvalidArgumentError: a partition column dropped, a path both renamed and dropped (or inside a dropped
            one), every column or every field of a struct dropped, every column outside the partition columns
            dropped, a malformed path.
        InvalidArgumentTypeError: names that are not strings.
    """
    if mapping_mode(configuration) == "none":
        raise UnsupportedFeatureError(
            f"renaming or dropping columns of {table} needs column mapping, which it does not use: create the table "
            "with properties={'delta.columnMapping.mode': 'name'}",
            table=table,
            feature="columnMapping",
        )
    renames: dict[ColumnPath, str] = {}
    for old, new in rename.items():
        if not isinstance(new, str) or not new:
            raise InvalidArgumentTypeError(
                f"rename_columns maps column paths to new names, got {old!r}: {new!r}", argument="rename_columns"
            )
        renames[_resolve(table, schema, old, "rename_columns")] = new
    dropped = {_resolve(table, schema, c, "drop_columns") for c in drop}
    both = sorted(format_column_path(p) for p in renames if p in dropped)
    if both:
        raise InvalidArgumentError(
            f"{table}: {', '.join(both)} is both renamed and dropped: give it in one of rename_columns and "
            "drop_columns",
            argument="drop_columns",
        )
    inside = sorted(
        f"{format_column_path(p)} (in {format_column_path(d)})"
        for p in [*renames, *dropped]
        for d in dropped
        if len(p) > len(d) and p[: len(d)] == d
    )
    if inside:
        raise InvalidArgumentError(
            f"{table}: {', '.join(inside)} is a field of a column dropped in the same call: drop the column alone, "
            "or rename or drop the field without dropping its column",
            argument="drop_columns",
        )
    parts = sorted(p[0] for p in dropped if len(p) == 1 and p[0] in partition_columns)
    if parts:
        raise InvalidArgumentError(
            f"{', '.join(parts)} partition the table {table}: a partition column cannot be dropped",
            argument="drop_columns",
        )
    fields = _apply(table, list(schema), (), renames, dropped)
    if not fields:
        raise InvalidArgumentError(f"{table} needs at least one column", argument="drop_columns")
    if all(f.name in partition_columns for f in fields):  # Spark refuses it too: a file of no columns holds no rows
        raise InvalidArgumentError(
            f"{table} needs at least one column outside its partition columns", argument="drop_columns"
        )
    new_partitions = [renames.get((c,), c) for c in partition_columns]
    new_configuration = dict(configuration)
    if STATS_COLUMNS in new_configuration:
        new_configuration[STATS_COLUMNS] = _stats_columns(new_configuration[STATS_COLUMNS], renames, dropped)
    return pa.schema(fields, metadata=schema.metadata), new_partitions, new_configuration


STATS_COLUMNS = "delta.dataSkippingStatsColumns"


def _stats_columns(value: str, renames: Mapping[ColumnPath, str], dropped: set[ColumnPath]) -> str:
    """``delta.dataSkippingStatsColumns`` (comma-separated column paths) with ``renames`` applied to every
    entry and the entries inside a ``dropped`` column left out; names compare case-insensitively, as Spark's."""

    def lower(path: Sequence[str]) -> tuple[str, ...]:
        return tuple(p.lower() for p in path)

    renamed = {lower(k): v for k, v in renames.items()}
    gone = {lower(d) for d in dropped}
    out = []
    for entry in (e.strip() for e in value.split(",")):
        if not entry:
            continue
        try:
            path = parse_column_path(entry)
        except ValueError:
            out.append(entry)  # not ours to fix
            continue
        if any(lower(path[:i]) in gone for i in range(1, len(path) + 1)):
            continue
        new = [renamed.get(lower(path[: i + 1]), part) for i, part in enumerate(path)]
        out.append(format_column_path(tuple(new)) if new != list(path) else entry)
    return ",".join(out)


def _apply(
    table: str,
    fields: list[pa.Field],
    prefix: ColumnPath,
    renames: Mapping[ColumnPath, str],
    dropped: set[ColumnPath],
) -> list[pa.Field]:
    """``fields`` (the level at ``prefix``) with the renames and drops below it applied, the new names checked."""
    out: list[pa.Field] = []
    for f in fields:
        path = (*prefix, f.name)
        if path in dropped:
            continue
        children = _struct_fields(f.type)
        if children is not None and any(len(p) > len(path) and p[: len(path)] == path for p in (*renames, *dropped)):
            kept = _apply(table, children, path, renames, dropped)
            if not kept:
                raise InvalidArgumentError(
                    f"{table}.{format_column_path(path)} needs at least one field: drop the struct instead",
                    argument="drop_columns",
                )
            f = f.with_type(pa.struct(kept))
        out.append(f.with_name(renames.get(path, f.name)))
    names = [f.name.lower() for f in out]
    twice = sorted({f.name for f in out if names.count(f.name.lower()) > 1})
    if twice:
        where = f"struct {format_column_path(prefix)} of {table}" if prefix else table
        columns = [format_column_path((*prefix, n)) for n in twice]
        raise SchemaMismatchError(f"{where} would have {', '.join(twice)} twice", table=table, columns=columns)
    return out
