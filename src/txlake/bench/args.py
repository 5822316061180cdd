"""argparse value types shared by the benchmark workloads, and the latency they may add to requests."""

from __future__ import annotations

import argparse
import functools
import sys
import time
from dataclasses import dataclass

from txlake.storage import FaultInjector, FaultRule
from txlake.storage.counters import REQUEST_KINDS, RequestKind

MAX_LATENCY_MS = 60_000.0


def key_value(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` -> (key, value)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:  # also rejects NaN
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def latency_ms(text: str) -> float:
    """Milliseconds of added latency: a number from 0 to 60,000."""
    value = float(text)
    if not 0 <= value <= MAX_LATENCY_MS:  # also rejects NaN and infinity
        raise argparse.ArgumentTypeError(f"expected milliseconds from 0 to {MAX_LATENCY_MS:,.0f}, got {text!r}")
    return value


@dataclass(frozen=True, slots=True)
class AddedLatency:
    """Milliseconds a txlake request waits before it goes out: ``write_ms`` for PUT and DELETE, ``read_ms`` for
    GET, HEAD and LIST. It emulates a remote object store's round trips on a local one (S3 answers a PUT in
    20-50 ms, a GET in 10-20 ms). Each request waits in its own thread, so concurrent requests overlap as they
    would on the network. delta-rs issues its requests from Rust, out of reach: its baselines are not delayed."""

    write_ms: float
    read_ms: float

    def __post_init__(self) -> None:
        if not (0 <= self.write_ms <= MAX_LATENCY_MS and 0 <= self.read_ms <= MAX_LATENCY_MS):  # NaN fails too
            raise ValueError(
                f"added latency must be 0 to {MAX_LATENCY_MS:,.0f} ms, got {self.write_ms}, {self.read_ms}"
            )

    @property
    def any(self) -> bool:
        return self.write_ms > 0 or self.read_ms > 0

    def ms(self, kind: RequestKind) -> float:
        return self.write_ms if kind in ("PUT", "DELETE") else self.read_ms

    def install(self, faults: FaultInjector) -> None:
        """Delay every request that goes through ``faults`` (a store's injector, shared with its child stores):
        one hook rule per request kind, firing on every request."""
        for kind in REQUEST_KINDS:
            if ms := self.ms(kind):
                faults.add(FaultRule(kind, 1, "hook", times=sys.maxsize, hook=functools.partial(time.sleep, ms / 1000)))

    def describe(self) -> str:
        return f"{self.write_ms:g} ms per txlake PUT/DELETE, {self.read_ms:g} ms per GET/HEAD/LIST (delta-rs: none)"


def add_latency_option(parser: argparse.ArgumentParser) -> None:
    """``--added-latency WRITE_MS READ_MS``."""
    parser.add_argument(
        "--added-latency",
        type=latency_ms,
        nargs=2,
        metavar=("WRITE_MS", "READ_MS"),
        help="delay every txlake PUT/DELETE by WRITE_MS and GET/HEAD/LIST by READ_MS, emulating a remote object "
        "store (S3: 20 10); delta-rs is not delayed, so its ratios are not comparable",
    )


def add_s3_options(parser: argparse.ArgumentParser, *, both: bool = False) -> None:
    """``--s3-endpoint``/``--s3-bucket``/``--storage-option``: an existing S3 server instead of SeaweedFS
    (``both``: the options reach delta-rs, the baseline, too)."""
    parser.add_argument(
        "--s3-endpoint", default=None, help="use this S3 server instead of starting SeaweedFS, e.g. http://host:8333"
    )
    parser.add_argument(
        "--s3-bucket", default="txlake-bench", help="existing bucket at --s3-endpoint (a fresh prefix is used)"
    )
    parser.add_argument(
        "--storage-option",
        type=key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"option for --s3-endpoint{', both systems' if both else ''}, e.g. AWS_ACCESS_KEY_ID=... (repeatable)",
    )
