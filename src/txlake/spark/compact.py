"""``optimize`` on Spark: the compacted files read, optionally Z-ordered, and written again by one Spark job.

Bin-packing repartitions the rows into as many tasks as the Arrow plan has bins (by partition columns, so a
partition's rows stay together) and lets each task write its files. Z-ordering follows Delta's OPTIMIZE ZORDER
BY: each column's values are mapped to range ids by quantile boundaries of a sample (computed on the driver),
the ids' bits are interleaved into one key, and the rows are range-partitioned and sorted by (partition columns,
key). Every task then writes rows that are close on the curve, so its files have narrow min/max ranges.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from txlake.spark.dml import FrameEngine, quote
from txlake.txn.engine import ScanSpec, WriteOutcome, WriteSpec
from txlake.txn.staging import interleave

ZORDER_KEY = "__txlake_zorder_key"
SAMPLE_ROWS = 100_000
"""Rows sampled on the driver to find each Z-order column's range boundaries."""


def compact(
    engine: FrameEngine, scan: ScanSpec, target: WriteSpec, *, files: int, zorder_by: Sequence[str] = ()
) -> WriteOutcome:
    """Rewrite ``scan.files`` as about ``files`` files of ``target`` (see the module docstring)."""
    table = engine.read(scan)
    tasks = max(1, files)
    # positional names while Spark plans: a column named "a.b" would be taken for a nested field
    names = list(table.columns)
    frame = table.select(*[F.col(quote(c)).alias(f"_c{i}") for i, c in enumerate(names)])
    position = {c: f"_c{i}" for i, c in enumerate(names)}
    parts = [F.col(position[c]) for c in scan.table.partition_columns]
    if not zorder_by and not parts:
        frame = frame.repartition(tasks)
    elif not zorder_by:
        # ranges of (partition, row hash): a partition's rows spread over as many tasks as its bins, so every
        # file is about the target size (a hash of the partition columns alone would put a whole partition,
        # however large, into one task and one file)
        spread = F.xxhash64(*[F.col(position[c]) for c in names])
        frame = frame.repartitionByRange(tasks, *parts, spread)
    else:
        rows = sum(a.live_records or 0 for a in scan.files)
        boundaries = _boundaries(frame, [position[c] for c in zorder_by], rows)
        bits = min(16, 62 // len(zorder_by))
        columns = [position[c] for c in zorder_by]

        def with_key(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for batch in batches:
                key = zorder_key([batch.column(c) for c in columns], boundaries, bits)
                yield pa.RecordBatch.from_arrays([*batch.columns, key], names=[*batch.schema.names, ZORDER_KEY])

        schema = StructType([*frame.schema.fields, StructField(ZORDER_KEY, LongType(), False)])
        order = [*parts, F.col(ZORDER_KEY)]
        frame = frame.mapInArrow(with_key, schema).repartitionByRange(tasks, *order).sortWithinPartitions(*order)
    restored = frame.select(*[F.col(position[c]).alias(c) for c in names])
    return engine.write(target, restored)


def _boundaries(frame: DataFrame, columns: Sequence[str], rows: int) -> list[pa.Array]:
    """Sorted distinct values of a sample of each column (nulls left out): the range ids' boundaries."""
    sample = frame.select(*[F.col(c) for c in columns])  # (positional names: no quoting needed)
    if rows > SAMPLE_ROWS:
        sample = sample.sample(withReplacement=False, fraction=min(1.0, 1.2 * SAMPLE_ROWS / rows), seed=17)
    data = sample.toArrow()
    return [pc.unique(data.column(c).drop_null()).sort() for c in columns]


def zorder_key(values: Sequence[pa.Array | pa.ChunkedArray], boundaries: Sequence[pa.Array], bits: int) -> pa.Array:
    """The Z-order key of each row: per column, the number of boundaries below the value (nulls above every
    value), scaled to ``bits`` bits; the bits interleaved, most significant first, into a non-negative int64."""
    top = (1 << bits) - 1
    rows = len(values[0])
    ranks: list[np.ndarray] = []
    for column, bounds in zip(values, boundaries, strict=True):
        nulls = np.asarray(pc.is_null(column, nan_is_null=False))
        rank = np.zeros(rows, dtype=np.float64)
        if len(bounds):
            filled = pc.fill_null(column, bounds[0]) if nulls.any() else column
            present = _numpy(filled)
            rank = np.searchsorted(_numpy(bounds), present, side="left").astype(np.float64)
            rank = rank / max(len(bounds), 1) * (top - 1)
        rank[nulls] = top  # nulls last, as in the Arrow path
        ranks.append(rank.astype(np.uint64))
    return pa.array(interleave(ranks, bits).astype(np.int64), type=pa.int64())


def _numpy(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    return np.asarray(array.to_numpy(zero_copy_only=False))
