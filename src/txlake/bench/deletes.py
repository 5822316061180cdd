"""``txlake bench deletes``: a small DELETE (1% of the rows, spread over every file) of a large table, with
deletion vectors (merge-on-read) against copy-on-write, and a full read after it -- both in the same run.

Two lakehouse tables get the same ``--rows`` rows (files of a million rows): one plain, one with
``delta.enableDeletionVectors=true``. Each sample deletes ``id % 100 = k`` (a new 1% each time, k = 0, 1, ...)
in one transaction on each table, then reads each table whole (``read_arrow``; after one untimed read of each,
alternating which goes first). Copy-on-write rewrites every
file; merge-on-read writes one DV file and an add per data file. The baseline is copy-on-write; both sides
must end with the same rows, and delta-rs must count the same rows in the DV table.
"""

from __future__ import annotations

import argparse
import gc
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

import txlake
from txlake.bench.args import positive
from txlake.bench.report import BenchReport, BenchRow, run_against_delta_rs
from txlake.cli.output import console_for

NAME = "deletes"
HELP = "DELETE of 1% of a large table's rows: deletion vectors (merge-on-read) vs copy-on-write, then a full read"
BASELINE = "copy-on-write"
DEFAULT_ROWS = 10_000_000
MODULUS = 100
SCHEMA = pa.schema([("id", pa.int64()), ("amount", pa.float64()), ("note", pa.string())])


@dataclass(frozen=True, slots=True)
class DeletesOptions:
    rows: int = DEFAULT_ROWS
    repeat: int = 3


def _data(rows: int) -> pa.Table:
    ids = np.arange(rows, dtype=np.int64)
    rng = np.random.default_rng(7)
    notes = pa.array([f"note {i % 1000}" for i in range(1000)]).take(pa.array(ids % 1000))
    return pa.table({"id": ids, "amount": rng.random(rows), "note": notes}, schema=SCHEMA)


def _timed(fn: Callable[[], object]) -> tuple[float, object]:
    gc.collect()
    start = time.perf_counter()
    value = fn()
    return (time.perf_counter() - start) * 1000, value


def _delete(lake: txlake.Lakehouse, name: str, k: int) -> int:
    with lake.transaction() as tx:
        return tx.delete(name, where=f"id % {MODULUS} = {k}")


def run_deletes_bench(options: DeletesOptions) -> BenchReport:
    import deltalake

    log = console_for(stderr=True).log
    tmp = Path(tempfile.mkdtemp(prefix="txlake-bench-deletes-"))
    try:
        lake = txlake.connect(tmp.as_uri())
        lake.create_table("bench.cow", SCHEMA)
        lake.create_table("bench.dv", SCHEMA, properties={"delta.enableDeletionVectors": "true"})
        data = _data(options.rows)
        started = time.perf_counter()
        for name in ("bench.cow", "bench.dv"):
            with lake.transaction() as tx:
                tx.append(name, data)
        files = len(lake.snapshot().delta_snapshot("bench.dv").files)
        log(f"built 2 x {options.rows} rows ({files} files each) in {time.perf_counter() - started:.1f} s")
        delete_dv: list[float] = []
        delete_cow: list[float] = []
        read_dv: list[float] = []
        read_cow: list[float] = []
        left = options.rows
        for k in range(options.repeat):
            ms, deleted = _timed(lambda k=k: _delete(lake, "bench.dv", k))  # type: ignore[misc]
            delete_dv.append(ms)
            ms, deleted_cow = _timed(lambda k=k: _delete(lake, "bench.cow", k))  # type: ignore[misc]
            delete_cow.append(ms)
            if deleted != deleted_cow:
                raise RuntimeError(f"DELETE {k}: deletion vectors deleted {deleted} rows, copy-on-write {deleted_cow}")
            left -= int(deleted)  # type: ignore[call-overload]
            for name in ("bench.dv", "bench.cow"):  # untimed: the first read after a write pays one-off costs
                lake.read_arrow(name)
            order = ("bench.dv", "bench.cow") if k % 2 == 0 else ("bench.cow", "bench.dv")
            counts: dict[str, object] = {}
            for name in order:
                ms, counts[name] = _timed(lambda name=name: lake.read_arrow(name).num_rows)  # type: ignore[misc]
                (read_dv if name == "bench.dv" else read_cow).append(ms)
            dv_rows, cow_rows = counts["bench.dv"], counts["bench.cow"]
            if dv_rows != left or cow_rows != left:
                raise RuntimeError(
                    f"after DELETE {k}: {dv_rows} rows with DVs, {cow_rows} copy-on-write, {left} expected"
                )
            log(f"delete {k}: {deleted} rows, {delete_dv[-1]:.0f} ms with DVs, {delete_cow[-1]:.0f} ms copy-on-write")
        table = deltalake.DeltaTable(lake.table_location("bench.dv"))
        counted = deltalake.QueryBuilder().register("t", table).execute("SELECT count(*) AS n FROM t").read_all()
        if counted["n"][0].as_py() != left:
            raise RuntimeError(f"delta-rs counts {counted['n'][0].as_py()} rows in the DV table, {left} expected")
        dv_bytes = sum(p.stat().st_size for p in tmp.rglob("deletion_vector_*.bin"))
        params = {"rows": options.rows, "files": files, "deleted_per_sample": options.rows // MODULUS}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return BenchReport(
        name=NAME,
        metric="time (median)",
        unit="ms",
        baseline=BASELINE,
        rows=(
            BenchRow.from_samples(
                "DELETE 1% (commit included)", delete_dv, delete_cow, {**params, "dv_bytes": dv_bytes}
            ),
            BenchRow.from_samples("full read after it", read_dv, read_cow, params),
        ),
        parameters={
            "rows": options.rows,
            "repeat": options.repeat,
            "storage": "file",
            "predicate": f"id % {MODULUS} = k, k = 0 .. repeat-1 (a new 1% of the rows each sample)",
            "candidate": "txlake DELETE with delta.enableDeletionVectors=true (merge-on-read)",
            "baseline": "txlake DELETE on a plain table (copy-on-write: every touched file rewritten)",
            "check": "same rows on both sides after every sample; delta-rs (DataFusion) counts the DV table's rows",
        },
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=positive, default=DEFAULT_ROWS, help=f"rows per table (default {DEFAULT_ROWS})")
    parser.add_argument("--repeat", type=positive, default=3, help="DELETE samples per side (default 3)")


def run(args: argparse.Namespace) -> int:
    options = DeletesOptions(rows=args.rows, repeat=args.repeat)
    return run_against_delta_rs(NAME, args.out, lambda: run_deletes_bench(options))
