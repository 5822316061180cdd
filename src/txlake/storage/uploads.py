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
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from txlake.storage.store import ObjectStore

UPLOAD_THREADS = 8
"""Threads of a lakehouse's upload pool, shared by its transactions."""
MAX_IN_FLIGHT = 16
"""Uploads of one transaction in flight at most; the next statement's PUT waits for a slot."""
MAX_IN_FLIGHT_BYTES = 256 * 1024 * 1024
"""Bytes of one transaction's uploads held in memory at most (a single larger file still goes, alone)."""


class UploadPool:
    """A lakehouse's upload threads, started on first use (a client that never writes starts none), and again
    in a forked child (which inherits the pool but not its threads)."""

    def __init__(self, threads: int = UPLOAD_THREADS) -> None:
        self._threads = threads
        self._pool: ThreadPoolExecutor | None = None
        self._pid = 0
        self._lock = threading.Lock()

    def submit(self, fn: Callable[[], None]) -> Future[None]:
        with self._lock:
            if self._pool is None or self._pid != os.getpid():
                self._pool = ThreadPoolExecutor(max_workers=self._threads, thread_name_prefix="txlake-upload")
                self._pid = os.getpid()
            return self._pool.submit(fn)


class Uploads:
    """The data-file PUTs of one transaction in flight, and the first that failed.

    Not thread-safe: one transaction's statements run one after the other in its caller's thread.
    """

    def __init__(
        self, pool: UploadPool, *, max_in_flight: int = MAX_IN_FLIGHT, max_bytes: int = MAX_IN_FLIGHT_BYTES
    ) -> None:
        self._pool = pool
        self._max_in_flight = max_in_flight
        self._max_bytes = max_bytes
        self._in_flight: dict[Future[None], int] = {}  # upload -> its payload's size
        self._failed: BaseException | None = None

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
        self._in_flight[self._pool.submit(lambda: store.put(key, payload))] = len(payload)

    def check(self) -> None:
        """Raise the error of an upload that failed (without waiting for those in flight)."""
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
        if self._in_flight:
            self._reap(wait(self._in_flight).done)

    @property
    def pending(self) -> int:
        """Uploads not known to have ended."""
        return len(self._in_flight)

    def _reap(self, done: set[Future[None]] | list[Future[None]]) -> None:
        for future in done:
            del self._in_flight[future]
            error = future.exception()
            if error is not None and self._failed is None:
                self._failed = error
