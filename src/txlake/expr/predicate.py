"""Spark SQL predicates and expressions: parsed once with sqlglot, bound to a schema, evaluated or pruned."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from txlake.errors import InvalidArgumentTypeError, PredicateError
from txlake.expr.binder import Binder, SchemaScope, SqlNode, column_parts, referenced_columns, validate
from txlake.expr.evaluate import ARROW_ERRORS, broadcast, evaluate
from txlake.expr.nodes import ColumnRef, Node, walk
from txlake.expr.stats import FileStats, may_match
from txlake.expr.syntax import caret_lines, describe_syntax_error
from txlake.typenames import spark_type_name

DIALECT = "spark"


def _parse(sql: str) -> SqlNode:
    if not isinstance(sql, str):
        raise InvalidArgumentTypeError(f"expected a SQL string, got {type(sql).__name__}: {sql!r}")
    if not sql.strip():
        raise PredicateError("empty expression", expression=sql)
    return _parse_text(sql)


@functools.lru_cache(maxsize=4096)
def _parse_text(sql: str) -> SqlNode:
    """The tree of ``sql`` (remembered: trees are never mutated, and statements repeat conditions)."""
    try:
        tree = sqlglot.parse_one(sql, read=DIALECT)
    except SqlglotError as exc:
        problem = describe_syntax_error(sql, exc)
        message = f"cannot parse {sql!r}: {problem.reason}\n{caret_lines(sql, problem.position)}"
        raise PredicateError(message, expression=sql) from exc
    if tree is None:
        raise PredicateError(f"cannot parse {sql!r}", expression=sql)
    validate(tree, sql)
    return tree


def parse_expression(sql: str) -> Expression:
    """Parse a Spark SQL scalar expression (``balance - 50``); raises :class:`PredicateError`."""
    return Expression(sql=sql, tree=_parse(sql))


def parse_predicate(sql: str) -> Predicate:
    """Parse a Spark SQL boolean condition (``id = 1 AND ts < '2020-01-01'``); raises :class:`PredicateError`."""
    return Predicate(sql=sql, tree=_parse(sql))


def _unwrap(tree: SqlNode) -> SqlNode:
    while isinstance(tree, exp.Paren):
        tree = tree.this
    return tree


@dataclass(frozen=True)
class Expression:
    """A parsed SQL expression: the original text and its sqlglot tree (never mutated)."""

    sql: str
    tree: SqlNode = field(compare=False, repr=False)

    def __str__(self) -> str:
        return self.sql

    def __reduce__(self) -> tuple[Any, ...]:
        return (parse_expression, (self.sql,))

    @property
    def columns(self) -> frozenset[str]:
        """Lower-cased dotted names of the columns referenced, as written (``t.id``, ``s.a``)."""
        return referenced_columns(self.tree)

    def bind(self, schema: pa.Schema, *, aliases: Sequence[str] = ()) -> BoundExpression:
        """Resolve columns (case-insensitively) and types against ``schema``.

        ``aliases`` names struct columns of ``schema`` whose fields may be referenced without the alias.
        Raises :class:`PredicateError` for unknown or ambiguous columns and type errors.
        """
        node = Binder(SchemaScope(schema, aliases), self.sql).bind(self.tree)
        return BoundExpression(expression=self, schema=schema, aliases=tuple(aliases), node=node)


@dataclass(frozen=True)
class Predicate(Expression):
    """A parsed SQL condition."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (parse_predicate, (self.sql,))

    def bind(self, schema: pa.Schema, *, aliases: Sequence[str] = ()) -> BoundPredicate:
        binder = Binder(SchemaScope(schema, aliases), self.sql)
        node = binder.bind(self.tree)
        if not pa.types.is_boolean(node.type):
            if not pa.types.is_null(node.type):
                raise PredicateError(
                    f"{self.sql!r} is not a boolean condition ({spark_type_name(node.type)})", expression=self.sql
                )
            node = binder.coerce(node, pa.bool_())
        return BoundPredicate(expression=self, schema=schema, aliases=tuple(aliases), node=node)

    @property
    def is_true(self) -> bool:
        """Whether this is the literal ``TRUE`` (matches everything)."""
        tree = _unwrap(self.tree)
        return isinstance(tree, exp.Boolean) and bool(tree.this)

    @classmethod
    def conjunction(cls, *predicates: Predicate | str) -> Predicate:
        """``p1 AND p2 AND ...``; literal ``TRUE`` operands are dropped, no operands give :data:`TRUE`."""
        parts = [p if isinstance(p, Predicate) else parse_predicate(p) for p in predicates]
        parts = [p for p in parts if not p.is_true]
        if not parts:
            return TRUE
        if len(parts) == 1:
            return parts[0]
        sql = " AND ".join(f"({p.sql})" for p in parts)
        tree = exp.and_(*(exp.Paren(this=p.tree.copy()) for p in parts), copy=False)
        return Predicate(sql=sql, tree=tree)

    def conjuncts(self) -> tuple[Predicate, ...]:
        return split_conjuncts(self)

    def equalities(self) -> tuple[tuple[str, str], ...]:
        """Top-level ``col = col`` conjuncts as pairs of column references in Spark SQL (``("t.id", "s.id")``).

        Each side is quoted where needed, so it parses back with :func:`parse_expression`.
        """
        pairs: list[tuple[str, str]] = []
        for part in _conjunct_trees(self.tree):
            if isinstance(part, exp.EQ):
                left, right = _unwrap(part.this), _unwrap(part.expression)
                if column_parts(left) is not None and column_parts(right) is not None:
                    pairs.append((left.sql(dialect=DIALECT), right.sql(dialect=DIALECT)))
        return tuple(pairs)


