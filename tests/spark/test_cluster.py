"""txlake on a real Spark standalone cluster: a master and one worker started here, a driver in a subprocess.

The master and the worker come from pyspark's own launcher (``$SPARK_HOME/bin/spark-class``, SPARK_HOME being
the pyspark package), listen on free loopback ports only, and run in their own process groups; they are
stopped by those groups' ids and checked to be gone. The driver (``cluster_job.py``) runs in a separate
process because this one already holds the suites' ``local[2]`` SparkContext.

Proof that tasks ran in executor processes: every row written carries the process that computed it, found from
inside the task (the Python worker's ancestor JVM and that JVM's ``--executor-id``), and the read-back tasks
report the same. The test requires those JVMs to be children of the worker started here, and every task
process to differ from the driver's processes.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyspark
import pytest

LOOPBACK = "127.0.0.1"
JOB = Path(__file__).with_name("cluster_job.py")
START_TIMEOUT = 90.0
JOB_TIMEOUT = 240.0
STOP_GRACE = 15.0
QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""JVM options for short-lived test JVMs on small machines: C1 only and one GC thread start up much faster."""
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback never through a proxy
_PR_SET_PDEATHSIG = 1


def _java_available() -> bool:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.access(Path(java_home) / "bin" / "java", os.X_OK):
        return True
    return shutil.which("java") is not None


pytestmark = [
    pytest.mark.skipif(not _java_available(), reason="Spark needs Java (no JAVA_HOME/bin/java or java on PATH)"),
    pytest.mark.timeout(420),
]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the kernel kill the daemon if this (main) thread dies without cleaning up."""
    libc = ctypes.util.find_library("c")
    if not sys.platform.startswith("linux") or libc is None:
        return None
    if threading.current_thread() is not threading.main_thread():
        return None  # the signal would follow the thread, not the process
    prctl = ctypes.CDLL(libc, use_errno=True).prctl

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)

    return hook


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def stop_group(proc: subprocess.Popen[bytes], grace: float = STOP_GRACE) -> None:
    """SIGTERM the process group led by ``proc`` (its own session), SIGKILL after ``grace``; wait until empty."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, grace)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.2)
            if proc.poll() is not None and not group_alive(proc.pid):
                return
    raise AssertionError(f"process group {proc.pid} still has members after SIGKILL")


