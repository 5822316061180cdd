"""Benchmarks behind ``txlake bench``: each measures a baseline in the same run and reports ratios."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Workload:
    """A ``txlake bench <name>`` workload."""

    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


WORKLOADS: dict[str, Workload] = {}


def register(name: str, workload: Workload) -> None:
    WORKLOADS[name] = workload
