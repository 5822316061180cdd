"""Parse errors in plain words: the expression, a caret under the position, and what was expected.

sqlglot reports ``Required keyword: 'expression' missing for <class 'sqlglot.expressions.core.Add'>. Line 1,
Col: 9.`` with ANSI underline codes; users wrote ``balance +``, so they are told that an expression was
expected after ``+``, at the position where it is missing.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError, SqlglotError, TokenError

_ALTERNATIVES = {"=": ("==",), "<>": ("!=",)}
# The operator as the user wrote it, for the sqlglot classes whose operand can be missing (the first spelling is
# the one named in messages).
_OPERATORS: dict[str, tuple[str, ...]] = {
    cls.__name__: (op, *_ALTERNATIVES.get(op, ()))
    for cls, op in (
        (exp.Add, "+"),
        (exp.Sub, "-"),
        (exp.Mul, "*"),
        (exp.Div, "/"),
        (exp.Mod, "%"),
        (exp.IntDiv, "DIV"),
        (exp.EQ, "="),
        (exp.NEQ, "<>"),
        (exp.NullSafeEQ, "<=>"),
        (exp.GT, ">"),
        (exp.GTE, ">="),
        (exp.LT, "<"),
        (exp.LTE, "<="),
        (exp.And, "AND"),
        (exp.Or, "OR"),
        (exp.Not, "NOT"),
        (exp.Like, "LIKE"),
        (exp.ILike, "ILIKE"),
        (exp.RegexpLike, "RLIKE"),
        (exp.Is, "IS"),
        (exp.In, "IN"),
        (exp.Between, "BETWEEN"),
        (exp.DPipe, "||"),
        (exp.BitwiseAnd, "&"),
        (exp.BitwiseOr, "|"),
        (exp.BitwiseXor, "^"),
    )
}
_REQUIRED = re.compile(r"Required keyword: '(?P<key>\w+)' missing for <class '[\w.]*\.(?P<cls>\w+)'>")
_EXPECTING = re.compile(r"Expecting (?P<what>.+?)\.?$")


_TOKEN_REPR = re.compile(r"<Token token_type: TokenType\.(?P<type>\w+), text: (?P<text>.*?), line: .*?>")


def _token_text(match: re.Match[str]) -> str:
    """sqlglot names tokens by their repr (``<Token token_type: TokenType.SENTINEL, ...>``): show the text."""
    return "the end" if match.group("type") == "SENTINEL" else repr(match.group("text"))


@dataclass(frozen=True, slots=True)
class SyntaxProblem:
    """What is wrong with a SQL text and where (a 0-based offset into it)."""

    reason: str
    position: int


def caret_lines(text: str, position: int) -> str:
    """The line of ``text`` holding ``position``, and a caret under it (both indented two spaces)."""
    position = max(0, min(position, len(text)))
    start = text.rfind("\n", 0, position) + 1
    end = text.find("\n", position)
    line = text[start : end if end >= 0 else len(text)]
    return f"  {line}\n  {''.join(_pad(ch) for ch in text[start:position])}^"


def _pad(ch: str) -> str:
    """What goes under ``ch`` so that the caret lines up on a terminal: a tab under a tab, two spaces under a
    wide (CJK, emoji) character, nothing under a combining mark."""
    if ch == "\t":
        return "\t"
    if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
        return ""
    return "  " if unicodedata.east_asian_width(ch) in ("W", "F") else " "


def _offset(text: str, line: int, col: int) -> int:
    """The 0-based offset of 1-based ``line`` and ``col`` (sqlglot's column is where the token ends)."""
    lines = text.split("\n")
    line = max(1, min(line, len(lines)))
    return sum(len(s) + 1 for s in lines[: line - 1]) + max(0, col)


def _missing(key: str, cls: str, token: _Token) -> SyntaxProblem:
    spellings = _OPERATORS.get(cls)
    if cls == "Between":
        what = "a lower bound after BETWEEN" if key == "low" else "'AND <upper bound>' after 'BETWEEN <lower bound>'"
        return SyntaxProblem(f"expected {what}", token.end)
    if spellings is None:  # a clause or function whose part is missing: say where, in the user's words
        if token.last:
            return SyntaxProblem(f"expected an expression after {token.text!r}", token.end)
        return SyntaxProblem(f"unexpected {token.text!r}" if token.text else "incomplete expression", token.start)
    op = spellings[0]
    if token.text.upper() in spellings and token.last:  # the operator ends the text: its operand is missing
        return SyntaxProblem(f"expected an expression after {token.text!r}", token.end)
    return SyntaxProblem(f"expected an expression after {op!r}, found {token.text!r}", token.start)


@dataclass(frozen=True, slots=True)
class _Token:
    """The token sqlglot stopped at: its text, where it starts and ends, whether only blanks follow it."""

    text: str
    start: int
    end: int
    last: bool


def _unterminated(text: str) -> SyntaxProblem | None:
    """An opening quote that is never closed (sqlglot's tokenizer names no position for it)."""
    quote: str | None = None
    opened = 0
    i = 0
    while i < len(text):
        ch = text[i]
        if quote is None:
            if ch in "'\"`":
                quote, opened = ch, i
        elif ch == "\\" and quote != "`":
            i += 1
        elif ch == quote:
            if i + 1 < len(text) and text[i + 1] == quote:
                i += 1
            else:
                quote = None
        i += 1
    if quote is None:
        return None
    kind = "quoted name" if quote == "`" else "string"
    return SyntaxProblem(f"unterminated {kind}: the {quote} here is never closed", opened)


def empty_item(text: str, dialect: str = "spark") -> tuple[int, bool] | None:
    """A comma with nothing before or after it (``"id,"``, ``",id"``, ``"id,,v"``, ``"f(a,)"``), which sqlglot
    accepts silently: its offset, and whether it is inside parentheses (an empty argument, not an empty item)."""
    try:
        tokens = Dialect.get_or_raise(dialect).tokenize(text)
    except SqlglotError:
        return None  # the parser says what is wrong
    kinds = [token.token_type.name for token in tokens]  # (by name: sqlglot moved TokenType between versions)
    depth = 0
    for i, kind in enumerate(kinds):
        depth += {"L_PAREN": 1, "R_PAREN": -1}.get(kind, 0)
        if kind != "COMMA":
            continue
        before = kinds[i - 1] if i > 0 else None
        after = kinds[i + 1] if i + 1 < len(kinds) else None
        if before in (None, "COMMA", "L_PAREN") or after in (None, "COMMA", "R_PAREN", "FROM", "SEMICOLON"):
            return tokens[i].start, depth > 0
    return None


def describe_syntax_error(text: str, error: SqlglotError) -> SyntaxProblem:
    """Where and why sqlglot could not parse ``text``, in plain words."""
    if isinstance(error, TokenError) or not isinstance(error, ParseError) or not error.errors:
        found = _unterminated(text)
        return found or SyntaxProblem("cannot split it into tokens", len(text.rstrip()))
    first = error.errors[0]
    description = str(first.get("description") or "")
    highlight = str(first.get("highlight") or "")
    end = _offset(text, int(first.get("line") or 1), int(first.get("col") or 0))
    token = _Token(highlight, max(0, end - len(highlight)), end, not str(first.get("end_context") or "").strip())
    if m := _REQUIRED.search(description):
        return _missing(m.group("key"), m.group("cls"), token)
    if m := _EXPECTING.match(description):
        what = m.group("what")
        return SyntaxProblem(f"expected {what!r}" if len(what) <= 2 else f"expected {what}", end)
    if "Unexpected token" in description or "Invalid expression" in description:
        return SyntaxProblem(f"unexpected {highlight!r}" if highlight else "unexpected end", token.start)
    plain = _TOKEN_REPR.sub(_token_text, re.sub(r"\x1b\[[0-9;]*m", "", description)).strip().rstrip(".")
    return SyntaxProblem(plain[:1].lower() + plain[1:] if plain else "syntax error", token.start)
