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
"""Whether this process started (or began starting) a JVM: an interrupted command then ends with ``os._exit``."""


def start_spark(app_name: str, *, debug: bool) -> tuple[SparkSession, bool]:
    """A local Spark session (pyspark imported only here); quiet unless ``debug``. Returns (session, created).

    A Ctrl-C while the JVM starts interrupts at once: the session starts in a thread of its own while this
    one waits, so the ``KeyboardInterrupt`` is raised here and never inside PySpark's start-up (raised there,
    PySpark's clean-up deletes the directory the new JVM is to report its port in, and that JVM then runs for
    good). The JVM being started is stopped; where its process cannot be found, it finishes starting and exits
    once this process has gone (it reads its stdin to the end, which comes when this process exits: see
    ``main``).
    """
    # pyspark is optional: only the commands using Spark need it
    from txlake.spark.session import active_session, local_session

    if not debug:
        silence_python_loggers()
    global started_here
    active = active_session()  # (looked up here: the active session belongs to a thread)
    if active is not None:
        return active, False
    if threading.current_thread() is not threading.main_thread():
        with nullcontext() if debug else jvm_output_discarded():
            session, created = local_session(app_name)
        started_here = started_here or created
        return session, created
    outcome: list[tuple[SparkSession, bool]] = []
    failure: list[BaseException] = []
    done = threading.Event()

    def start() -> None:
        try:
            outcome.append(local_session(app_name))
        except BaseException as exc:  # handed to the waiting thread, which raises it
            failure.append(exc)
        finally:
            done.set()

    had_started = started_here
    started_here = True  # from here on a JVM may be starting
    before = _spark_jvms()
    with nullcontext() if debug else jvm_output_discarded():
        threading.Thread(target=start, name="txlake-spark-start", daemon=True).start()
        try:
            while not done.wait(0.05):  # interruptible: Ctrl-C raises KeyboardInterrupt here
                pass
        except KeyboardInterrupt:
            _stop_jvms(_spark_jvms() - before, done)
            raise
    if failure:
        raise failure[0]
    session, created = outcome[0]
    started_here = had_started or created
    return session, created


_SPARK_SUBMIT = b"org.apache.spark.deploy.SparkSubmit"


def _spark_jvms() -> set[int]:
    """Process ids of the Spark JVMs this process started (Linux ``/proc``; elsewhere none are found)."""
    found: set[int] = set()
    me = os.getpid()
    try:
        entries = [e for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return found
    for entry in entries:
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                parent = int(stat.read().rsplit(b")", 1)[1].split()[1])
            if parent != me:
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                if _SPARK_SUBMIT in cmdline.read():
                    found.add(int(entry))
        except (OSError, ValueError, IndexError):  # gone meanwhile, or not readable: not ours to stop
            continue
    return found


def _stop_jvms(pids: set[int], started: threading.Event) -> None:
    """Stop the JVMs a Ctrl-C interrupted while starting; PySpark's start-up then fails and cleans up after
    itself (the directory the JVM was to report its port in) within a moment, which is waited for.

    SIGTERM lets the JVM run its shutdown hooks (Spark deletes its temporary directories). Without ``/proc``
    nothing is found: the JVM then exits by itself once this process has (see :func:`start_spark`).
    """
    for pid in pids:
        with suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    with suppress(KeyboardInterrupt):  # a second Ctrl-C: stop waiting
        started.wait(1.0 if pids else 0)


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

    The jobs are cancelled again every ``CANCEL_EVERY`` seconds until the watched block has ended: a Ctrl-C just
    before the interrupted call submitted its job (``toArrow`` starts it in a JVM thread, then waits for it in
    its ``finally``) would otherwise leave that job running, and the command waiting for it.
    """

    CANCEL_EVERY = 0.25

    def __init__(self, spark: SparkSession | None = None) -> None:
        self.spark = spark
        self.interrupted = False
        self._previous: Any = signal.SIG_DFL
        self._installed = False
        self._ended = threading.Event()
        self._canceller: threading.Thread | None = None

    def _cancel_jobs(self) -> None:
        if self.spark is None:
            return
        while True:
            with suppress(_py4j_error(), OSError):
                self.spark.sparkContext.cancelAllJobs()
            if self._ended.wait(self.CANCEL_EVERY):
                return

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if not self.interrupted:
            self._canceller = threading.Thread(target=self._cancel_jobs, name="txlake-cancel-jobs", daemon=True)
            self._canceller.start()
        self.interrupted = True
        raise KeyboardInterrupt

    def __enter__(self) -> InterruptWatch:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.getsignal(signal.SIGINT)
            signal.signal(signal.SIGINT, self._handle)
            self._installed = True
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._ended.set()
        if self._canceller is not None:  # no cancellation in flight once the block has ended
            with suppress(KeyboardInterrupt):
                self._canceller.join(timeout=5.0)
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
