"""Spark SQL DDL column lists (``"id long NOT NULL, tags array<string>"``) as Arrow schemas, and back.

``create_table(name, "id long, v string")`` takes the same schema string as Spark's
``StructType.fromDDL`` / ``CREATE TABLE t (...)``. The parser is small and strict: every type Delta can store,
``NOT NULL``, ``COMMENT '...'`` and back-quoted names. Errors name the Spark types, with a caret under the
position, so a user working in Spark reads them in Spark's vocabulary.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass

import pyarrow as pa

from txlake.delta.schema import spark_type_name  # (re-exported: part of this module's API)
from txlake.errors import InvalidArgumentError
from txlake.expr.syntax import caret_lines

__all__ = ["SPARK_TYPES", "DdlError", "parse_ddl_schema", "parse_ddl_type", "spark_type_name"]

_PRIMITIVES: dict[str, pa.DataType] = {
    "long": pa.int64(),
    "bigint": pa.int64(),
    "int": pa.int32(),
    "integer": pa.int32(),
    "short": pa.int16(),
    "smallint": pa.int16(),
    "byte": pa.int8(),
    "tinyint": pa.int8(),
    "string": pa.string(),
    "boolean": pa.bool_(),
    "bool": pa.bool_(),
    "double": pa.float64(),
    "float": pa.float32(),
    "real": pa.float32(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ltz": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
    "binary": pa.binary(),
}
_SIZED_STRINGS = frozenset({"varchar", "char", "character"})
_DECIMALS = frozenset({"decimal", "dec", "numeric"})
SPARK_TYPES: tuple[str, ...] = (
    "long",
    "bigint",
    "int",
    "integer",
    "short",
    "smallint",
    "byte",
    "tinyint",
    "string",
    "boolean",
    "double",
    "float",
    "date",
    "timestamp",
    "timestamp_ntz",
    "decimal(p,s)",
    "binary",
    "array<T>",
    "map<K,V>",
    "struct<name:T,...>",
)
"""The Spark SQL type names the parser accepts (as error messages list them)."""

_TOKEN = re.compile(
    r"\s*(?:(?P<quoted>`(?:[^`]|``)*`)|(?P<string>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")"
    r"|(?P<number>\d+)|(?P<word>[A-Za-z_][A-Za-z0-9_]*)|(?P<punct>[<>(),:])|(?P<other>\S))"
)


class DdlError(InvalidArgumentError):
    """A schema string is not a Spark SQL column list; ``ddl`` is the string, ``position`` the 0-based offset."""

    def __init__(self, message: str, *, ddl: str, position: int) -> None:
        super().__init__(f"{message}\n{caret_lines(ddl, position)}", argument="schema")
        self.ddl = ddl
        self.position = position


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str
    text: str
    start: int

    @property
    def upper(self) -> str:
        return self.text.upper()


def _tokens(ddl: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    while pos < len(ddl):
        match = _TOKEN.match(ddl, pos)
        if match is None:  # only trailing whitespace is left
            break
        kind = match.lastgroup or "other"
        tokens.append(_Token(kind, match.group(kind), match.start(kind)))
        pos = match.end()
    return tokens


def _close(word: str) -> str:
    names = [t.split("<")[0].split("(")[0] for t in SPARK_TYPES]
    found = difflib.get_close_matches(word.lower(), names, n=1, cutoff=0.6)
    return f"; did you mean {found[0]}?" if found else ""


class _Parser:
    def __init__(self, ddl: str) -> None:
        self.ddl = ddl
        self.tokens = _tokens(ddl)
        self.i = 0

    # ------------------------------------------------------------------------------------- primitives

    def peek(self) -> _Token | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def error(self, message: str, token: _Token | None = None) -> DdlError:
        token = token if token is not None else self.peek()
        position = token.start if token is not None else len(self.ddl.rstrip())
        return DdlError(message, ddl=self.ddl, position=position)

    def at(self, text: str) -> bool:
        token = self.peek()
        return token is not None and token.text == text

    def take(self) -> _Token:
        token = self.peek()
        if token is None:
            raise self.error("unexpected end of the schema")
        self.i += 1
        return token

    def expect(self, text: str, what: str) -> _Token:
        token = self.peek()
        if token is None or token.text != text:
            found = f", found {token.text!r}" if token is not None else " at the end"
            raise self.error(f"expected {text!r} {what}{found}")
        self.i += 1
        return token

    def accept(self, *words: str) -> bool:
        token = self.peek()
        if token is not None and token.kind == "word" and token.upper == words[0]:
            following = self.tokens[self.i : self.i + len(words)]
            if [t.upper for t in following] == list(words):
                self.i += len(words)
                return True
        return False

    # ----------------------------------------------------------------------------------------- grammar

    def name(self, what: str) -> str:
        token = self.peek()
        if token is None or token.kind not in {"word", "quoted"}:
            found = f"{token.text!r}" if token is not None else "the end"
            raise self.error(f"expected {what}, found {found}")
        self.i += 1
        return token.text[1:-1].replace("``", "`") if token.kind == "quoted" else token.text

    def integer(self, what: str) -> int:
        token = self.peek()
        if token is None or token.kind != "number":
            raise self.error(f"expected {what} (a whole number)")
        self.i += 1
        return int(token.text)

    def data_type(self) -> pa.DataType:
        token = self.peek()
        if token is None:
            raise self.error("expected a type (" + ", ".join(SPARK_TYPES) + ")")
        if token.kind != "word":
            if token.text == ".":
                raise self.error(
                    "expected a type, found '.': a column list names top-level columns (a field inside a struct "
                    "cannot be added here; a name with a dot in it is written in backticks: `a.b`)"
                )
            raise self.error(f"expected a type, found {token.text!r}")
        self.i += 1
        word = token.text.lower()
        if word in _PRIMITIVES:
            return _PRIMITIVES[word]
        if word in _SIZED_STRINGS:
            if self.at("("):
                self.take()
                self.integer("a length")
                self.expect(")", f"after the length of {word}")
            return pa.string()
        if word in _DECIMALS:
            precision, scale = 10, 0
            if self.at("("):
                self.take()
                precision = self.integer("a precision")
                if self.at(","):
                    self.take()
                    scale = self.integer("a scale")
                self.expect(")", "after decimal(precision, scale)")
            if not 1 <= precision <= 38 or not 0 <= scale <= precision:
                raise self.error(
                    f"decimal({precision},{scale}) needs 1 <= precision <= 38 and 0 <= scale <= precision", token
                )
            return pa.decimal128(precision, scale)
        if word == "array":
            self.expect("<", "after array")
            element = self.data_type()
            self.expect(">", "to close array<...>")
            return pa.list_(pa.field("element", element, True))
        if word == "map":
            self.expect("<", "after map")
            key = self.data_type()
            self.expect(",", "between the key and value types of map<K,V>")
            value = self.data_type()
            self.expect(">", "to close map<K,V>")
            return pa.map_(pa.field("key", key, nullable=False), pa.field("value", value, True))
        if word == "struct":
            self.expect("<", "after struct")
            fields: list[pa.Field] = []
            if self.at(">"):
                raise self.error("a struct needs at least one field")
            while True:
                fields.append(self.field(in_struct=True))
                if self.at(","):
                    self.take()
                    continue
                self.expect(">", "to close struct<...>")
                break
            self._no_duplicates(fields)
            return pa.struct(fields)
        raise self.error(
            f"unknown type {token.text!r}{_close(word)} (Spark SQL types: {', '.join(SPARK_TYPES)})", token
        )

    def field(self, *, in_struct: bool) -> pa.Field:
        name = self.name("a column name" if not in_struct else "a field name")
        if self.at(":"):  # struct<name:type>; Spark accepts `name: type` at the top level too
            self.take()
        dtype = self.data_type()
        nullable = True
        metadata: dict[str, str] = {}
        while True:
            if self.accept("NOT", "NULL"):
                nullable = False
            elif self.accept("NULL"):
                nullable = True
            elif self.accept("COMMENT"):
                token = self.peek()
                if token is None or token.kind != "string":
                    raise self.error("expected a quoted comment after COMMENT")
                self.i += 1
                metadata["comment"] = json.dumps(_unquote(token.text))
            else:
                break
        return pa.field(name, dtype, nullable, metadata or None)

    def _no_duplicates(self, fields: list[pa.Field]) -> None:
        seen: set[str] = set()
        for f in fields:
            if f.name.lower() in seen:
                raise InvalidArgumentError(f"column {f.name!r} appears twice in {self.ddl!r}", argument="schema")
            seen.add(f.name.lower())

    def schema(self) -> pa.Schema:
        if not self.tokens:
            raise InvalidArgumentError("the schema string is empty (e.g. 'id long, name string')", argument="schema")
        if self.accept("STRUCT"):  # StructType.fromDDL also takes "struct<a:int,b:string>"
            self.i -= 1
            dtype = self.data_type()
            fields = [dtype.field(i) for i in range(dtype.num_fields)]
        else:
            fields = [self.field(in_struct=False)]
            while self.at(","):
                self.take()
                fields.append(self.field(in_struct=False))
        token = self.peek()
        if token is not None:
            raise self.error(f"unexpected {token.text!r}: columns are separated by commas ('id long, name string')")
        self._no_duplicates(fields)
        return pa.schema(fields)


def _unquote(text: str) -> str:
    body = text[1:-1]
    return re.sub(r"\\(.)", r"\1", body)


def parse_ddl_schema(ddl: str) -> pa.Schema:
    """The Arrow schema of a Spark SQL column list (``"id long NOT NULL, v string"``); raises :class:`DdlError`."""
    return _Parser(ddl).schema()


def parse_ddl_type(ddl: str) -> pa.DataType:
    """The Arrow type of one Spark SQL type (``"array<decimal(10,2)>"``); raises :class:`DdlError`."""
    parser = _Parser(ddl)
    dtype = parser.data_type()
    token = parser.peek()
    if token is not None:
        raise parser.error(f"unexpected {token.text!r} after the type")
    return dtype
