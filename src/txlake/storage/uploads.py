"""Write-behind of a transaction's data files: each PUT goes out in the background while the next statement runs.

A statement on S3 used to wait for its data file's PUT (20-50 ms) before the next statement could start, so a
transaction of n statements paid n PUTs one after the other. :class:`Uploads` sends them off and lets the
caller go on; the transaction waits for them where a file it wrote must exist:

* before it reads a file it staged (a later statement of the same transaction, a redo);
* before anything outside the process may name the files: its sublog, a group intent, its global record (the
  claim, which is the commit point), a Spark job reading its staged files;
* before it deletes files it wrote (an abort, a statement rolled back, a redo), so that no upload lands after
  the delete.

A failed upload fails the transaction, not the statement that wrote the file (that statement has already
returned): every later statement, read and commit of the transaction raises the upload's error, and the
transaction is aborted as for any error. Nothing of it was claimed, so nothing of it can ever appear.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import deque
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait

from txlake.errors import TransactionError
from txlake.storage.store import ObjectStore

UPLOAD_THREADS = 8
"""Threads of a lakehouse's upload pool, shared by its transactions."""
MAX_IN_FLIGHT = 16
"""Uploads of one transaction in flight at most; the next statement's PUT waits for a slot."""
MAX_IN_FLIGHT_BYTES = 256 * 1024 * 1024
"""Bytes of one transaction's uploads held in memory at most (a single larger file still goes, alone)."""
HELD_BYTES = 64 * 1024 * 1024
"""Bytes of the data files one transaction wrote that it keeps in memory to read them back (a later statement
on the same file, a redo keeping a statement) without waiting for the upload and GETting it; files past this
are read from the store."""
IDLE_SECONDS = 2.0
"""An upload thread with nothing to do for this long ends (a lakehouse that stops writing keeps none)."""

_Task = tuple[Future[None], Callable[[], None]]
_POOLS: weakref.WeakSet[UploadPool] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """A forked child has none of the parent's threads, and a lock one of them held stays held: start afresh."""
    for pool in list(_POOLS):
        pool._reset()


class UploadPool:
    """A lakehouse's upload threads, shared fairly by its transactions: each transaction has its own queue and
    the threads take one upload from each queue in turn, so a transaction of one file never waits behind
    another's hundred (a single first-in-first-out queue made it). Threads start on demand, end when idle, and
    are daemons: a write from an ``atexit`` handler still works. A forked child starts its own."""

    def __init__(self, threads: int = UPLOAD_THREADS) -> None:
        self._max_threads = threads
        self._threads = 0
        self._idle = 0  # threads waiting for work
        self._queued = 0  # uploads not taken by a thread yet
        self._queues: dict[int, deque[_Task]] = {}  # owner -> its uploads, in the order the owners take turns
        self._pid = os.getpid()
        self._cv = threading.Condition()
        _POOLS.add(self)

    def _reset(self) -> None:
        self._cv = threading.Condition()
        self._pid, self._threads, self._idle, self._queued, self._queues = os.getpid(), 0, 0, 0, {}

    def submit(self, owner: int, fn: Callable[[], None]) -> Future[None]:
        """Run ``fn`` on an upload thread, in ``owner``'s turn."""
        future: Future[None] = Future()
        with self._cv:
            self._queues.setdefault(owner, deque()).append((future, fn))
            self._queued += 1
            if self._idle:
                self._cv.notify()
            # more uploads waiting than idle threads to take them (a burst after a quiet spell): one more thread
            if self._queued > self._idle and self._threads < self._max_threads:
                self._threads += 1
                try:
                    threading.Thread(target=self._work, name="txlake-upload", daemon=True).start()
                except RuntimeError:  # no thread to be had ("can't start new thread")
                    self._threads -= 1
                    if not self._threads:  # and none to run it later: it is not queued
                        self._queues[owner].pop()
                        if not self._queues[owner]:
                            del self._queues[owner]
                        self._queued -= 1
                        raise
        return future

    def _next(self) -> _Task | None:
        """The next owner's next upload, or ``None`` after :data:`IDLE_SECONDS` without any (the thread ends)."""
        with self._cv:
            while not self._queues:
                self._idle += 1
                self._cv.wait(IDLE_SECONDS)
                self._idle -= 1
                if not self._queues:
                    self._threads -= 1
                    return None
            owner = next(iter(self._queues))
            queue = self._queues.pop(owner)
            task = queue.popleft()
            self._queued -= 1
            if queue:
                self._queues[owner] = queue  # to the back: the other owners go first
            return task

    def _work(self) -> None:
        while (task := self._next()) is not None:
            future, fn = task
            if not future.set_running_or_notify_cancel():
                continue
            try:
                fn()
            except BaseException as exc:  # handed to the transaction, which raises it (a simulated crash too)
                future.set_exception(exc)
            else:
                future.set_result(None)


