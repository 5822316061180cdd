"""Row-level DELETE / UPDATE / MERGE on Arrow tables."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest

from txlake.engine.arrow_dml import MergeResult, conform_column, delete_rows, merge_rows, update_rows
from txlake.errors import MergeCardinalityError, PredicateError, SchemaMismatchError, TxlakeError
from txlake.expr import parse_expression, parse_predicate

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int32(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("balance", pa.decimal128(10, 2)),
        pa.field("n", pa.int64()),
    ],
    metadata={b"origin": b"test"},
)


def accounts() -> pa.Table:
    return pa.table(
        {
            "id": [1, 2, 3, 4],
            "name": ["ann", "bob", None, "dan"],
            "balance": [Decimal("10.00"), Decimal("20.50"), Decimal("0.00"), None],
            "n": [1, None, 3, 0],
        },
        schema=SCHEMA,
    )


# ---------------------------------------------------------------------------------------------- delete


def test_delete_keeps_rows_where_condition_is_null() -> None:
    kept, deleted = delete_rows(accounts(), parse_predicate("name < 'c'").bind(SCHEMA))
    assert deleted == 2
    assert kept.column("id").to_pylist() == [3, 4]
    assert kept.schema == SCHEMA


def test_delete_without_condition_deletes_everything() -> None:
    kept, deleted = delete_rows(accounts(), None)
    assert (kept.num_rows, deleted) == (0, 4)
    assert kept.schema == SCHEMA


def test_delete_nothing_matching() -> None:
    kept, deleted = delete_rows(accounts(), parse_predicate("id > 100").bind(SCHEMA))
    assert (kept.num_rows, deleted) == (4, 0)


# ---------------------------------------------------------------------------------------------- update


def test_update_sets_values_on_matching_rows_and_keeps_schema() -> None:
    data = accounts()
    out, updated = update_rows(
        data,
        {"balance": parse_expression("balance - 5").bind(SCHEMA), "name": parse_expression("upper(name)").bind(SCHEMA)},
        parse_predicate("id <= 2").bind(SCHEMA),
    )
    assert updated == 2
    assert out.schema == SCHEMA
    assert out.schema.metadata == SCHEMA.metadata
    assert out.column("balance").to_pylist() == [Decimal("5.00"), Decimal("15.50"), Decimal("0.00"), None]
    assert out.column("name").to_pylist() == ["ANN", "BOB", None, "dan"]


def test_update_without_condition_updates_all_rows() -> None:
    out, updated = update_rows(accounts(), {"n": parse_expression("42").bind(SCHEMA)}, None)
    assert updated == 4
    assert out.column("n").to_pylist() == [42] * 4
    assert out.schema == SCHEMA


def test_update_null_condition_does_not_update() -> None:
    out, updated = update_rows(
        accounts(), {"n": parse_expression("-1").bind(SCHEMA)}, parse_predicate("n > 0").bind(SCHEMA)
    )
    assert updated == 2
    assert out.column("n").to_pylist() == [-1, None, -1, 0]


def test_update_no_match_returns_input() -> None:
    data = accounts()
    out, updated = update_rows(data, {"n": parse_expression("0").bind(SCHEMA)}, parse_predicate("id > 9").bind(SCHEMA))
    assert updated == 0
    assert out is data


def test_update_evaluates_expressions_only_on_matching_rows() -> None:
    out, updated = update_rows(
        accounts(), {"n": parse_expression("100 DIV n").bind(SCHEMA)}, parse_predicate("n != 0").bind(SCHEMA)
    )
    assert updated == 2
    assert out.column("n").to_pylist() == [100, None, 33, 0]


def test_update_casts_to_column_type_and_rounds_decimals_half_up() -> None:
    out, _ = update_rows(
        accounts(),
        {"balance": parse_expression("balance * 1.005").bind(SCHEMA), "id": parse_expression("id + 10L").bind(SCHEMA)},
        parse_predicate("id = 2").bind(SCHEMA),
    )
    assert out.column("balance").to_pylist()[1] == Decimal("20.60")  # 20.6025 -> 20.60
    assert out.column("id").to_pylist() == [1, 12, 3, 4]
    assert out.schema == SCHEMA


@pytest.mark.parametrize(
    ("column", "sql"),
    [
        ("id", "2147483648"),  # out of int32 range
        ("id", "NULL"),  # NOT NULL column
        ("n", "1.5"),  # fractional value into an integer column
        ("n", "'abc'"),
        ("balance", "123456789012.0"),  # too many digits for decimal(10,2)
    ],
)
def test_lossy_or_invalid_update_raises_schema_mismatch(column: str, sql: str) -> None:
    with pytest.raises(SchemaMismatchError) as info:
        update_rows(accounts(), {column: parse_expression(sql).bind(SCHEMA)}, None, table="bank.accounts")
    assert info.value.columns == (column,)
    assert info.value.table == "bank.accounts"


def test_update_unknown_column_raises_schema_mismatch_and_keys_are_case_insensitive() -> None:
    with pytest.raises(SchemaMismatchError) as info:
        update_rows(accounts(), {"nope": parse_expression("1").bind(SCHEMA)}, None)
    assert info.value.columns == ("nope",)
    out, _ = update_rows(accounts(), {"NAME": parse_expression("'x'").bind(SCHEMA)}, None)
    assert out.column("name").to_pylist() == ["x"] * 4


def test_update_on_chunked_table() -> None:
    data = pa.concat_tables([accounts().slice(0, 2), accounts().slice(2)])
    out, updated = update_rows(
        data, {"n": parse_expression("id * 10").bind(SCHEMA)}, parse_predicate("id % 2 = 1").bind(SCHEMA)
    )
    assert updated == 2
    assert out.column("n").to_pylist() == [10, None, 30, 0]


def test_conform_column_accepts_widening_and_rejects_narrowing() -> None:
    field = pa.field("x", pa.int16())
    assert conform_column(pa.array([1, 2], pa.int64()), field).type == pa.int16()
    with pytest.raises(SchemaMismatchError):
        conform_column(pa.array([70000], pa.int64()), field)


# ----------------------------------------------------------------------------------------------- merge

TARGET = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string()), pa.field("qty", pa.int32())])


def target_files() -> list[pa.Table]:
    return [
        pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"], "qty": [1, 2, 3]}, schema=TARGET),
        pa.table({"id": [4, 5], "v": ["d", "e"], "qty": [4, 5]}, schema=TARGET),
        pa.table({"id": [6], "v": ["f"], "qty": [6]}, schema=TARGET),
    ]


def source(**columns: list[object]) -> pa.Table:
    return pa.table(columns)


def test_upsert_with_star_reports_per_file_outcomes() -> None:
    src = pa.table(
        {"id": pa.array([2, 5, 9], pa.int32()), "v": ["B", "E", "I"], "qty": pa.array([20, 50, 90], pa.int64())}
    )
    result = merge_rows(
        target_files(), src, on="t.id = s.id", matched_update="*", matched_delete=None, not_matched_insert="*"
    )
    assert isinstance(result, MergeResult)
    assert (result.num_updated, result.num_deleted, result.num_inserted) == (1 + 1, 0, 1)
    first, second, third = result.files
    assert first is not None and second is not None and third is None
    assert first.to_pylist()[1] == {"id": 2, "v": "B", "qty": 20}
    assert second.column("v").to_pylist() == ["d", "E"]
    assert first.schema == TARGET and second.schema == TARGET
    assert result.changed_files == (0, 1)
    assert result.inserted.to_pylist() == [{"id": 9, "v": "I", "qty": 90}]
    assert result.inserted.schema == TARGET
    assert result.touched.to_pylist() == [False, True, False, False, True, False]
    assert result.matched.to_pylist() == [False, True, False, False, True, False]
    assert result.num_copied == 3
    assert result.target.column("id").to_pylist() == [1, 2, 3, 4, 5, 6]


def test_matched_delete_and_conditional_update_and_insert_condition() -> None:
    src = source(id=[1, 2, 4, 7, 8], op=["del", "upd", "keep", "ins", "skip"], amount=[0, 5, 0, 70, 80])
    result = merge_rows(
        target_files(),
        src,
        on="t.id = s.id",
        matched_update={"qty": "t.qty + s.amount", "t.v": "concat(t.v, '!')"},
        matched_update_condition="s.op = 'upd'",
        matched_delete="s.op = 'del'",
        not_matched_insert={"id": "s.id", "qty": "amount"},
        not_matched_insert_condition="s.op = 'ins'",
    )
    assert (result.num_updated, result.num_deleted, result.num_inserted) == (1, 1, 1)
    first = result.files[0]
    assert first is not None
    assert first.to_pylist() == [{"id": 2, "v": "b!", "qty": 7}, {"id": 3, "v": "c", "qty": 3}]
    assert result.files[1] is None  # id 4 matched but no clause applied
    assert result.matched.to_pylist()[3] is True
    assert result.touched.to_pylist()[3] is False
    assert result.inserted.to_pylist() == [{"id": 7, "v": None, "qty": 70}]


def test_conditional_clauses_run_before_the_unconditional_one() -> None:
    src = source(id=[1, 2], gone=[True, False])
    result = merge_rows(target_files(), src, on="t.id = s.id", matched_update={"v": "'x'"}, matched_delete="s.gone")
    first = result.files[0]
    assert first is not None
    assert first.to_pylist() == [{"id": 2, "v": "x", "qty": 2}, {"id": 3, "v": "c", "qty": 3}]
    result = merge_rows(
        target_files(),
        src,
        on="t.id = s.id",
        matched_update={"v": "'x'"},
        matched_update_condition="s.gone = false",
        matched_delete=True,
    )
    first = result.files[0]
    assert first is not None
    assert first.column("v").to_pylist() == ["x", "c"]


def test_cardinality_violation_raises_with_row_count() -> None:
    src = source(id=[1, 1, 2, 2, 3], v=["x", "y", "z", "w", "u"])
    with pytest.raises(MergeCardinalityError) as info:
        merge_rows(target_files(), src, on="t.id = s.id", matched_update={"v": "s.v"}, table_name="db.t")
    assert info.value.rows == 2
    assert info.value.table == "db.t"
    assert isinstance(info.value, TxlakeError)
    assert isinstance(info.value, ValueError)
    with pytest.raises(MergeCardinalityError):
        merge_rows(target_files(), src, on="t.id = s.id", matched_delete="s.v = 'x'")


def test_unconditional_delete_tolerates_multiple_matches() -> None:
    src = source(id=[1, 1, 6])
    result = merge_rows(target_files(), src, on="t.id = s.id", matched_delete=True)
    assert result.num_deleted == 2
    assert result.files[0] is not None and result.files[0].column("id").to_pylist() == [2, 3]
    assert result.files[2] is not None and result.files[2].num_rows == 0
    assert result.files[1] is None


def test_insert_only_merge_ignores_duplicates_in_matches() -> None:
    src = source(id=[1, 1, 10, 11], v=["x", "y", "z", "w"], qty=[0, 0, 0, 0])
    result = merge_rows(target_files(), src, on="t.id = s.id", not_matched_insert="*")
    assert result.files == (None, None, None)
    assert result.inserted.column("id").to_pylist() == [10, 11]


def test_extra_on_conjuncts_are_evaluated_after_the_join() -> None:
    src = source(id=[1, 2, 3], v=["x", "y", "z"], flag=[True, False, True])
    result = merge_rows(
        target_files(),
        src,
        on="t.id = s.id AND s.flag AND t.qty < 3",
        matched_update={"v": "s.v"},
        not_matched_insert={"id": "s.id + 100", "v": "s.v"},
    )
    first = result.files[0]
    assert first is not None
    assert first.column("v").to_pylist() == ["x", "b", "c"]
    assert sorted(result.inserted.column("id").to_pylist()) == [102, 103]


def test_non_equi_condition_uses_nested_loop_join() -> None:
    src = source(lo=[4], hi=[5])
    result = merge_rows(target_files(), src, on="t.id BETWEEN s.lo AND s.hi", matched_update={"qty": "0"})
    assert result.num_updated == 2
    assert result.files[1] is not None and result.files[1].column("qty").to_pylist() == [0, 0]


def test_composite_and_reversed_keys_with_mixed_types_and_null_keys() -> None:
    tgt = [pa.table({"a": pa.array([1, 1, None], pa.int32()), "b": ["x", "y", "z"], "c": [0, 0, 0]})]
    src = pa.table({"b": ["y", "z", "x"], "a": pa.array([1, None, 2], pa.int64()), "c": [5, 6, 7]})
    result = merge_rows(tgt, src, on="s.b = t.b AND t.a = s.a", matched_update="*", not_matched_insert="*")
    assert result.num_updated == 1
    assert result.files[0] is not None and result.files[0].column("c").to_pylist() == [0, 5, 0]
    assert result.inserted.to_pylist() == [{"a": None, "b": "z", "c": 6}, {"a": 2, "b": "x", "c": 7}]


def test_unqualified_names_resolve_when_unambiguous() -> None:
    src = source(key=[3], delta=[10])
    result = merge_rows(target_files(), src, on="id = key", matched_update={"qty": "qty + delta"})
    assert result.files[0] is not None and result.files[0].column("qty").to_pylist() == [1, 2, 13]
    with pytest.raises(PredicateError):
        merge_rows(target_files(), source(id=[3], qty=[1]), on="t.id = s.id", matched_update={"qty": "qty + 1"})


def test_custom_aliases_and_case_insensitive_star() -> None:
    src = pa.table({"ID": [6], "V": ["F"], "QTY": [60], "extra": [1]})
    result = merge_rows(
        target_files(), src, on="tgt.id = src.id", matched_update="*", target_alias="tgt", source_alias="src"
    )
    assert result.files[2] is not None and result.files[2].to_pylist() == [{"id": 6, "v": "F", "qty": 60}]


def test_star_requires_every_target_column_in_source() -> None:
    with pytest.raises(SchemaMismatchError) as info:
        merge_rows(target_files(), source(id=[1], v=["x"]), on="t.id = s.id", not_matched_insert="*")
    assert info.value.columns == ("qty",)


def test_insert_into_not_null_column_without_value_fails() -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])
    with pytest.raises(SchemaMismatchError) as info:
        merge_rows([], source(v=["x"]), on="t.v = s.v", not_matched_insert={"v": "s.v"}, schema=schema)
    assert info.value.columns == ("id",)


def test_empty_target_needs_schema_and_inserts_everything() -> None:
    src = source(id=[1, 2], v=["a", "b"], qty=[1, 2])
    with pytest.raises(ValueError):
        merge_rows([], src, on="t.id = s.id", not_matched_insert="*")
    result = merge_rows([], src, on="t.id = s.id", not_matched_insert="*", schema=TARGET)
    assert result.files == ()
    assert result.inserted.schema == TARGET
    assert result.inserted.num_rows == 2
    assert result.target.num_rows == 0


def test_single_table_target_is_one_file() -> None:
    result = merge_rows(target_files()[1], source(id=[4]), on="t.id = s.id", matched_delete=True)
    assert len(result.files) == 1
    assert result.files[0] is not None and result.files[0].column("id").to_pylist() == [5]


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"matched_update": {"v": "'x'"}, "matched_delete": True},
        {"matched_update_condition": "s.id > 0", "not_matched_insert": "*"},
    ],
)
def test_invalid_clause_combinations_are_value_errors(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        merge_rows(target_files(), source(id=[1], v=["x"], qty=[1]), on="t.id = s.id", **kwargs)  # type: ignore[arg-type]


def test_bad_merge_sql_raises_predicate_error() -> None:
    src = source(id=[1])
    with pytest.raises(PredicateError):
        merge_rows(target_files(), src, on="t.id = s.nope", matched_delete=True)
    with pytest.raises(PredicateError):
        merge_rows(target_files(), src, on="t.id = s.id AND", matched_delete=True)
    with pytest.raises(PredicateError):
        merge_rows(target_files(), src, on="t.v = s.id", matched_delete=True)
    with pytest.raises(SchemaMismatchError):
        merge_rows(target_files(), src, on="t.id = s.id", matched_update={"nope": "1"})
    with pytest.raises(PredicateError):
        merge_rows(target_files(), src, on="t.id = s.id", not_matched_insert={"id": "t.id"})


def test_update_cast_failure_in_merge_is_schema_mismatch() -> None:
    with pytest.raises(SchemaMismatchError) as info:
        merge_rows(target_files(), source(id=[1]), on="t.id = s.id", matched_update={"qty": "'many'"}, table_name="x")
    assert info.value.columns == ("qty",)


def test_merge_and_update_replace_some_rows_of_nested_columns(tmp_path: object) -> None:
    """Arrow has no replace_with_mask kernel for structs, lists and maps: a MERGE upsert with ``*`` (and an
    UPDATE) changing some rows of a table with nested columns replaces exactly those rows."""
    import txlake

    nested = pa.schema(
        [
            ("k", pa.int64()),
            ("s", pa.struct([("a", pa.int64()), ("b", pa.string())])),
            ("l", pa.list_(pa.int64())),
            ("m", pa.map_(pa.string(), pa.int64())),
            ("s2", pa.struct([("a", pa.int64()), ("b", pa.string())])),
        ]
    )

    def rows(ks: list[int], tag: str) -> pa.Table:
        return pa.table(
            {
                "k": ks,
                "s": [{"a": k, "b": f"{tag}{k}"} for k in ks],
                "l": [[k] * k for k in ks],
                "m": [[(tag, k)] for k in ks],
                "s2": [{"a": -k, "b": "two"} for k in ks],
            },
            schema=nested,
        )

    lake = txlake.connect(f"file://{tmp_path}")
    lake.create_table("a.t", nested)
    lake.run(lambda tx: tx.append("a.t", rows([1, 2, 3], "old")))
    upsert = {"when_matched_update": "*", "when_not_matched_insert": "*"}
    lake.run(lambda tx: tx.merge("a.t", rows([2, 4], "new"), "t.k = s.k", **upsert))
    lake.run(lambda tx: tx.update("a.t", {"s": "s2"}, "k = 3"))
    got = {r["k"]: r for r in lake.read_arrow("a.t").to_pylist()}
    assert sorted(got) == [1, 2, 3, 4]
    assert got[1]["s"] == {"a": 1, "b": "old1"} and got[1]["l"] == [1] and got[1]["m"] == [("old", 1)]
    assert got[2]["s"] == {"a": 2, "b": "new2"} and got[2]["l"] == [2, 2] and got[2]["m"] == [("new", 2)]
    assert got[3]["s"] == {"a": -3, "b": "two"} and got[3]["l"] == [3, 3, 3]
    assert got[4]["s"] == {"a": 4, "b": "new4"}
