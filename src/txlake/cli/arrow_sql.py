"""``txlake sql`` without Spark: ``SELECT cols|* FROM one table [WHERE] [ORDER BY] [LIMIT]`` over Arrow.

Such a query needs no JVM: the table is read with ``LakehouseSnapshot.read_arrow`` (stats pruning, the same
Spark SQL predicate semantics as ``txlake show --where``), the select list and the sort keys are evaluated by
:mod:`txlake.expr`. Anything else (joins, aggregates, DISTINCT, functions txlake.expr does not evaluate)
raises :class:`NeedsSpark`, and ``--engine auto`` runs the query on Spark instead.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

import txlake
from txlake.errors import InvalidArgumentError, PredicateError
from txlake.expr import BoundExpression, BoundPredicate, parse_expression, parse_predicate
from txlake.expr.binder import SqlNode, construct_name
from txlake.expr.evaluate import ansi_violation, broadcast, evaluate
from txlake.expr.nodes import Arith, Cast, ColumnRef, walk
from txlake.expr.syntax import caret_lines, describe_syntax_error, empty_item

DIALECT = "spark"
_CLAUSES = frozenset({"expressions", "from_", "from", "where", "order", "limit"})
_CLAUSE_NAMES = {
    "group": "GROUP BY",
    "having": "HAVING",
    "distinct": "DISTINCT",
    "joins": "a JOIN",
    "with": "WITH",
    "with_": "WITH",
    "qualify": "QUALIFY",
    "windows": "WINDOW",
    "laterals": "LATERAL VIEW",
    "cluster": "CLUSTER BY",
    "distribute": "DISTRIBUTE BY",
    "sort": "SORT BY",
    "offset": "OFFSET",
    "hint": "a hint",
    "pivots": "PIVOT",
}
"""SELECT clauses the Arrow engine does not run, as SQL names them (sqlglot's argument names otherwise)."""
_NEEDS_SPARK = (exp.AggFunc, exp.Window, exp.Subquery, exp.Lambda, exp.Join, exp.Unnest, exp.Lateral, exp.Star)


class NeedsSpark(Exception):
    """The query is outside what the Arrow engine runs (``str(exc)`` says what); Spark can run it."""


@dataclass(frozen=True, slots=True)
class Output:
    """One column of the result: its name and the expression computing it from the table's rows."""

    name: str
    expression: BoundExpression


@dataclass(frozen=True, slots=True)
class SortKey:
    expression: BoundExpression
    descending: bool
    nulls_first: bool


@dataclass(frozen=True, slots=True)
class ArrowQuery:
    """A planned single-table query: every expression is already bound to the table's schema."""

    table: str
    where: BoundPredicate | None
    outputs: tuple[Output, ...]
    order: tuple[SortKey, ...]
    limit: int | None
    nan_sensitive: tuple[ColumnRef, ...] = ()
    """Floating-point columns that comparisons read: Spark orders NaN above every number (``NaN > 1`` is true,
    ``NaN = NaN`` too) where txlake.expr follows IEEE; rows with NaN there go to Spark."""


def _from_table(tree: exp.Select) -> exp.Table:
    source = tree.args.get("from_") or tree.args.get("from")
    table = source.this if isinstance(source, exp.From) else None
    if not isinstance(table, exp.Table) or not isinstance(table.this, exp.Identifier):
        raise NeedsSpark("it does not read one table")
    return table


def _strip_qualifiers(tree: SqlNode, qualifiers: set[str]) -> None:
    """``t.balance`` / ``bank.checking.balance`` -> ``balance`` where the qualifier names the one table read."""
    for column in list(tree.find_all(exp.Column)):
        parts = [p.name for p in column.parts]
        if len(parts) < 2:
            continue
        for size in (3, 2, 1):
            if len(parts) > size and ".".join(parts[:size]).lower() in qualifiers:
                rest = parts[size:]
                column.replace(exp.column(rest[-1], table=rest[0] if len(rest) == 2 else None, quoted=True))
                break


def _check_columns(tree: SqlNode, schema: pa.Schema, aliases: set[str], expression: str) -> None:
    """An unknown column is the user's mistake whatever engine runs the query: say so now, with suggestions."""
    names = {n.lower(): n for n in schema.names}
    for column in tree.find_all(exp.Column):
        if isinstance(column.this, exp.Star):
            continue
        first = column.parts[0].name.lower()
        if first in names or (len(column.parts) == 1 and first in aliases):
            continue
        written = ".".join(p.name for p in column.parts)
        close = difflib.get_close_matches(first, list(names) + sorted(aliases), n=3, cutoff=0.6)
        hint = (
            "; did you mean " + " or ".join(repr(names.get(c, c)) for c in close) + "?"
            if close
            else f" (columns: {', '.join(schema.names)})"
        )
        raise PredicateError(f"unknown column {written!r} in the query{hint}", expression=expression)


def _bind(node: SqlNode, schema: pa.Schema) -> BoundExpression:
    try:
        return parse_expression(node.sql(dialect=DIALECT)).bind(schema)
    except PredicateError as exc:
        raise NeedsSpark(str(exc).splitlines()[0]) from exc


def _output_name(node: SqlNode, bound: BoundExpression) -> str:
    if isinstance(node, exp.Alias):
        return node.alias
    if isinstance(bound.node, ColumnRef):
        return bound.node.path[-1] if bound.node.path else bound.node.name
    return node.sql(dialect=DIALECT)


def plan(tree: SqlNode, table: str, schema: pa.Schema, query: str) -> ArrowQuery:
    """Bind a parsed query over ``table`` (whose schema is ``schema``); :class:`NeedsSpark` if it is not simple."""
    if not isinstance(tree, exp.Select):
        raise NeedsSpark("it is not a plain SELECT")
    extra = sorted(k for k, v in tree.args.items() if v and k not in _CLAUSES)
    if extra:
        raise NeedsSpark(f"it uses {', '.join(_CLAUSE_NAMES.get(k, k.upper().replace('_', ' ')) for k in extra)}")
    tree = tree.copy()
    source = _from_table(tree)
    alias = source.alias_or_name.lower()
    qualifiers = {alias, source.name.lower(), ".".join(p.name for p in source.parts).lower()}
    _strip_qualifiers(tree, qualifiers)
    for node in tree.find_all(*_NEEDS_SPARK):
        if isinstance(node, exp.Star) and (node.parent is tree or isinstance(node.parent, exp.Column)):
            continue  # SELECT * / SELECT t.*
        raise NeedsSpark(f"it uses {construct_name(node)}")
    aliases = {e.alias.lower() for e in tree.expressions if isinstance(e, exp.Alias)}
    _check_columns(tree, schema, aliases, query)
    outputs: list[Output] = []
    for item in tree.expressions:
        if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star)):
            outputs += [Output(f.name, _bind(exp.column(f.name, quoted=True), schema)) for f in schema]
            continue
        bound = _bind(item.this if isinstance(item, exp.Alias) else item, schema)
        outputs.append(Output(_output_name(item, bound), bound))
    where_node = tree.args.get("where")
    where: BoundPredicate | None = None
    if isinstance(where_node, exp.Where):
        try:
            where = parse_predicate(where_node.this.sql(dialect=DIALECT)).bind(schema)
        except PredicateError as exc:
            raise NeedsSpark(str(exc).splitlines()[0]) from exc
    compared: list[BoundExpression] = [where] if where is not None else []
    compared += [o.expression for o in outputs if not isinstance(o.expression.node, ColumnRef)]
    nan_sensitive = {
        (ref.name, ref.path): ref
        for bound in compared
        for ref in walk(bound.node)
        if isinstance(ref, ColumnRef) and pa.types.is_floating(ref.type)
    }
    order: list[SortKey] = []
    order_node = tree.args.get("order")
    for ordered in order_node.expressions if isinstance(order_node, exp.Order) else []:
        key = ordered.this
        by_output = _output_key(key, outputs, schema)
        bound = by_output if by_output is not None else _bind(key, schema)
        descending = bool(ordered.args.get("desc"))
        nulls_first = ordered.args.get("nulls_first")
        order.append(SortKey(bound, descending, (not descending) if nulls_first is None else bool(nulls_first)))
    return ArrowQuery(table, where, tuple(outputs), tuple(order), _limit(tree), tuple(nan_sensitive.values()))


