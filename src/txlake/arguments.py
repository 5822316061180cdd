"""Checks of public API arguments: a wrong type or value is a typed error naming the argument."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from txlake.errors import InvalidArgumentError, InvalidArgumentTypeError


def name_argument(value: object, argument: str = "name", *, example: str = "'namespace.table'") -> str:
    """A table or namespace name argument: a string, else :class:`InvalidArgumentTypeError`."""
    if not isinstance(value, str):
        raise InvalidArgumentTypeError(
            f"{argument} must be a string such as {example}, got {type(value).__name__} {value!r}",
            argument=argument,
        )
    return value


def columns_argument(
    columns: Sequence[str] | None, argument: str = "columns", *, what: str = "column names"
) -> Sequence[str] | None:
    """``columns=`` (or ``argument``): a list of names (a single string would be read as its characters)."""
    if columns is None:
        return None
    if isinstance(columns, (str, bytes)) or not isinstance(columns, Iterable):
        raise InvalidArgumentTypeError(
            f"{argument} must be a list of {what}, got {type(columns).__name__} {columns!r}"
            + (f" (write [{columns!r}])" if isinstance(columns, str) else ""),
            argument=argument,
        )
    names = list(columns)
    bad = [c for c in names if not isinstance(c, str)]
    if bad:
        raise InvalidArgumentTypeError(f"{what} must be strings, got {bad[0]!r}", argument=argument)
    return names


def mapping_argument(value: object, argument: str, *, of: str = "strings") -> Mapping[str, Any]:
    """A mapping argument (``set=``, ``properties=``): a dict, else :class:`InvalidArgumentTypeError`."""
    if not isinstance(value, Mapping):
        raise InvalidArgumentTypeError(
            f"{argument} must be a dict of {of}, got {type(value).__name__} {value!r}", argument=argument
        )
    return value


def string_mapping_argument(value: object, argument: str) -> dict[str, str]:
    """A dict of strings to strings (Delta table properties are strings)."""
    mapping = mapping_argument(value, argument)
    bad = [(k, v) for k, v in mapping.items() if not isinstance(k, str) or not isinstance(v, str)]
    if bad:
        key, val = bad[0]
        raise InvalidArgumentTypeError(
            f"{argument} maps strings to strings, got {key!r}: {type(val).__name__} {val!r}", argument=argument
        )
    return dict(mapping)


def callable_argument(value: object, argument: str) -> Callable[..., Any]:
    if not callable(value):
        raise InvalidArgumentTypeError(
            f"{argument} must be a function, got {type(value).__name__} {value!r}", argument=argument
        )
    return value


def number_argument(value: object, argument: str, *, minimum: float, integer: bool = False) -> float:
    """A number (an int when ``integer``) of at least ``minimum``; bools are not numbers here."""
    kinds: tuple[type, ...] = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        what = "an integer" if integer else "a number"
        raise InvalidArgumentTypeError(
            f"{argument} must be {what}, got {type(value).__name__} {value!r}", argument=argument
        )
    number = float(value)  # type: ignore[arg-type]  # an int or a float, checked above
    if number < minimum:
        raise InvalidArgumentError(f"{argument} must be at least {minimum:g}, got {value!r}", argument=argument)
    return number


def choice_argument(value: object, argument: str, choices: Sequence[str]) -> str:
    if value not in choices:
        raise InvalidArgumentError(f"{argument} must be one of {tuple(choices)}, got {value!r}", argument=argument)
    return str(value)


def bool_argument(value: object, argument: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidArgumentTypeError(
            f"{argument} must be True or False, got {type(value).__name__} {value!r}", argument=argument
        )
    return value


def timestamp_ms_argument(value: object, argument: str = "timestamp") -> int:
    """A point in time for time travel: a timezone-aware :class:`~datetime.datetime` not in the future, in ms."""
    if not isinstance(value, datetime):
        raise InvalidArgumentTypeError(
            f"{argument} must be a datetime, got {type(value).__name__} {value!r}", argument=argument
        )
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidArgumentError(
            f"{argument} {value.isoformat()} has no time zone: give an aware datetime, e.g. "
            "datetime(2026, 1, 31, 12, 0, tzinfo=timezone.utc)",
            argument=argument,
        )
    millis = int(value.timestamp() * 1000)
    if millis > time.time() * 1000:
        raise InvalidArgumentError(
            f"{argument} {value.isoformat()} is in the future: what it would show could still change",
            argument=argument,
        )
    return millis


_SIZE_UNITS = {"": 1, "B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}


def size_argument(value: object, argument: str) -> int:
    """A size in bytes: a positive int, or a text such as ``"128MB"`` / ``"1 GB"`` / ``"4096"`` (binary units)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise InvalidArgumentTypeError(
            f"{argument} must be bytes (an int) or a text such as '128MB', got {type(value).__name__}",
            argument=argument,
        )
    if isinstance(value, int):
        number = value
    else:
        text = value.strip().upper().replace(" ", "")
        digits = text.rstrip("KMGTB")
        unit = text[len(digits) :]
        if not digits.isdigit() or unit not in _SIZE_UNITS:
            raise InvalidArgumentError(f"{argument} must be a size such as '128MB', got {value!r}", argument=argument)
        number = int(digits) * _SIZE_UNITS[unit]
    if number <= 0:
        raise InvalidArgumentError(f"{argument} must be positive, got {value!r}", argument=argument)
    return number
