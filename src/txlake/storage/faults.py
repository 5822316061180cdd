"""Fault injection: fail or 'crash' at the Nth request of a kind, for crash and recovery tests."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from txlake.errors import InjectedFaultError, SimulatedCrash, TransientStorageError
from txlake.storage.counters import RequestKind

FaultAction = Literal["fail", "transient", "crash_before", "crash_after", "hook", "hook_after"]


@dataclass(frozen=True, slots=True)
class FaultRule:
    """Trigger ``action`` at the ``nth`` (1-based) request of ``kind`` whose path contains ``path_contains``.

    - ``fail``: the request raises :class:`InjectedFaultError` and is not retried.
    - ``transient``: the request raises :class:`TransientStorageError` (the retry policy absorbs it).
    - ``crash_before``: :class:`SimulatedCrash` before the request reaches the store.
    - ``crash_after``: the request takes effect, then :class:`SimulatedCrash` (e.g. a PUT that landed
      but whose client died before it could act on the answer).
    - ``hook``: call ``hook()`` just before the request (to make another client act at that exact point).
    - ``hook_after``: call ``hook()`` once the request took effect (it is not called if the request failed).
    """

    kind: RequestKind
    nth: int
    action: FaultAction = "fail"
    path_contains: str = ""
    times: int = 1
    hook: Callable[[], None] | None = None


@dataclass
class _Armed:
    rule: FaultRule
    seen: int = 0
    fired: int = 0


@dataclass
class FaultInjector:
    """Holds the armed fault rules of a store; empty in production, so its cost is one lock-free check."""

    _rules: list[_Armed] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, rule: FaultRule) -> None:
        if rule.nth < 1:
            raise ValueError("FaultRule.nth counts from 1")
        with self._lock:
            self._rules.append(_Armed(rule))

    def fired(self) -> int:
        """How many times the armed fault rules have fired so far (hooks do not count: they inject nothing)."""
        with self._lock:
            return sum(armed.fired for armed in self._rules if armed.rule.action not in ("hook", "hook_after"))

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def _match(self, kind: RequestKind, path: str, when: Literal["before", "after"]) -> _Armed | None:
        if not self._rules:
            return None
        with self._lock:
            for armed in self._rules:
                rule = armed.rule
                if rule.kind != kind or rule.path_contains not in path:
                    continue
                if when == "before":
                    armed.seen += 1
                is_after = rule.action in ("crash_after", "hook_after")
                if (when == "after") != is_after:
                    continue
                if armed.seen >= rule.nth and armed.fired < rule.times:
                    armed.fired += 1
                    return armed
        return None

    def before(self, kind: RequestKind, path: str) -> None:
        """Just before a request of ``kind`` on ``path`` (a request on several keys, a bulk delete: every key, one
        per line; the rules match any of them, errors name the first)."""
        armed = self._match(kind, path, "before")
        if armed is None:
            return
        action = armed.rule.action
        path = path.split("\n", 1)[0]
        if action == "fail":
            raise InjectedFaultError(f"injected failure of {kind} {path}", path=path, kind=kind)
        if action == "hook":
            if armed.rule.hook is not None:
                armed.rule.hook()
            return
        if action == "transient":
            raise TransientStorageError(f"injected transient failure of {kind} {path}", path=path, kind=kind)
        raise SimulatedCrash(kind, path, armed.seen)

    def after(self, kind: RequestKind, path: str) -> None:
        armed = self._match(kind, path, "after")
        if armed is None:
            return
        path = path.split("\n", 1)[0]
        if armed.rule.action == "hook_after":
            if armed.rule.hook is not None:
                armed.rule.hook()
            return
        raise SimulatedCrash(kind, path, armed.seen)