def _conjunct_trees(tree: SqlNode) -> list[SqlNode]:
    tree = _unwrap(tree)
    if isinstance(tree, exp.And):
        return _conjunct_trees(tree.this) + _conjunct_trees(tree.expression)
    return [tree]


def split_conjuncts(predicate: Predicate | str) -> tuple[Predicate, ...]:
    """The top-level ``AND`` operands of a predicate (itself if it is not a conjunction)."""
    pred = predicate if isinstance(predicate, Predicate) else parse_predicate(predicate)
    parts = _conjunct_trees(pred.tree)
    if len(parts) == 1:
        return (pred,)
    return tuple(Predicate(sql=p.sql(dialect=DIALECT), tree=p.copy()) for p in parts)


TRUE = parse_predicate("TRUE")


@dataclass(frozen=True, eq=False)
class BoundExpression:
    """An expression resolved and typed against a schema; evaluates on Arrow tables of that schema."""

    expression: Expression
    schema: pa.Schema
    aliases: tuple[str, ...]
    node: Node = field(repr=False)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebind, (type(self.expression), self.expression.sql, self.schema, self.aliases))

    @property
    def sql(self) -> str:
        return self.expression.sql

    @property
    def type(self) -> pa.DataType:
        """The Arrow type of the expression's value."""
        return self.node.type

    @property
    def columns(self) -> frozenset[str]:
        """Top-level columns of the schema the expression reads (schema spelling)."""
        return frozenset(n.name for n in walk(self.node) if isinstance(n, ColumnRef))

    def _datum(self, table: pa.Table) -> Any:
        try:
            return evaluate(self.node, table)
        except ARROW_ERRORS as exc:
            raise PredicateError(f"evaluating {self.sql!r} failed: {exc}", expression=self.sql) from exc
        except PredicateError as exc:
            raise PredicateError(f"evaluating {self.sql!r} failed: {exc}", expression=self.sql) from exc

    def evaluate(self, table: pa.Table) -> pa.Array:
        """The expression's value for every row of ``table`` (one array of ``self.type``)."""
        return broadcast(self._datum(table), table.num_rows)


@dataclass(frozen=True, eq=False)
class BoundPredicate(BoundExpression):
    """A condition bound to a schema: Arrow masks and filters, and statistics pruning."""

    @property
    def predicate(self) -> Predicate:
        assert isinstance(self.expression, Predicate)
        return self.expression

    def mask(self, table: pa.Table) -> pa.BooleanArray:
        """TRUE/FALSE/NULL per row (SQL three-valued logic)."""
        return self.evaluate(table)

    def matches(self, table: pa.Table) -> pa.BooleanArray:
        """TRUE where the condition holds; NULL counts as not holding."""
        return pc.fill_null(self.mask(table), False)

    def filter(self, table: pa.Table) -> pa.Table:
        """The rows of ``table`` for which the condition is TRUE."""
        return table.filter(self.matches(table))

    def may_match(self, stats: FileStats) -> bool:
        """``False`` only if no row of a file with these statistics can satisfy the condition (sound)."""
        return may_match(self.node, stats)


def _rebind(kind: type[Expression], sql: str, schema: pa.Schema, aliases: tuple[str, ...]) -> BoundExpression:
    parsed = parse_predicate(sql) if issubclass(kind, Predicate) else parse_expression(sql)
    return parsed.bind(schema, aliases=aliases)
