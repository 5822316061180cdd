"""Binding a sqlglot (Spark dialect) tree to typed nodes: resolve columns, type literals, promote operands."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa
from sqlglot import exp

from txlake.errors import PredicateError
from txlake.expr.evaluate import ARROW_ERRORS, result_type
from txlake.expr.nodes import (
    And,
    Arith,
    ArithOp,
    Call,
    Case,
    Cast,
    ColumnRef,
    Compare,
    CompareOp,
    Const,
    InList,
    IsNull,
    Like,
    LikeMode,
    Negate,
    Node,
    Not,
    Or,
)
from txlake.expr.types import (
    arrow_type,
    coerce_string_literal,
    common_type,
    convert_value,
    family,
    is_numeric,
    is_string,
    literal_type,
    parse_number,
    represents_exactly,
)
from txlake.typenames import spark_type_name
from txlake.variant import has_variant, is_variant

N = TypeVar("N", bound=Node)

# The root class of sqlglot trees (``Expr`` since sqlglot 30, ``Expression`` before).
if TYPE_CHECKING:
    SqlNode = exp.Expr
else:
    SqlNode = getattr(exp, "Expr", exp.Expression)

# sqlglot node classes a txlake expression may contain (anything else is rejected when parsing).
SUPPORTED: dict[type[SqlNode], str] = {
    exp.Column: "column",
    exp.Dot: "field access",
    exp.Identifier: "identifier",
    exp.Literal: "literal",
    exp.Null: "NULL",
    exp.Boolean: "boolean literal",
    exp.Paren: "parentheses",
    exp.Neg: "unary minus",
    exp.Cast: "typed literal",
    exp.TryCast: "CAST",
    exp.DataType: "type",
    exp.DataTypeParam: "type parameter",
    exp.EQ: "=",
    exp.NEQ: "!=",
    exp.GT: ">",
    exp.GTE: ">=",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.NullSafeEQ: "<=>",
    exp.NullSafeNEQ: "IS DISTINCT FROM",
    exp.And: "AND",
    exp.Or: "OR",
    exp.Not: "NOT",
    exp.Is: "IS",
    exp.In: "IN",
    exp.Between: "BETWEEN",
    exp.Like: "LIKE",
    exp.ILike: "ILIKE",
    exp.RegexpLike: "RLIKE",
    exp.Add: "+",
    exp.Sub: "-",
    exp.Mul: "*",
    exp.Div: "/",
    exp.Mod: "%",
    exp.IntDiv: "DIV",
    exp.Coalesce: "COALESCE",
    exp.Case: "CASE",
    exp.If: "IF",
    exp.Upper: "UPPER",
    exp.Lower: "LOWER",
    exp.Length: "LENGTH",
    exp.Trim: "TRIM",
    exp.Concat: "CONCAT",
    exp.DPipe: "||",
    exp.Substring: "SUBSTRING",
    exp.Abs: "ABS",
    exp.Round: "ROUND",
    exp.Nullif: "NULLIF",
    exp.Greatest: "GREATEST",
    exp.Least: "LEAST",
}

_COMPARISONS: dict[type[SqlNode], CompareOp] = {
    exp.EQ: "=",
    exp.NEQ: "!=",
    exp.GT: ">",
    exp.GTE: ">=",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.NullSafeEQ: "<=>",
}

_ARITHMETIC: dict[type[SqlNode], ArithOp] = {
    exp.Add: "+",
    exp.Sub: "-",
    exp.Mul: "*",
    exp.Div: "/",
    exp.Mod: "%",
    exp.IntDiv: "div",
}


# What a user wrote, in SQL words, for the sqlglot classes txlake does not evaluate (never sqlglot's own names).
_CONSTRUCTS: dict[str, str] = {
    "Subquery": "a subquery",
    "Select": "a subquery (SELECT)",
    "Union": "a set operation (UNION)",
    "Intersect": "a set operation (INTERSECT)",
    "Except": "a set operation (EXCEPT)",
    "Exists": "EXISTS (subquery)",
    "Block": "several statements separated by ';'",
    "Command": "a command",
    "Placeholder": "a parameter placeholder (? or :name)",
    "Parameter": "a parameter",
    "SessionParameter": "a session variable",
    "Bracket": "indexing with [...]",
    "Interval": "an INTERVAL",
    "Window": "a window function (OVER ...)",
    "WindowSpec": "a window (OVER ...)",
    "Lambda": "a lambda (x -> ...)",
    "JSONExtract": "the -> operator",
    "Escape": "LIKE ... ESCAPE",
    "Tuple": "a tuple (a, b, ...)",
    "Star": "*",
    "Array": "an array",
    "Struct": "a struct",
    "Map": "a map",
    "Alias": "an alias (AS)",
    "Distinct": "DISTINCT",
    "Ordered": "a sort order (ASC/DESC)",
    "Var": "a keyword",
    "BitwiseNot": "~",
    "BitwiseLeftShift": "<<",
    "BitwiseRightShift": ">>",
    "Collate": "COLLATE",
    "Any": "ANY (...)",
    "All": "ALL (...)",
    "Anonymous": "a function",
}


def construct_name(node: SqlNode) -> str:
    """What ``node`` is, in the words of the SQL a user wrote (for "cannot use ... in ..." messages)."""
    if isinstance(node, exp.Anonymous):
        return f"function {str(node.this).upper()}()"
    if isinstance(node, exp.AggFunc):
        return f"the aggregate function {node.sql_name()}()"
    named = _CONSTRUCTS.get(type(node).__name__)
    if named is not None:
        return named
    if isinstance(node, exp.Func) and not isinstance(node, (exp.Binary, exp.Cast)):
        return f"function {node.sql_name()}()"
    text = node.sql(dialect="spark")
    return repr(text if len(text) <= 40 else text[:39] + "…") if text else "this part of the expression"


def unsupported_message(node: SqlNode, sql: str) -> str:
    """``cannot use a subquery in 'id IN (SELECT 1)'``: one line naming the construct as written."""
    return f"cannot use {construct_name(node)} in {sql!r}"


def validate(tree: SqlNode, sql: str) -> None:
    """Reject every node type txlake cannot evaluate, naming the construct."""
    for node in _walk(tree):
        if type(node) not in SUPPORTED:
            raise PredicateError(unsupported_message(node, sql), expression=sql)


def _walk(tree: SqlNode) -> Iterator[SqlNode]:
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for value in node.args.values():
            items = value if isinstance(value, list) else [value]
            stack.extend(item for item in items if isinstance(item, SqlNode))


def column_parts(node: SqlNode) -> tuple[str, ...] | None:
    """The dotted name parts of a column reference (``t.s.a`` -> ``("t", "s", "a")``), else ``None``."""
    if isinstance(node, exp.Column):
        parts = []
        for part in node.parts:
            if not isinstance(part, exp.Identifier):
                return None
            parts.append(str(part.this))
        return tuple(parts)
    if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Identifier):
        head = column_parts(node.this)
        return None if head is None else (*head, str(node.expression.this))
    return None


def referenced_columns(tree: SqlNode) -> frozenset[str]:
    """Lower-cased dotted names of every column reference (Spark resolves names case-insensitively)."""
    names: set[str] = set()
    inner: set[int] = set()
    for node in _walk(tree):
        if id(node) in inner:
            continue
        if isinstance(node, (exp.Column, exp.Dot)):
            parts = column_parts(node)
            if parts is None:
                continue
            names.add(".".join(parts).lower())
            inner.update(id(n) for n in _walk(node))
    return frozenset(names)


# ------------------------------------------------------------------------------------------- resolution


def _match(names: Sequence[str], wanted: str) -> list[int]:
    exact = [i for i, n in enumerate(names) if n == wanted]
    if exact:
        return exact
    return [i for i, n in enumerate(names) if n.lower() == wanted.lower()]


class SchemaScope:
    """Resolves dotted column names against a schema, case-insensitively.

    ``aliases`` names top-level struct columns whose children may also be referenced unqualified (a merge
    binds ``t.x``/``s.y`` against a table with one struct column per side); an unqualified name found under
    more than one alias is ambiguous.
    """

    def __init__(self, schema: pa.Schema, aliases: Sequence[str] = ()) -> None:
        self.schema = schema
        self.aliases = tuple(aliases)

    def resolve(self, parts: tuple[str, ...]) -> ColumnRef | str:
        """A column reference, or the reason it cannot be resolved."""
        names = list(self.schema.names)
        hits = _match(names, parts[0])
        if len(hits) > 1:
            return f"column {parts[0]!r} is ambiguous"
        if hits:
            return self._descend(self.schema.field(hits[0]), parts[1:])
        candidates: list[ColumnRef | str] = []
        for alias in self.aliases:
            alias_hits = _match(names, alias)
            if len(alias_hits) != 1:
                continue
            field = self.schema.field(alias_hits[0])
            if pa.types.is_struct(field.type) and _match([f.name for f in field.type], parts[0]):
                candidates.append(self._descend(field, parts))
        found = [c for c in candidates if isinstance(c, ColumnRef)]
        if len(found) > 1:
            return f"column {'.'.join(parts)!r} is ambiguous"
        if found:
            return found[0]
        return f"unknown column {'.'.join(parts)!r}"

    def suggestion(self, parts: tuple[str, ...]) -> str:
        """``"; did you mean 'x'?"`` for the column names close to an unknown one, else the columns there are."""
        names = list(self.schema.names)
        by_lower = {n.lower(): n for n in names}
        close = difflib.get_close_matches(parts[-1].lower(), list(by_lower), n=3, cutoff=0.6)
        if close:
            return "; did you mean " + " or ".join(repr(by_lower[c]) for c in close) + "?"
        shown = ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")
        return f" (columns: {shown})"

    def _descend(self, field: pa.Field, rest: tuple[str, ...]) -> ColumnRef | str:
        path: list[str] = []
        current = field.type
        for part in rest:
            if is_variant(current):
                break
            if not pa.types.is_struct(current):
                return f"column {field.name!r} has no field {part!r}"
            children = [f.name for f in current]
            hits = _match(children, part)
            if len(hits) != 1:
                return f"unknown field {part!r} in column {field.name!r}"
            child = current.field(hits[0])
            path.append(child.name)
            current = child.type
        if has_variant(current):
            where = ".".join([field.name, *path])
            return f"column {where!r} is or holds a variant, which txlake predicates cannot read"
        return ColumnRef(type=current, name=field.name, path=tuple(path))


# ---------------------------------------------------------------------------------------------- binding


class Binder:
    """Turns one sqlglot tree into typed nodes against a :class:`SchemaScope`."""

    def __init__(self, scope: SchemaScope, sql: str) -> None:
        self.scope = scope
        self.sql = sql
        self._handlers: dict[type[SqlNode], Callable[[Any], Node]] = {
            exp.Paren: lambda n: self.bind(n.this),
            exp.Column: self._column,
            exp.Dot: self._column,
            exp.Literal: self._literal,
            exp.Null: lambda n: Const(type=pa.null(), value=None),
            exp.Boolean: lambda n: Const(type=pa.bool_(), value=bool(n.this)),
            exp.Neg: self._negate,
            exp.Cast: self._cast,
            exp.TryCast: self._cast,
            exp.NullSafeNEQ: lambda n: self._not(self._compare("<=>", n.this, n.expression)),
            exp.And: lambda n: self._connective(n, And),
            exp.Or: lambda n: self._connective(n, Or),
            exp.Not: lambda n: self._not(self._boolean(self.bind(n.this), "NOT")),
            exp.Is: self._is,
            exp.In: self._in,
            exp.Between: self._between,
            exp.Like: lambda n: self._like(n, "like"),
            exp.ILike: lambda n: self._like(n, "ilike"),
            exp.RegexpLike: lambda n: self._like(n, "rlike"),
            exp.Coalesce: lambda n: self._call("coalesce", [n.this, *n.expressions], unify=True),
            exp.Case: self._case,
            exp.If: self._if,
            exp.Upper: lambda n: self._string_call("upper", [n.this]),
            exp.Lower: lambda n: self._string_call("lower", [n.this]),
            exp.Length: lambda n: self._string_call("length", [n.this]),
            exp.Trim: self._trim,
            exp.Concat: self._concat,
            exp.DPipe: lambda n: self._string_call("concat", [n.this, n.expression]),
            exp.Substring: self._substring,
            exp.Abs: lambda n: self._numeric_call("abs", n.this, ()),
            exp.Round: self._round,
            exp.Nullif: lambda n: self._call("nullif", [n.this, n.expression], unify=True),
            exp.Greatest: lambda n: self._call("greatest", [n.this, *n.expressions], unify=True),
            exp.Least: lambda n: self._call("least", [n.this, *n.expressions], unify=True),
        }
        for cls, op in _COMPARISONS.items():
            self._handlers[cls] = self._comparison_handler(op)
        for cls, aop in _ARITHMETIC.items():
            self._handlers[cls] = self._arithmetic_handler(aop)

    def _comparison_handler(self, op: CompareOp) -> Callable[[Any], Node]:
        def handle(node: Any) -> Node:
            return self._compare(op, node.this, node.expression)

        return handle

    def _arithmetic_handler(self, op: ArithOp) -> Callable[[Any], Node]:
        def handle(node: Any) -> Node:
            return self._arith(op, node.this, node.expression)

        return handle

    # ------------------------------------------------------------------------------------------ helpers

    def error(self, message: str) -> PredicateError:
        return PredicateError(f"{message} in {self.sql!r}", expression=self.sql)

    def unsupported(self, node: SqlNode) -> PredicateError:
        return PredicateError(unsupported_message(node, self.sql), expression=self.sql)

    def bind(self, node: SqlNode | None) -> Node:
        if node is None:
            raise self.error("incomplete expression")
        handler = self._handlers.get(type(node))
        if handler is None:
            raise self.unsupported(node)
        return handler(node)

    def typed(self, node: N) -> N:
        """``node`` with its result type, probed on empty arrays (raises if Arrow has no such kernel)."""
        try:
            return replace(node, type=result_type(node))
        except ARROW_ERRORS as exc:
            types = ", ".join(spark_type_name(c.type) for c in node.children())
            raise self.error(f"operation {_describe(node)} is not supported on ({types})") from exc

    def _boolean(self, node: Node, what: str) -> Node:
        if pa.types.is_boolean(node.type):
            return node
        if family(node.type) == "null":
            return self.coerce(node, pa.bool_())
        raise self.error(f"{what} needs a boolean operand, got {spark_type_name(node.type)}")

    def coerce(self, node: Node, target: pa.DataType) -> Node:
        """``node`` as type ``target``: constants are converted, other nodes widened by a cast."""
        if node.type == target:
            return node
        if isinstance(node, Const):
            try:
                return Const(type=target, value=convert_value(node.value, target))
            except (ValueError, ArithmeticError) as exc:
                raise self.error(f"literal {node.value!r} cannot be used as {spark_type_name(target)}") from exc
        return self.typed(Cast(type=target, arg=node, mode="widen"))

    def unify(self, nodes: Sequence[Node], what: str) -> list[Node]:
        """Promote operands to one type: columns decide, literals adapt when they fit exactly (as Spark)."""
        target: pa.DataType | None = None
        for node in nodes:
            if not isinstance(node, Const):
                target = node.type if target is None else self._common(target, node.type, what)
        values: list[Any] = []
        for node in nodes:
            value = node.value if isinstance(node, Const) else None
            if isinstance(node, Const) and value is not None and target is not None:
                if isinstance(value, str) and family(target) != "string":
                    try:
                        value = coerce_string_literal(value, target)
                    except (ValueError, ArithmeticError) as exc:
                        raise self.error(
                            f"literal {value!r} cannot be compared with {spark_type_name(target)}"
                        ) from exc
                if not represents_exactly(value, target):
                    target = self._common(target, literal_type(value), what)
            values.append(value)
        if target is None:
            for node in nodes:
                target = node.type if target is None else self._common(target, node.type, what)
        assert target is not None
        out: list[Node] = []
        for node, value in zip(nodes, values, strict=True):
            if isinstance(node, Const):
                node = Const(type=literal_type(value) if value is not None else node.type, value=value)
            out.append(self.coerce(node, target))
        return out

    def _common(self, a: pa.DataType, b: pa.DataType, what: str) -> pa.DataType:
        common = common_type(a, b)
        if common is None:
            raise self.error(f"{what} cannot mix {spark_type_name(a)} and {spark_type_name(b)}")
        return common

    # ---------------------------------------------------------------------------------------- handlers

    def _column(self, node: SqlNode) -> Node:
        parts = column_parts(node)
        if parts is None:
            raise self.unsupported(node)
        resolved = self.scope.resolve(parts)
        if isinstance(resolved, str):
            if resolved.startswith("unknown column"):
                raise PredicateError(f"{resolved} in {self.sql!r}{self.scope.suggestion(parts)}", expression=self.sql)
            raise self.error(resolved)
        return resolved

    def _literal(self, node: exp.Literal) -> Node:
        if node.is_string:
            return Const(type=pa.string(), value=str(node.this))
        try:
            value = parse_number(str(node.this))
            return Const(type=literal_type(value), value=value)
        except ValueError as exc:
            raise self.error(f"invalid number {node.this!r}") from exc

    def _negate(self, node: exp.Neg) -> Node:
        arg = self.bind(node.this)
        if isinstance(arg, Const) and (arg.value is None or is_numeric(arg.type)):
            if arg.value is None:
                return arg
            value = -arg.value
            return Const(type=literal_type(value), value=value)
        if not is_numeric(arg.type):
            raise self.error(f"unary minus needs a number, got {spark_type_name(arg.type)}")
        return self.typed(Negate(type=arg.type, arg=arg))

    def _cast(self, node: exp.Cast) -> Node:
        target = arrow_type(node.to)
        if target is None:
            raise self.error(f"unsupported type {node.to.sql(dialect='spark')}")
        # sqlglot's Spark dialect reads CAST as a TryCast (Spark's ANSI-off meaning); only TRY_CAST is `safe`
        strict = not (isinstance(node, exp.TryCast) and node.args.get("safe"))
        arg = self.bind(node.this)
        if isinstance(arg, Const):
            try:
                return Const(type=target, value=convert_value(arg.value, target))
            except (ValueError, ArithmeticError) as exc:
                if strict:
                    raise self.error(f"invalid {node.to.sql(dialect='spark')} literal {arg.value!r}") from exc
                return Const(type=target, value=None)
        if arg.type == target:
            return arg
        return self.typed(Cast(type=target, arg=arg, mode="strict" if strict else "try"))

    def _compare(self, op: CompareOp, left: SqlNode, right: SqlNode) -> Node:
        lhs, rhs = self.unify([self.bind(left), self.bind(right)], f"comparison {op}")
        return self.typed(Compare(type=pa.bool_(), op=op, left=lhs, right=rhs))

    def _not(self, arg: Node) -> Node:
        return Not(type=pa.bool_(), arg=self._boolean(arg, "NOT"))

    def _connective(self, node: SqlNode, cls: type[And] | type[Or]) -> Node:
        operands: list[Node] = []
        for part in _flatten(node, type(node)):
            bound = self._boolean(self.bind(part), cls.__name__.upper())
            if isinstance(bound, cls):
                operands.extend(bound.args)
            else:
                operands.append(bound)
        return cls(type=pa.bool_(), args=tuple(operands))

    def _is(self, node: exp.Is) -> Node:
        if node.args.get("negate"):
            return self._not(self._is(exp.Is(this=node.this, expression=node.expression)))
        arg = self.bind(node.this)
        target = node.expression
        if isinstance(target, exp.Null):
            return IsNull(type=pa.bool_(), arg=arg)
        if isinstance(target, exp.Boolean):
            arg = self._boolean(arg, "IS TRUE/FALSE")
            return self.typed(
                Compare(type=pa.bool_(), op="<=>", left=arg, right=Const(type=pa.bool_(), value=bool(target.this)))
            )
        raise self.unsupported(node)

    def _in(self, node: exp.In) -> Node:
        if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
            raise self.error("IN with a subquery is not supported")
        if not node.expressions:
            raise self.error("IN needs at least one value")
        arg, *values = self.unify([self.bind(node.this)] + [self.bind(v) for v in node.expressions], "IN")
        return self.typed(InList(type=pa.bool_(), arg=arg, values=tuple(values)))

    def _between(self, node: exp.Between) -> Node:
        if node.args.get("symmetric"):
            raise self.error("BETWEEN SYMMETRIC is not supported")
        low = self._compare(">=", node.this, node.args["low"])
        high = self._compare("<=", node.this, node.args["high"])
        return And(type=pa.bool_(), args=(low, high))

    def _like(self, node: SqlNode, mode: LikeMode) -> Node:
        if any(node.args.get(k) for k in ("escape", "flag", "full_match")):
            raise self.unsupported(node)
        arg = self._as_string(self.bind(node.this))
        pattern = self.bind(node.expression)
        if not isinstance(pattern, Const) or not isinstance(pattern.value, str):
            raise self.error(f"{mode.upper()} needs a string literal pattern")
        bound = self.typed(Like(type=pa.bool_(), arg=arg, pattern=pattern.value, mode=mode))
        return self._not(bound) if node.args.get("negate") else bound

    def _as_string(self, node: Node) -> Node:
        if is_string(node.type):
            return node
        if isinstance(node, Const):
            return self.coerce(node, pa.string())
        return self.typed(Cast(type=pa.string(), arg=node, mode="try"))

    def _arith(self, op: ArithOp, left: SqlNode, right: SqlNode) -> Node:
        operands = [self.bind(left), self.bind(right)]
        for operand in operands:
            if not (is_numeric(operand.type) or family(operand.type) == "null"):
                raise self.error(f"arithmetic {op} needs numbers, got {spark_type_name(operand.type)}")
        lhs, rhs = self.unify(operands, f"arithmetic {op}")
        if family(lhs.type) == "null":
            lhs, rhs = self.coerce(lhs, pa.int32()), self.coerce(rhs, pa.int32())
        if op == "div":
            if not pa.types.is_integer(lhs.type):
                raise self.error("DIV is supported on integers only")
            return self.typed(Arith(type=pa.int64(), op=op, left=lhs, right=rhs))
        if op == "/" and not pa.types.is_decimal(lhs.type):
            lhs, rhs = self.coerce(lhs, pa.float64()), self.coerce(rhs, pa.float64())
        try:
            return self.typed(Arith(type=lhs.type, op=op, left=lhs, right=rhs))
        except PredicateError:
            if op != "/":
                raise
        # Decimal division whose exact result type overflows Arrow's precision: compute in double.
        lhs, rhs = self.coerce(lhs, pa.float64()), self.coerce(rhs, pa.float64())
        return self.typed(Arith(type=pa.float64(), op=op, left=lhs, right=rhs))

    def _case(self, node: exp.Case) -> Node:
        subject = self.bind(node.this) if node.this is not None else None
        conditions: list[Node] = []
        results: list[Node] = []
        for branch in node.args.get("ifs") or []:
            if not isinstance(branch, exp.If):
                raise self.unsupported(branch)
            if subject is not None:
                lhs, rhs = self.unify([subject, self.bind(branch.this)], "CASE")
                cond: Node = self.typed(Compare(type=pa.bool_(), op="=", left=lhs, right=rhs))
            else:
                cond = self._boolean(self.bind(branch.this), "CASE WHEN")
            conditions.append(cond)
            results.append(self.bind(branch.args.get("true")))
        default = node.args.get("default")
        return self._build_case(conditions, results, self.bind(default) if default is not None else None)

    def _if(self, node: exp.If) -> Node:
        cond = self._boolean(self.bind(node.this), "IF")
        otherwise = node.args.get("false")
        return self._build_case(
            [cond], [self.bind(node.args.get("true"))], self.bind(otherwise) if otherwise is not None else None
        )

    def _build_case(self, conditions: list[Node], results: list[Node], default: Node | None) -> Node:
        if not conditions:
            raise self.error("CASE needs at least one WHEN")
        values = self.unify([*results, *([default] if default is not None else [])], "CASE results")
        if family(values[0].type) == "null":
            values = [self.coerce(v, pa.bool_()) for v in values]
        whens = tuple(zip(conditions, values[: len(conditions)], strict=True))
        tail = values[-1] if default is not None else None
        return self.typed(Case(type=values[0].type, whens=whens, default=tail))

    def _call(self, name: str, args: Sequence[SqlNode], *, unify: bool) -> Node:
        bound = [self.bind(a) for a in args]
        if unify:
            bound = self.unify(bound, name.upper())
            if family(bound[0].type) == "null":
                bound = [self.coerce(b, pa.bool_()) for b in bound]
        return self.typed(Call(type=pa.null(), name=name, args=tuple(bound)))

    def _string_call(self, name: str, args: Sequence[SqlNode]) -> Node:
        if not args:
            raise self.error(f"{name.upper()} needs an argument")
        bound = [self._as_string(self.bind(a)) for a in args]
        if len({b.type for b in bound}) > 1:
            bound = [self.coerce(b, pa.large_string()) for b in bound]
        return self.typed(Call(type=pa.null(), name=name, args=tuple(bound)))

    def _concat(self, node: exp.Concat) -> Node:
        if node.args.get("coalesce"):
            raise self.unsupported(node)
        return self._string_call("concat", list(node.expressions))

    def _trim(self, node: exp.Trim) -> Node:
        if node.args.get("position") or node.args.get("expression") or node.args.get("collation"):
            raise self.error("TRIM supports only the one-argument form")
        return self._string_call("trim", [node.this])

    def _int_constant(self, node: SqlNode | None, what: str) -> int | None:
        if node is None:
            return None
        bound = self.bind(node)
        if not isinstance(bound, Const) or not isinstance(bound.value, int) or isinstance(bound.value, bool):
            raise self.error(f"{what} must be an integer literal")
        return bound.value

    def _substring(self, node: exp.Substring) -> Node:
        if node.args.get("zero_start"):
            raise self.unsupported(node)
        start = self._int_constant(node.args.get("start"), "SUBSTRING position")
        length = self._int_constant(node.args.get("length"), "SUBSTRING length")
        arg = self._as_string(self.bind(node.this))
        return self.typed(Call(type=pa.null(), name="substring", args=(arg,), params=(start or 0, length)))

    def _numeric_call(self, name: str, arg_node: SqlNode, params: tuple[Any, ...]) -> Node:
        arg = self.bind(arg_node)
        if family(arg.type) == "null":
            arg = self.coerce(arg, pa.int32())
        if not is_numeric(arg.type):
            raise self.error(f"{name.upper()} needs a number, got {spark_type_name(arg.type)}")
        return self.typed(Call(type=pa.null(), name=name, args=(arg,), params=params))

    def _round(self, node: exp.Round) -> Node:
        if node.args.get("truncate") or node.args.get("casts_non_integer_decimals"):
            raise self.unsupported(node)
        digits = self._int_constant(node.args.get("decimals"), "ROUND digits")
        return self._numeric_call("round", node.this, (digits or 0,))


def _flatten(node: SqlNode, cls: type[SqlNode]) -> list[SqlNode]:
    if isinstance(node, cls):
        return _flatten(node.this, cls) + _flatten(node.expression, cls)
    return [node]


def _describe(node: Node) -> str:
    for attr in ("op", "name", "mode"):
        value = getattr(node, attr, None)
        if isinstance(value, str):
            return value
    return type(node).__name__