@dataclass
class SparkDaemon:
    """A master or worker JVM started by ``spark-class`` as the leader of its own process group."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log_tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    def check_running(self) -> None:
        if self.proc.poll() is not None:
            raise RuntimeError(f"the Spark {self.name} exited with {self.proc.returncode}:\n{self.log_tail()}")


@dataclass
class StandaloneCluster:
    """A Spark standalone master and one worker (1 core, 1 GiB) on loopback, each in its own process group."""

    directory: Path
    master_port: int = field(default_factory=free_port)
    master_ui_port: int = field(default_factory=free_port)
    worker_ui_port: int = field(default_factory=free_port)
    daemons: list[SparkDaemon] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"spark://{LOOPBACK}:{self.master_port}"

    @property
    def work_dir(self) -> Path:
        return self.directory / "work"

    @staticmethod
    def env() -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            SPARK_HOME=os.path.dirname(pyspark.__file__),
            SPARK_LOCAL_IP=LOOPBACK,
            PYSPARK_PYTHON=sys.executable,
            SPARK_DAEMON_MEMORY="512m",
            SPARK_DAEMON_JAVA_OPTS=QUICK_JVM,
            # no REST submission server: it would take the fixed port 6066
            SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",
        )
        return env

    def _spawn(self, name: str, main: str, *args: str) -> SparkDaemon:
        spark_class = Path(os.path.dirname(pyspark.__file__)) / "bin" / "spark-class"
        log = self.directory / f"{name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [str(spark_class), main, *args],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env(),
                cwd=self.directory,
                start_new_session=True,  # its own process group: stopped by its id, never by name
                preexec_fn=_die_with_parent(),
            )
        daemon = SparkDaemon(name, proc, log)
        self.daemons.append(daemon)
        return daemon

    def master_state(self) -> dict[str, Any] | None:
        """The master's JSON status page (``None`` while it does not answer)."""
        return _get_json(f"http://{LOOPBACK}:{self.master_ui_port}/json/")

    def worker_state(self) -> dict[str, Any] | None:
        """The worker's JSON status page: the executors it runs and has run."""
        return _get_json(f"http://{LOOPBACK}:{self.worker_ui_port}/json/")

    def _wait(self, what: str, daemon: SparkDaemon, ready: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            daemon.check_running()
            state = self.master_state()
            if state is not None and ready(state):
                return state
            time.sleep(0.25)
        raise RuntimeError(f"timed out waiting for {what}:\n{daemon.log_tail()}")

    def start(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        master = self._spawn(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host", LOOPBACK,
            "--port", str(self.master_port),
            "--webui-port", str(self.master_ui_port),
        )  # fmt: skip
        self._wait("the master", master, lambda s: s.get("status") == "ALIVE")
        worker = self._spawn(
            "worker",
            "org.apache.spark.deploy.worker.Worker",
            self.url,
            "--host", LOOPBACK,
            "--cores", "1",
            "--memory", "1g",
            "--webui-port", str(self.worker_ui_port),
            "--work-dir", str(self.work_dir),
        )  # fmt: skip
        self._wait("the worker to register", worker, lambda s: _alive_workers(s) == 1)

    @property
    def master(self) -> SparkDaemon:
        return self.daemons[0]

    @property
    def worker(self) -> SparkDaemon:
        return self.daemons[1]

    def stop(self) -> None:
        """Stop the worker (with its executors), then the master, each by its process group."""
        while self.daemons:
            stop_group(self.daemons.pop().proc)


def _get_json(url: str) -> dict[str, Any] | None:
    try:
        with _DIRECT.open(url, timeout=5) as response:
            doc: dict[str, Any] = json.loads(response.read())
    except (OSError, ValueError):
        return None
    return doc


def _alive_workers(state: dict[str, Any]) -> int:
    return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")


def pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_gone(pids: set[int], timeout: float = STOP_GRACE) -> set[int]:
    """The processes among ``pids`` still alive after waiting up to ``timeout`` seconds for them to exit."""
    deadline = time.monotonic() + timeout
    alive = {p for p in pids if pid_exists(p)}
    while alive and time.monotonic() < deadline:
        time.sleep(0.2)
        alive = {p for p in alive if pid_exists(p)}
    return alive


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[StandaloneCluster]:
    cluster = StandaloneCluster(tmp_path / "spark")
    cluster.directory.mkdir()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def run_driver(cluster: StandaloneCluster, lake_uri: str) -> dict[str, Any]:
    """Run ``cluster_job.py`` against the cluster (own process group, removed afterwards); its JSON result."""
    proc = subprocess.Popen(
        [sys.executable, str(JOB), "--master", cluster.url, "--lake", lake_uri, "--java-options", QUICK_JVM],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cluster.env(),
        cwd=cluster.directory,
        start_new_session=True,  # the driver JVM that pyspark launches joins this group
        preexec_fn=_die_with_parent(),
    )
    try:
        out, err = proc.communicate(timeout=JOB_TIMEOUT)
    finally:
        stop_group(proc)
    assert proc.returncode == 0, f"driver failed ({proc.returncode}):\n{err.decode(errors='replace')[-6000:]}"
    doc: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return doc


def test_transaction_on_a_standalone_cluster(cluster: StandaloneCluster, tmp_path: Path) -> None:
    lake_uri = (tmp_path / "lake").as_uri()

    doc = run_driver(cluster, lake_uri)

    # the session ran on our master; our worker launched executors for it (as the worker itself reports)
    assert doc["master"] == cluster.url
    worker_state = cluster.worker_state()
    assert worker_state is not None
    executors = {
        str(e["id"])
        for e in worker_state["executors"] + worker_state["finishedexecutors"]
        if e["appid"] == doc["driver"]["app_id"]
    }
    assert executors
    # the multi-table transaction: DataFrame appends to two tables and tx.read, one global commit
    rows = doc["rows"]
    assert doc["appended"] == rows
    assert doc["commit"]["version"] == doc["lake_version_before"] + 1
    assert len(doc["commit"]["table_versions"]) == 2
    assert doc["in_tx_count"] == rows // 2  # amount = id * 7 % 100 >= 50 for half of the ids
    # read back through the txlake Python data source (not Spark's Parquet reader), on the cluster
    assert "BatchScan txlake" in doc["python_reader_plan"] and "(Python)" in doc["python_reader_plan"]
    assert doc["orders_count"] == doc["arrow_count"] == rows
    assert doc["orders_amount"] == doc["expected_amount"]
    # shop.totals: per executor that computed orders, the count and sum tx.read saw inside the transaction
    assert doc["totals"] == doc["expected_totals"]
    # who wrote the files: Spark's Parquet writer by default (local lakehouse), moved into the table by the
    # driver; the txlake data source when asked, its job commit in a Python worker, not in the driver program
    written = doc["spark_written"]
    assert written["shop.orders"] and all(written["shop.orders"])
    assert written["shop.orders_ds"] and not any(written["shop.orders_ds"])
    assert doc["native_committer_pid"] == doc["driver"]["pid"]
    assert doc["ds_committer_pid"] != doc["driver"]["pid"]
    assert doc["ds_appended"] == doc["ds_count"] == rows
    assert doc["ds_amount"] == doc["expected_amount"]
    assert {t["partition"] for t in doc["ds_writer_tasks"]} == set(range(doc["partitions"]))

    # every task, writing or reading, ran in a Python worker under an executor JVM of our worker
    driver = doc["driver"]
    tasks = doc["writer_tasks"] + doc["ds_writer_tasks"] + doc["reader_tasks"]
    assert {t["partition"] for t in doc["writer_tasks"]} == set(range(doc["partitions"]))
    assert doc["reader_tasks"]
    for task in tasks:
        assert task["executor_id"] in executors
        assert task["executor_id"] != "driver"
        assert task["jvm_parent_pid"] == cluster.worker.pid
        assert task["jvm_pid"] not in (driver["pid"], driver["jvm_pid"], cluster.worker.pid, cluster.master.pid)
        assert task["task_pid"] not in (driver["pid"], driver["jvm_pid"])
    executor_jvms = {t["jvm_pid"] for t in tasks}
    task_pids = {t["task_pid"] for t in tasks}

    worker_pid, master_pid = cluster.worker.pid, cluster.master.pid
    cluster.stop()

    # pyspark's Python daemons lead their own process groups; they exit when their executor JVM is gone
    assert wait_gone({worker_pid, master_pid, *executor_jvms, *task_pids}) == set()
    assert not group_alive(worker_pid) and not group_alive(master_pid)
