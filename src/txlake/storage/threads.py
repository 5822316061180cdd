"""Requests on threads: ``map_concurrently`` runs one call per item on a short-lived thread pool.

Python refuses new work to a ``ThreadPoolExecutor`` once the interpreter has begun to shut down, which
includes every ``atexit`` handler. A transaction committed there (a pipeline's last words) would fail on its
first concurrent request; ``map_concurrently`` runs the calls one after another instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def map_concurrently(fn: Callable[[T], R], items: Iterable[T], *, max_workers: int) -> list[R]:
    """``[fn(item) for item in items]``, in that order, with up to ``max_workers`` calls at once.

    One item (or one worker) runs on the calling thread. While the interpreter shuts down the calls run one
    after another. The first failing call, in item order, raises.
    """
    todo = list(items)
    workers = min(max_workers, len(todo))
    if workers <= 1:
        return [fn(item) for item in todo]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = []
        for item in todo:
            try:
                futures.append(pool.submit(fn, item))
            except RuntimeError:  # "cannot schedule new futures after interpreter shutdown"
                break
        try:
            done = [future.result() for future in futures]
        except BaseException:
            for future in futures:
                future.cancel()  # those not yet started: their results would be thrown away
            raise
    return done + [fn(item) for item in todo[len(futures) :]]