def _output_key(key: SqlNode, outputs: list[Output], schema: pa.Schema) -> BoundExpression | None:
    """An ORDER BY key naming a select-list column: an ordinal (``ORDER BY 2``) or an output alias."""
    if isinstance(key, exp.Literal) and not key.is_string and key.this.isdigit():
        position = int(key.this)
        if not 1 <= position <= len(outputs):
            raise PredicateError(f"ORDER BY position {position} is not in the select list (1..{len(outputs)})")
        return outputs[position - 1].expression
    if isinstance(key, exp.Column) and len(key.parts) == 1:
        name = key.name.lower()
        if name not in {n.lower() for n in schema.names}:
            for output in outputs:
                if output.name.lower() == name:
                    return output.expression
    return None


def _limit(tree: exp.Select) -> int | None:
    node = tree.args.get("limit")
    if node is None:
        return None
    value = node.args.get("expression")
    if not isinstance(value, exp.Literal) or value.is_string or not value.this.isdigit():
        raise NeedsSpark("its LIMIT is not a number")
    return int(value.this)


def parse_order_by(text: str, schema: pa.Schema, output: Sequence[str] | None = None) -> tuple[SortKey, ...]:
    """``--order-by "balance DESC, id"``: sort keys bound to ``schema``.

    A number is a position in ``output`` (the columns shown, default all), as in SQL: ``--order-by 1`` sorts by
    the first column. An empty text or an empty sort key (``"id,"``) is :class:`InvalidArgumentError`; a key
    that cannot be parsed or bound is :class:`PredicateError`.
    """
    if not text.strip():
        raise InvalidArgumentError(
            "--order-by is empty: give sort keys, e.g. 'balance DESC, id' (or leave the option out)",
            argument="order_by",
        )
    empty = empty_item(text)
    if empty is not None:
        comma, inside = empty
        what = "an empty argument at this comma" if inside else "an empty sort key at this comma (keys: 'a, b DESC')"
        raise InvalidArgumentError(f"--order-by has {what}\n{caret_lines(text, comma)}", argument="order_by")
    prefix = "SELECT * FROM t ORDER BY "
    try:
        tree = sqlglot.parse_one(prefix + text, read=DIALECT)
    except SqlglotError as exc:
        problem = describe_syntax_error(prefix + text, exc)
        where = caret_lines(text, problem.position - len(prefix))
        raise PredicateError(f"cannot parse --order-by {text!r}: {problem.reason}\n{where}", expression=text) from exc
    order = tree.args.get("order")
    extra = sorted(k for k, v in tree.args.items() if v and k not in {"expressions", "from_", "from", "order"})
    if not isinstance(tree, exp.Select) or not isinstance(order, exp.Order) or extra:
        raise PredicateError(
            f"--order-by takes sort keys separated by commas (e.g. 'balance DESC, id'), got {text!r}", expression=text
        )
    shown = list(output) if output is not None else schema.names
    keys: list[SortKey] = []
    for ordered in order.expressions:
        key = ordered.this
        if isinstance(key, exp.Literal) and not key.is_string and str(key.this).isdigit():
            position = int(key.this)
            if not 1 <= position <= len(shown):
                raise PredicateError(
                    f"--order-by position {position} is not a column of the output (1..{len(shown)}: "
                    f"{', '.join(shown)})",
                    expression=text,
                )
            key = exp.column(shown[position - 1], quoted=True)
        bound = parse_expression(key.sql(dialect=DIALECT)).bind(schema)
        descending = bool(ordered.args.get("desc"))
        nulls_first = ordered.args.get("nulls_first")
        keys.append(SortKey(bound, descending, (not descending) if nulls_first is None else bool(nulls_first)))
    return tuple(keys)


