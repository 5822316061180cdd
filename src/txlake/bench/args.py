"""argparse value types shared by the benchmark workloads."""

from __future__ import annotations

import argparse


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
