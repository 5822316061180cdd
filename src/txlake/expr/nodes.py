"""The bound (typed, resolved) form of a SQL expression: what Arrow evaluation and statistics pruning walk.

A sqlglot tree is bound once against a schema; every node then carries its Arrow result type and every
column reference the schema's spelling of the column, so the two consumers never resolve names or types.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa

CompareOp = Literal["=", "!=", "<", "<=", ">", ">=", "<=>"]
ArithOp = Literal["+", "-", "*", "/", "%", "div"]
LikeMode = Literal["like", "ilike", "rlike"]
CastMode = Literal["widen", "try", "strict"]
"""``strict``: a CAST that Spark (ANSI) fails on a value it cannot convert; evaluated as ``try`` (NULL) here."""

FLIPPED: dict[CompareOp, CompareOp] = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<=", "<=>": "<=>"}


@dataclass(frozen=True, eq=False, kw_only=True)
class Node:
    """A bound expression node; ``type`` is the Arrow type of its value."""

    type: pa.DataType

    def children(self) -> tuple[Node, ...]:
        return ()


@dataclass(frozen=True, eq=False, kw_only=True)
class ColumnRef(Node):
    """A top-level column (schema spelling) and, for struct children, the path below it."""

    name: str
    path: tuple[str, ...] = ()


@dataclass(frozen=True, eq=False, kw_only=True)
class Const(Node):
    """A literal already converted to ``type`` (``None`` is SQL NULL)."""

    value: Any


@dataclass(frozen=True, eq=False, kw_only=True)
class Cast(Node):
    """``widen``: implicit, lossless promotion; ``try``: a user CAST where invalid values become NULL."""

    arg: Node
    mode: CastMode

    def children(self) -> tuple[Node, ...]:
        return (self.arg,)


@dataclass(frozen=True, eq=False, kw_only=True)
class Compare(Node):
    op: CompareOp
    left: Node
    right: Node

    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)


@dataclass(frozen=True, eq=False, kw_only=True)
class And(Node):
    args: tuple[Node, ...]

    def children(self) -> tuple[Node, ...]:
        return self.args


@dataclass(frozen=True, eq=False, kw_only=True)
class Or(Node):
    args: tuple[Node, ...]

    def children(self) -> tuple[Node, ...]:
        return self.args


@dataclass(frozen=True, eq=False, kw_only=True)
class Not(Node):
    arg: Node

    def children(self) -> tuple[Node, ...]:
        return (self.arg,)


@dataclass(frozen=True, eq=False, kw_only=True)
class IsNull(Node):
    arg: Node

    def children(self) -> tuple[Node, ...]:
        return (self.arg,)


@dataclass(frozen=True, eq=False, kw_only=True)
class InList(Node):
    arg: Node
    values: tuple[Node, ...]

    def children(self) -> tuple[Node, ...]:
        return (self.arg, *self.values)


@dataclass(frozen=True, eq=False, kw_only=True)
class Like(Node):
    """``LIKE``/``ILIKE`` with a literal pattern (backslash escapes), or ``RLIKE`` with a regex."""

    arg: Node
    pattern: str
    mode: LikeMode

    def children(self) -> tuple[Node, ...]:
        return (self.arg,)


@dataclass(frozen=True, eq=False, kw_only=True)
class Arith(Node):
    op: ArithOp
    left: Node
    right: Node

    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)


@dataclass(frozen=True, eq=False, kw_only=True)
class Negate(Node):
    arg: Node

    def children(self) -> tuple[Node, ...]:
        return (self.arg,)


@dataclass(frozen=True, eq=False, kw_only=True)
class Case(Node):
    """``CASE WHEN c1 THEN v1 ... ELSE d END``; ``IF(c, a, b)`` binds to this too."""

    whens: tuple[tuple[Node, Node], ...]
    default: Node | None

    def children(self) -> tuple[Node, ...]:
        flat: list[Node] = []
        for cond, value in self.whens:
            flat.extend((cond, value))
        if self.default is not None:
            flat.append(self.default)
        return tuple(flat)


@dataclass(frozen=True, eq=False, kw_only=True)
class Call(Node):
    """A scalar function; ``params`` holds its constant arguments (substring positions, round digits)."""

    name: str
    args: tuple[Node, ...]
    params: tuple[Any, ...] = ()

    def children(self) -> tuple[Node, ...]:
        return self.args


def walk(node: Node) -> list[Node]:
    """All nodes below and including ``node``, parents first."""
    out = [node]
    for child in node.children():
        out.extend(walk(child))
    return out
