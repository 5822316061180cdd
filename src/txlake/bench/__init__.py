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


# Workload modules import only txlake.bench.report and the library, never this package's names.
from txlake.bench import commit as _commit  # noqa: E402
from txlake.bench import deletes as _deletes  # noqa: E402
from txlake.bench import lifecycle as _lifecycle  # noqa: E402
from txlake.bench import model_cli as _model  # noqa: E402
from txlake.bench import snapshot as _snapshot  # noqa: E402
from txlake.bench import spark as _spark  # noqa: E402
from txlake.bench import ycsb as _ycsb  # noqa: E402

register(_commit.NAME, Workload(_commit.HELP, _commit.add_arguments, _commit.run))
register(_deletes.NAME, Workload(_deletes.HELP, _deletes.add_arguments, _deletes.run))
register(_lifecycle.NAME, Workload(_lifecycle.HELP, _lifecycle.add_arguments, _lifecycle.run))
register(_model.NAME, Workload(_model.HELP, _model.add_arguments, _model.run))
register(_snapshot.NAME, Workload(_snapshot.HELP, _snapshot.add_arguments, _snapshot.run))
register(_spark.NAME, Workload(_spark.HELP, _spark.add_arguments, _spark.run))
register(_ycsb.NAME, Workload(_ycsb.HELP, _ycsb.add_arguments, _ycsb.run))
