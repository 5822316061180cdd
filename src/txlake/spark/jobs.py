"""The Spark jobs of one DataFrame write, found by a job tag, and the wait until every task attempt of them ended.

When a task fails for good, Spark fails the job and reports it to the driver at once; the job's other task
attempts are only asked to stop. They run on meanwhile: a Python data source writer keeps writing files until
its worker returns or Spark kills it (``spark.python.task.killTimeout`` after the kill request), Spark's
Parquet writer keeps writing below the job's output directory; an attempt may even begin writing after the
failure has been reported. After a successful job, speculative attempts that lost are stopped the same way.
Whoever deletes a write's leftovers therefore first waits until Spark has seen each attempt of the job end:
Spark ends an attempt that runs a Python worker only once the worker returned or was killed, so no attempt
writes afterwards.

Jobs are found by a job tag (:func:`awaited_jobs`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark import SparkContext

_log = logging.getLogger(__name__)

ATTEMPTS_END_TIMEOUT = 60.0
"""Seconds to wait for the attempts of a finished job to end before cleaning up regardless (logged)."""
JOB_VISIBLE_TIMEOUT = 2.0
"""Seconds to wait for Spark's status store to show a tagged job at all (none ran if none shows by then)."""


def job_tag(write_id: str) -> str:
    """The job tag of a write's jobs."""
    return f"txlake-write-{write_id}"


@contextmanager
def awaited_jobs(sc: SparkContext, tag: str) -> Iterator[None]:
    """Tag the jobs this thread starts in the block; when it ends, wait until each task attempt of them ended.

    The tag adds to the thread's job group and tags, which stay as they were. The wait happens whether the
    block returns or raises an ``Exception``; an interrupt or a crash (other ``BaseException``) is not held up.
    """
    sc.addJobTag(tag)
    try:
        yield
    except Exception:
        wait_until_ended(sc, tag)
        raise
    else:
        wait_until_ended(sc, tag)
    finally:
        sc.removeJobTag(tag)


def job_ids(sc: SparkContext, tag: str) -> list[int]:
    """Every job Spark's status store knows with ``tag`` (running, failed or succeeded).

    PySpark's ``StatusTracker`` has no ``getJobIdsForTag``; Spark's own ``SparkStatusTracker`` has (public since
    Spark 3.5), so it is called through the context's JVM peer.
    """
    return [int(j) for j in sc._jsc.sc().statusTracker().getJobIdsForTag(tag)]


def attempts_running(sc: SparkContext, ids: list[int]) -> int | None:
    """How many task attempts of the jobs ``ids`` are still running (``None``: a job still shows as running).

    The status store is fed asynchronously by Spark's listener bus: a job that has ended may still show as
    running for a moment. Once it shows ended, its stages' counts include every attempt that was running when
    it ended, and each attempt is subtracted when it ends.
    """
    tracker = sc.statusTracker()
    running = 0
    for job in ids:
        info = tracker.getJobInfo(job)
        if info is None:
            continue  # no longer retained: long ended
        if info.status == "RUNNING":
            return None
        for stage in info.stageIds:
            stage_info = tracker.getStageInfo(int(stage))
            running += stage_info.numActiveTasks if stage_info is not None else 0
    return running


def wait_until_ended(
    sc: SparkContext,
    tag: str,
    *,
    timeout: float = ATTEMPTS_END_TIMEOUT,
    visible_timeout: float = JOB_VISIBLE_TIMEOUT,
) -> bool:
    """Wait until every task attempt of the (finished) jobs tagged ``tag`` has ended; ``False`` on timeout.

    Call it after the action that ran the jobs returned or raised. If no job with the tag shows within
    ``visible_timeout`` seconds, none ran (the action failed before starting one).
    """
    start = time.monotonic()
    delay = 0.005
    while True:
        elapsed = time.monotonic() - start
        ids = job_ids(sc, tag)
        if not ids and elapsed > visible_timeout:
            return True
        if ids and attempts_running(sc, ids) == 0:
            return True
        if elapsed > timeout:
            _log.warning("txlake: task attempts of Spark jobs %s (tag %s) still run after %.0fs", ids, tag, elapsed)
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.2)
