"""argparse value types shared by the benchmark workloads."""

from __future__ import annotations

import argparse

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