def sort_table(data: pa.Table, keys: tuple[SortKey, ...]) -> pa.Table:
    """``data`` in the order of ``keys`` (as ``ORDER BY`` sorts on Spark)."""
    return data.take(_sort_indices(data, keys)) if keys else data


def _sort_indices(data: pa.Table, keys: tuple[SortKey, ...]) -> pa.Array:
    """Row order of ``data`` by ``keys`` as Spark orders: NULLS FIRST/LAST per key, NaN above every number."""
    columns: dict[str, pa.Array] = {}
    sort_keys: list[tuple[str, str]] = []
    for i, key in enumerate(keys):
        values = key.expression.evaluate(data)
        direction = "descending" if key.descending else "ascending"
        columns[f"n{i}"] = pc.is_null(values)
        sort_keys.append((f"n{i}", "descending" if key.nulls_first else "ascending"))
        if pa.types.is_floating(values.type):
            columns[f"nan{i}"] = pc.fill_null(pc.is_nan(values), False)
            sort_keys.append((f"nan{i}", direction))
        columns[f"v{i}"] = values
        sort_keys.append((f"v{i}", direction))
    return pc.sort_indices(pa.table(columns), sort_keys=sort_keys)


@dataclass(frozen=True, slots=True)
class ArrowRows:
    rows: pa.Table
    matched: int


