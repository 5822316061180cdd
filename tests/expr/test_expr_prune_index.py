"""Property: pruning a file list at once (:class:`StatsIndex`) gives exactly per-file ``may_match``."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.expr.test_expr_pruning_property import FULL_SCHEMA, PARTITIONED, predicates, tables
from txlake.delta.actions import Add
from txlake.delta.files import compute_stats, serialize_partition_value
from txlake.expr import FileStats, parse_predicate
from txlake.expr.prune import StatsIndex


def _add(i: int, table: pa.Table, partition: int | None, with_stats: bool) -> Add:
    stats = compute_stats(table) if with_stats else f'{{"numRecords": {table.num_rows}}}'
    return Add(
        path=f"f{i}.parquet",
        partition_values={"p": serialize_partition_value(partition)},
        size=1,
        modification_time=0,
        stats=stats,
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(files=st.lists(st.tuples(tables(), st.booleans()), min_size=1, max_size=6), sql=predicates())
def test_index_prunes_exactly_like_may_match(files: list[tuple[tuple[pa.Table, int | None], bool]], sql: str) -> None:
    adds = [_add(i, table, partition, with_stats) for i, ((table, partition), with_stats) in enumerate(files)]
    bound = parse_predicate(sql).bind(FULL_SCHEMA)
    expected = [a for a in adds if bound.may_match(FileStats.from_add(a, FULL_SCHEMA, PARTITIONED))]
    assert StatsIndex(adds, FULL_SCHEMA, PARTITIONED).matching(bound.node) == expected, sql


def test_empty_files_and_empty_lists() -> None:
    empty = Add(path="e.parquet", partition_values={"p": "1"}, size=1, modification_time=0, stats='{"numRecords": 0}')
    bound = parse_predicate("p = 1 OR p IS NULL").bind(FULL_SCHEMA)
    assert StatsIndex([empty], FULL_SCHEMA, PARTITIONED).matching(bound.node) == []
    assert StatsIndex([], FULL_SCHEMA, PARTITIONED).matching(bound.node) == []
