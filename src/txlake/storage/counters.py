"""Thread-safe counters of object-store requests per kind (LakeVilla-style request accounting)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

RequestKind = Literal["GET", "HEAD", "LIST", "PUT", "DELETE"]
REQUEST_KINDS: tuple[RequestKind, ...] = ("GET", "HEAD", "LIST", "PUT", "DELETE")


@dataclass(frozen=True, slots=True)
class RequestCounts:
    """An immutable count of requests per kind."""

    get: int = 0
    head: int = 0
    list: int = 0
    put: int = 0
    delete: int = 0

    @property
    def total(self) -> int:
        return self.get + self.head + self.list + self.put + self.delete

    def __sub__(self, other: RequestCounts) -> RequestCounts:
        return RequestCounts(
            self.get - other.get,
            self.head - other.head,
            self.list - other.list,
            self.put - other.put,
            self.delete - other.delete,
        )

    def as_dict(self) -> dict[str, int]:
        return {"GET": self.get, "HEAD": self.head, "LIST": self.list, "PUT": self.put, "DELETE": self.delete}


@dataclass
class RequestCounters:
    """Mutable, lock-protected request counters shared by every view of one store."""

    _counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REQUEST_KINDS, 0))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, kind: RequestKind, n: int = 1) -> None:
        with self._lock:
            self._counts[kind] += n

    def snapshot(self) -> RequestCounts:
        with self._lock:
            c = self._counts
            return RequestCounts(c["GET"], c["HEAD"], c["LIST"], c["PUT"], c["DELETE"])

    def reset(self) -> None:
        with self._lock:
            for k in self._counts:
                self._counts[k] = 0

    @contextmanager
    def measure(self) -> Iterator[RequestMeasurement]:
        """Count the requests made inside the ``with`` block (by every thread using this store)."""
        m = RequestMeasurement(self, self.snapshot())
        yield m
        m.finish()


class RequestMeasurement:
    """The requests counted between entering and leaving :meth:`RequestCounters.measure`."""

    def __init__(self, counters: RequestCounters, start: RequestCounts) -> None:
        self._counters = counters
        self._start = start
        self._result: RequestCounts | None = None

    def finish(self) -> None:
        self._result = self._counters.snapshot() - self._start

    @property
    def counts(self) -> RequestCounts:
        return self._result if self._result is not None else self._counters.snapshot() - self._start