def _ansi_sensitive(bound: BoundExpression | None) -> bool:
    return bound is not None and any(
        (isinstance(n, Arith) and n.op in ("/", "%", "div")) or (isinstance(n, Cast) and n.mode == "strict")
        for n in walk(bound.node)
    )


def _check_ansi(bound: BoundExpression, data: pa.Table) -> None:
    """Spark runs queries in ANSI mode: where it would fail on these rows (and txlake.expr gives NULL), or where
    a guard Spark honours but eager evaluation does not may hide such a row, the query is Spark's to answer."""
    if _ansi_sensitive(bound):
        violation = ansi_violation(bound.node, data)
        if violation is not None:
            raise NeedsSpark(f"{bound.sql!r} meets {violation} on some row, which Spark's ANSI mode reports")


def run(snap: txlake.LakehouseSnapshot, query: ArrowQuery, *, limit: int | None) -> ArrowRows:
    """The query's rows (at most ``limit`` of them) and how many it returned in all."""
    if not query.nan_sensitive and not _ansi_sensitive(query.where):
        data = snap.read_arrow(query.table, where=query.where.sql if query.where is not None else None)
    else:  # no pruning by statistics either: they follow IEEE and skip rows Spark's ANSI checks would meet
        data = snap.read_arrow(query.table)
        for ref in query.nan_sensitive:
            values = broadcast(evaluate(ref, data), data.num_rows)
            if pc.any(pc.is_nan(values)).as_py():
                raise NeedsSpark(f"column {ref.name!r} holds NaN, which Spark compares differently")
        if query.where is not None:
            _check_ansi(query.where, data)
            data = query.where.filter(data)
    for key in query.order:
        _check_ansi(key.expression, data)
    data = sort_table(data, query.order)
    if query.limit is not None:
        data = data.slice(0, query.limit)
    for output in query.outputs:
        _check_ansi(output.expression, data)
    shown = data.slice(0, limit) if limit else data
    arrays = [o.expression.evaluate(shown) for o in query.outputs]
    rows = pa.Table.from_arrays(arrays, names=[o.name for o in query.outputs])
    return ArrowRows(rows, data.num_rows)