class Uploads:
    """The data-file PUTs of one transaction: those in flight, every one sent, and the first that failed.

    Not thread-safe: one transaction's statements run one after the other in its caller's thread.
    """

    def __init__(
        self, pool: UploadPool, *, max_in_flight: int = MAX_IN_FLIGHT, max_bytes: int = MAX_IN_FLIGHT_BYTES
    ) -> None:
        self._pool = pool
        self._max_in_flight = max_in_flight
        self._max_bytes = max_bytes
        self._in_flight: dict[Future[None], int] = {}  # upload -> its payload's size
        self._sent: list[tuple[ObjectStore, str]] = []
        self._failed: BaseException | None = None
        self._pid = os.getpid()
        self._held: dict[tuple[str, str], bytes] = {}  # (store URI, key) -> the payload sent there
        self._held_bytes = 0

    def put(self, store: ObjectStore, key: str, payload: bytes) -> None:
        """Send ``payload`` to ``key`` in the background. Raises the error of an earlier failed upload (the
        transaction is failed); waits first while too many uploads, or bytes, are in flight."""
        self.check()
        while self._in_flight and (
            len(self._in_flight) >= self._max_in_flight
            or sum(self._in_flight.values()) + len(payload) > self._max_bytes
        ):
            self._reap(wait(self._in_flight, return_when=FIRST_COMPLETED).done)
        self.check()
        self._sent.append((store, key))
        self._in_flight[self._pool.submit(id(self), lambda: store.put(key, payload))] = len(payload)
        if self._held_bytes + len(payload) <= HELD_BYTES:
            self._held[(store.uri, key)] = payload
            self._held_bytes += len(payload)

    def held(self, store: ObjectStore, key: str) -> bytes | None:
        """The bytes this transaction sent to ``key`` when it still holds them (landed or not), else ``None``."""
        return self._held.get((store.uri, key))

    def drop_held(self) -> None:
        """Let go of the held bytes (the transaction has ended: nothing of it reads its files any more)."""
        self._held.clear()
        self._held_bytes = 0

    def check(self) -> None:
        """Raise the error of an upload that failed (without waiting for those in flight)."""
        self._forked()
        self._reap([f for f in self._in_flight if f.done()])
        if self._failed is not None:
            raise self._failed

    def flush(self) -> None:
        """Wait for every upload in flight; raise the first failure (this transaction's files are then not all
        there, and it must not commit)."""
        self.settle()
        if self._failed is not None:
            raise self._failed

    def settle(self) -> None:
        """Wait for every upload in flight to land or fail, raising nothing (before deleting what was written)."""
        self._forked()
        if self._in_flight:
            self._reap(wait(self._in_flight).done)

    @property
    def pending(self) -> int:
        """Uploads not known to have ended."""
        return len(self._in_flight)

    @property
    def sent(self) -> int:
        """How many uploads were sent so far (a mark for :meth:`sent_since`)."""
        return len(self._sent)

    def sent_since(self, mark: int) -> list[tuple[ObjectStore, str]]:
        """The (store, key) of every upload sent after ``mark`` (:attr:`sent`), landed or not."""
        return self._sent[mark:]

    def _forked(self) -> None:
        """In a process forked while uploads were in flight: they ran in the parent's threads, which this process
        does not have, so whether they landed is unknown here; the transaction fails instead of waiting forever."""
        if self._pid != os.getpid():
            self._pid = os.getpid()
            if self._in_flight:
                self._in_flight.clear()
                self._failed = self._failed or TransactionError(
                    "this process was forked while the transaction's data files were uploading: it cannot commit "
                    "here (start transactions after the fork)"
                )

    def _reap(self, done: set[Future[None]] | list[Future[None]]) -> None:
        for future in done:
            del self._in_flight[future]
            error = future.exception()
            if error is not None and self._failed is None:
                self._failed = error


os.register_at_fork(after_in_child=_after_fork_in_child)
