"""Spark from the command line: the JVM's start-up chatter, its logging and py4j's tracebacks stay off the
terminal unless ``--debug``; a Ctrl-C stops the session without a word beyond ``interrupted``."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext, suppress
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from txlake.spark.session import SparkSession

PY4J_LOGGERS = ("py4j", "py4j.clientserver", "py4j.java_gateway")
PYSPARK_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")
"""PySpark logs every analysis error as a JSON document with the Java stack trace on these (to stderr)."""


def silence_python_loggers() -> None:
    """py4j logs a traceback per broken connection (one per thread on Ctrl-C); PySpark logs each SQL error.

    Some of it goes through the root logger (``logging.exception``), which would configure itself to print on
    stderr: the root gets a handler that drops records, and txlake's own warnings keep a stderr handler.
    """
    for name in PY4J_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(logging.NullHandler())
        ours = logging.getLogger("txlake")
        if not ours.handlers:
            handler = logging.StreamHandler()
            handler.setLevel(logging.WARNING)
            handler.setFormatter(logging.Formatter("warning: %(message)s"))
            ours.addHandler(handler)
    try:
        from txlake.spark.session import silence_pyspark_loggers  # pyspark is optional
    except ImportError:
        return
    silence_pyspark_loggers(PYSPARK_LOGGERS)


_STREAMS = ((1, "stdout"), (2, "stderr"))


@contextmanager
def jvm_output_discarded() -> Iterator[None]:
    """File descriptors 1 and 2 point at ``/dev/null`` for the block; Python's own output keeps going out.

    A process started inside (the JVM, and the Python workers it forks) keeps ``/dev/null`` as its stdout and
    stderr for good: its logging never reaches the terminal, and it holds no pipe of a caller open after this
    process is gone (``txlake sql ... | head`` ends when txlake does). ``sys.stdout``/``sys.stderr`` write to
    copies of the original descriptors meanwhile, so progress displays keep working.
    """
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    saved = {fd: os.dup(fd) for fd, _ in _STREAMS}
    null = os.open(os.devnull, os.O_WRONLY)
    replaced: dict[str, TextIO] = {}
    try:
        for fd, name in _STREAMS:
            stream = getattr(sys, name)
            if stream is getattr(sys, f"__{name}__") and stream is not None:  # not a test's capture object
                replaced[name] = stream
                copy = os.fdopen(os.dup(saved[fd]), "w", buffering=1, encoding=stream.encoding, errors=stream.errors)
                setattr(sys, name, copy)
            os.dup2(null, fd)
        yield
    finally:
        for name, stream in replaced.items():
            copy = getattr(sys, name)
            copy.flush()
            setattr(sys, name, stream)
            copy.close()
        for fd, _ in _STREAMS:
            os.dup2(saved[fd], fd)
            os.close(saved[fd])
        os.close(null)


started_here = False
"""Whether this process started a JVM (then an interrupted command ends with ``os._exit``, see ``main``)."""


def start_spark(app_name: str, *, debug: bool) -> tuple[SparkSession, bool]:
    """A local Spark session (pyspark imported only here); quiet unless ``debug``. Returns (session, created)."""
    from txlake.spark.session import local_session  # pyspark is optional: only the commands using Spark need it

    if not debug:
        silence_python_loggers()
    global started_here
    with deferred_interrupt() as pending, nullcontext() if debug else jvm_output_discarded():
        session, created = local_session(app_name)
    started_here = started_here or created
    if pending.interrupted:
        raise KeyboardInterrupt  # the JVM is up now: it ends by itself when this process exits
    return session, created


class _Pending:
    interrupted = False


@contextmanager
def deferred_interrupt() -> Iterator[_Pending]:
    """Hold a Ctrl-C back while the JVM starts (SIGINT blocked), and report it after.

    Interrupted while PySpark waits for the new JVM's connection details, the JVM's main thread fails and its
    py4j server thread keeps it running for good; interrupted once the context exists, PySpark's own SIGINT
    handler calls the JVM from inside the handler and can wait forever on the connection the interrupted call
    holds. So the signal stays pending until the session is up (and PySpark's handler replaced); the JVM then
    watches its stdin and exits with this process.
    """
    pending = _Pending()
    if threading.current_thread() is not threading.main_thread():
        yield pending
        return
    previous = signal.getsignal(signal.SIGINT)
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield pending
    finally:
        if signal.SIGINT in signal.sigpending():
            signal.sigwait({signal.SIGINT})  # take the pending Ctrl-C: no handler runs for it
            pending.interrupted = True
        signal.signal(signal.SIGINT, previous)  # PySpark installed its own handler meanwhile
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def stop_spark(session: SparkSession) -> None:
    """Stop ``session``; after a Ctrl-C its py4j connection may already be closed, which is no error here."""
    with suppress(_py4j_error(), OSError):
        session.stop()


def _py4j_error() -> type[Exception]:
    """py4j's error class (py4j comes with pyspark, an optional dependency)."""
    from py4j.protocol import Py4JError  # type: ignore[import-untyped]

    return Py4JError  # type: ignore[no-any-return]


class InterruptWatch:
    """Turns a Ctrl-C during Spark work into a plain :class:`KeyboardInterrupt`, and remembers it.

    The running jobs are cancelled from another thread: a call collecting a job's result waits for the job
    in its ``finally`` even when interrupted, so without the cancellation it would wait for the whole job.
    (PySpark's own handler cancels from inside the signal handler, on the py4j connection the interrupted
    call is still using: that call then fails with a py4j error or waits forever.) The JVM ends by itself
    when this process exits (it watches its stdin), so an interrupted command exits without stopping it.
    """

    def __init__(self, spark: SparkSession | None = None) -> None:
        self.spark = spark
        self.interrupted = False
        self._previous: Any = signal.SIG_DFL
        self._installed = False

    def _cancel_jobs(self) -> None:
        if self.spark is not None:
            with suppress(_py4j_error(), OSError):
                self.spark.sparkContext.cancelAllJobs()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if not self.interrupted:
            threading.Thread(target=self._cancel_jobs, name="txlake-cancel-jobs", daemon=True).start()
        self.interrupted = True
        raise KeyboardInterrupt

    def __enter__(self) -> InterruptWatch:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.getsignal(signal.SIGINT)
            signal.signal(signal.SIGINT, self._handle)
            self._installed = True
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)


class Phases:
    """Wall-clock time of the steps of a command (``--debug`` prints them)."""

    def __init__(self) -> None:
        self.times: list[tuple[str, float]] = []
        self._last = time.perf_counter()

    def done(self, step: str) -> None:
        now = time.perf_counter()
        self.times.append((step, now - self._last))
        self._last = now

    def __str__(self) -> str:
        return ", ".join(f"{step} {seconds:.2f} s" for step, seconds in self.times)
