"""Spark SQL predicates and expressions: one sqlglot parse, bound to a schema, used for Arrow evaluation,
statistics pruning and conflict checks (DESIGN §4, §9)."""

from txlake.expr.predicate import (
    TRUE,
    BoundExpression,
    BoundPredicate,
    Expression,
    Predicate,
    parse_expression,
    parse_predicate,
    split_conjuncts,
)
from txlake.expr.stats import ColumnStats, FileStats, Truth
from txlake.expr.types import SESSION_TIME_ZONE, common_type

__all__ = [
    "SESSION_TIME_ZONE",
    "TRUE",
    "BoundExpression",
    "BoundPredicate",
    "ColumnStats",
    "Expression",
    "FileStats",
    "Predicate",
    "Truth",
    "common_type",
    "parse_expression",
    "parse_predicate",
    "split_conjuncts",
]
