"""Error text of the object store in one line (obstore appends a multi-line ``Debug source:`` dump)."""

from __future__ import annotations


def first_line(exc: BaseException) -> str:
    """``exc``'s message without obstore's multi-line ``Debug source:`` dump: its first line."""
    text = str(exc).split("\n\nDebug source:", 1)[0]
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__
