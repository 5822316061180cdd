""" "Did you mean ...?" for misspelt table and column names (difflib over the names that exist)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

MAX_SUGGESTIONS = 3
CUTOFF = 0.6
"""How similar a name must be to be suggested (difflib ratio)."""
MARGIN = 0.15
"""Names this much less similar than the best one are not suggested with it."""


def _score(wanted: str, candidate: str) -> float:
    """How alike two lower-case names are; within one namespace only the table parts count."""
    w_ns, _, w_short = wanted.rpartition(".")
    c_ns, _, c_short = candidate.rpartition(".")
    if w_ns == c_ns or not w_ns:  # same namespace, or the namespace was left out ("checking")
        return difflib.SequenceMatcher(None, w_short, c_short).ratio()
    return difflib.SequenceMatcher(None, wanted, candidate).ratio()


def closest(name: str, candidates: Iterable[str], *, limit: int = MAX_SUGGESTIONS) -> list[str]:
    """The candidates closest to ``name`` (case-insensitive), best first.

    Table names are compared by their last part within one namespace, so ``bank.chekcing`` suggests
    ``bank.checking`` and not ``bank.savings``; ``checking`` alone suggests ``bank.checking``.
    """
    by_lower: dict[str, str] = {}
    for c in candidates:
        by_lower.setdefault(c.lower(), c)
    wanted = name.lower()
    scored = sorted(((_score(wanted, low), low) for low in by_lower if low != wanted), reverse=True)
    if not scored:
        return []
    floor = max(CUTOFF, scored[0][0] - MARGIN)  # 'north' suggests 'bank.north', not also 'bank.south'
    return [by_lower[low] for score, low in scored[:limit] if score >= floor]


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """``"; did you mean 'a' or 'b'?"`` for the closest candidates, or ``""`` when none is close."""
    found = closest(name, candidates)
    if not found:
        return ""
    quoted = [repr(f) for f in found]
    listed = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]
    return f"; did you mean {listed}?"


def did_you_mean_or_list(name: str, candidates: Iterable[str], what: str, *, shown: int = 10) -> str:
    """:func:`did_you_mean`, or when no name is close, the names there are: ``" (tables: a, b)"``."""
    names = list(candidates)
    close = did_you_mean(name, names)
    if close:
        return close
    listed = ", ".join(names[:shown]) + (", ..." if len(names) > shown else "")
    return f" ({what}: {listed or 'none'})"
