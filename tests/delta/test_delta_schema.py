"""Delta schema JSON <-> Arrow, and the lossless-only rules that enforce a table schema on write."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pytest

from txlake.delta import conform, schema_from_json, schema_to_json
from txlake.delta.schema import arrow_type_to_delta, delta_type_to_arrow, normalize_schema, spark_type_name
from txlake.errors import SchemaMismatchError, UnsupportedFeatureError
from txlake.variant import is_variant

PRIMITIVES: list[tuple[str, pa.DataType]] = [
    ("long", pa.int64()),
    ("integer", pa.int32()),
    ("short", pa.int16()),
    ("byte", pa.int8()),
    ("float", pa.float32()),
    ("double", pa.float64()),
    ("boolean", pa.bool_()),
    ("string", pa.string()),
    ("binary", pa.binary()),
    ("date", pa.date32()),
    ("timestamp", pa.timestamp("us", tz="UTC")),
    ("timestamp_ntz", pa.timestamp("us")),
    ("decimal(10,2)", pa.decimal128(10, 2)),
    ("decimal(38,0)", pa.decimal128(38, 0)),
]


@pytest.mark.parametrize(("delta", "arrow"), PRIMITIVES, ids=[d for d, _ in PRIMITIVES])
def test_primitive_types_map_both_ways(delta: str, arrow: pa.DataType) -> None:
    assert delta_type_to_arrow(delta) == arrow
    assert arrow_type_to_delta(arrow) == delta


def _struct(*fields: dict[str, Any]) -> dict[str, Any]:
    return {"type": "struct", "fields": list(fields)}


def _field(name: str, dtype: Any, nullable: bool = True, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": name, "type": dtype, "nullable": nullable, "metadata": metadata or {}}


NESTED = _struct(
    _field("id", "long", nullable=False),
    _field("point", _struct(_field("x", "double"), _field("y", "double", nullable=False))),
    _field("tags", {"type": "array", "elementType": "string", "containsNull": False}),
    _field("scores", {"type": "array", "elementType": "integer", "containsNull": True}),
    _field("attrs", {"type": "map", "keyType": "string", "valueType": "long", "valueContainsNull": True}),
    _field(
        "deep",
        {
            "type": "array",
            "elementType": _struct(
                _field("m", {"type": "map", "keyType": "integer", "valueType": "date", "valueContainsNull": False})
            ),
            "containsNull": True,
        },
    ),
    _field("c", "string", metadata={"comment": "hello", "delta.other": {"nested": [1, 2]}}),
)


def test_nested_schema_maps_to_arrow() -> None:
    schema = schema_from_json(json.dumps(NESTED))
    assert schema.field("id").type == pa.int64()
    assert not schema.field("id").nullable
    point = schema.field("point").type
    assert pa.types.is_struct(point)
    assert point.field("x").type == pa.float64()
    assert not point.field("y").nullable
    tags = schema.field("tags").type
    assert pa.types.is_list(tags)
    assert tags.value_type == pa.string()
    assert not tags.value_field.nullable
    assert schema.field("scores").type.value_field.nullable
    attrs = schema.field("attrs").type
    assert pa.types.is_map(attrs)
    assert (attrs.key_type, attrs.item_type) == (pa.string(), pa.int64())
    assert attrs.item_field.nullable
    inner = schema.field("deep").type.value_type.field("m").type
    assert (inner.key_type, inner.item_type) == (pa.int32(), pa.date32())
    assert not inner.item_field.nullable


def test_nested_schema_round_trips_exactly() -> None:
    schema = schema_from_json(json.dumps(NESTED))
    assert json.loads(schema_to_json(schema)) == NESTED
    assert schema_from_json(schema_to_json(schema)) == schema


def test_field_metadata_round_trips() -> None:
    schema = schema_from_json(json.dumps(NESTED))
    back = json.loads(schema_to_json(schema))
    (c,) = (f for f in back["fields"] if f["name"] == "c")
    assert c["metadata"] == {"comment": "hello", "delta.other": {"nested": [1, 2]}}


@pytest.mark.parametrize(
    ("arrow", "delta"),
    [
        (pa.large_string(), "string"),
        (pa.string_view(), "string"),
        (pa.large_binary(), "binary"),
        (pa.binary(16), "binary"),
        (pa.timestamp("ns", tz="Europe/Paris"), "timestamp"),
        (pa.timestamp("ms"), "timestamp_ntz"),
        (pa.large_list(pa.int64()), {"type": "array", "elementType": "long", "containsNull": True}),
    ],
    ids=str,
)
def test_other_arrow_types_map_to_the_nearest_delta_type(arrow: pa.DataType, delta: Any) -> None:
    assert arrow_type_to_delta(arrow) == delta


def test_normalize_schema_narrows_to_stored_types() -> None:
    schema = pa.schema([("s", pa.large_string()), ("t", pa.timestamp("ns"))])
    assert normalize_schema(schema) == pa.schema([("s", pa.string()), ("t", pa.timestamp("us"))])


@pytest.mark.parametrize(
    "arrow", [pa.uint8(), pa.uint64(), pa.float16(), pa.time64("us"), pa.duration("s"), pa.decimal256(40, 2)], ids=str
)
def test_arrow_types_without_delta_equivalent_raise_type_error(arrow: pa.DataType) -> None:
    with pytest.raises(TypeError):
        arrow_type_to_delta(arrow)


@pytest.mark.parametrize(("dtype", "feature"), [("interval", "type:interval"), ("geometry", "type:geometry")])
def test_unknown_delta_types_are_unsupported_features(dtype: str, feature: str) -> None:
    with pytest.raises(UnsupportedFeatureError) as info:
        schema_from_json(json.dumps(_struct(_field("v", dtype))))
    assert info.value.feature == feature


VARIANT_ARROW = pa.struct([pa.field("metadata", pa.binary(), False), pa.field("value", pa.binary(), False)])


def test_variants_read_as_deltars_structs_at_every_level_and_round_trip() -> None:
    """``variant`` is delta-rs's ``struct<metadata: binary not null, value: binary not null>``, also inside
    arrays, maps and structs; the schema JSON txlake writes back keeps it a ``variant``."""
    doc = _struct(
        _field("v", "variant"),
        _field("a", {"type": "array", "elementType": "variant", "containsNull": True}),
        _field("m", {"type": "map", "keyType": "string", "valueType": "variant", "valueContainsNull": True}),
        _field("s", _struct(_field("v", "variant"))),
    )
    schema = schema_from_json(json.dumps(doc))
    assert schema == pa.schema(
        [
            ("v", VARIANT_ARROW),
            ("a", pa.list_(VARIANT_ARROW)),
            ("m", pa.map_(pa.string(), VARIANT_ARROW)),
            ("s", pa.struct([("v", VARIANT_ARROW)])),
        ]
    )
    assert [is_variant(t) for t in (schema.field("v").type, VARIANT_ARROW)] == [True, False]
    assert json.loads(schema_to_json(schema))["fields"][0]["type"] == "variant"
    assert normalize_schema(schema) == schema
    assert json.loads(schema_to_json(normalize_schema(schema))) == json.loads(schema_to_json(schema))
    assert spark_type_name(schema.field("a").type) == "array<variant>"


def test_duplicate_column_names_are_rejected_case_insensitively() -> None:
    with pytest.raises(SchemaMismatchError) as info:
        schema_to_json(pa.schema([("Id", pa.int64()), ("id", pa.int32())]))
    assert info.value.columns == ("id",)


# ------------------------------------------------------------------------------------------------ conform

TABLE = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("score", pa.float64()),
        pa.field("name", pa.string()),
        pa.field("at", pa.timestamp("us", tz="UTC")),
    ]
)


@pytest.mark.parametrize(
    ("column", "array"),
    [
        ("id", pa.array([1, 2], pa.int32())),
        ("id", pa.array([1, 2], pa.int8())),
        ("score", pa.array([1.5, 2.5], pa.float32())),
        ("score", pa.array([1, 2], pa.int32())),
        ("name", pa.array(["a", "b"], pa.large_string())),
        ("at", pa.array([0, 1], pa.timestamp("ms", tz="UTC"))),
        ("at", pa.array([0, 1], pa.timestamp("us", tz="Asia/Tokyo"))),
        ("name", pa.nulls(2)),
    ],
    ids=lambda v: str(v.type) if isinstance(v, pa.Array) else v,
)
def test_lossless_widening_is_accepted(column: str, array: pa.Array) -> None:
    columns = {"id": pa.array([1, 2], pa.int64()), column: array}
    out = conform(pa.table(columns), TABLE)
    assert out.schema == TABLE
    assert out.column(column).to_pylist() == array.cast(TABLE.field(column).type).to_pylist()


@pytest.mark.parametrize(
    ("column", "array"),
    [
        ("id", pa.array([1, 2], pa.float64())),
        ("score", pa.array([1, 2], pa.int64())),
        ("score", pa.array(["1"], pa.string())),
        ("at", pa.array([0], pa.timestamp("us"))),
        ("at", pa.array([0], pa.timestamp("ns", tz="UTC"))),
        ("name", pa.array([1], pa.int64())),
    ],
    ids=lambda v: str(v.type) if isinstance(v, pa.Array) else v,
)
def test_lossy_casts_raise_schema_mismatch_naming_the_column(column: str, array: pa.Array) -> None:
    n = len(array)
    columns = {"id": pa.array(range(n), pa.int64()), column: array}
    with pytest.raises(SchemaMismatchError) as info:
        conform(pa.table(columns), TABLE, table="t")
    assert info.value.columns == (column,)
    assert info.value.table == "t"


def test_narrowing_int64_to_int32_is_refused() -> None:
    schema = pa.schema([("x", pa.int32())])
    with pytest.raises(SchemaMismatchError) as info:
        conform(pa.table({"x": pa.array([1], pa.int64())}), schema)
    assert info.value.columns == ("x",)


def test_float_to_int_is_refused() -> None:
    schema = pa.schema([("x", pa.int64())])
    with pytest.raises(SchemaMismatchError) as info:
        conform(pa.table({"x": pa.array([1.0], pa.float64())}), schema)
    assert info.value.columns == ("x",)


def test_timezone_mismatch_is_refused_both_ways() -> None:
    aware = pa.schema([("t", pa.timestamp("us", tz="UTC"))])
    naive = pa.schema([("t", pa.timestamp("us"))])
    with pytest.raises(SchemaMismatchError):
        conform(pa.table({"t": pa.array([datetime(2024, 1, 1)], pa.timestamp("us"))}), aware)
    with pytest.raises(SchemaMismatchError):
        conform(pa.table({"t": pa.array([datetime(2024, 1, 1, tzinfo=UTC)], pa.timestamp("us", tz="UTC"))}), naive)


def test_extra_columns_are_refused() -> None:
    data = pa.table({"id": [1], "bogus": [1], "other": ["x"]})
    with pytest.raises(SchemaMismatchError) as info:
        conform(data, TABLE)
    assert info.value.columns == ("bogus", "other")


def test_missing_non_nullable_column_is_refused() -> None:
    with pytest.raises(SchemaMismatchError) as info:
        conform(pa.table({"score": [1.0]}), TABLE)
    assert info.value.columns == ("id",)


def test_nulls_in_non_nullable_column_are_refused() -> None:
    with pytest.raises(SchemaMismatchError) as info:
        conform(pa.table({"id": pa.array([1, None], pa.int64())}), TABLE)
    assert info.value.columns == ("id",)


def test_missing_nullable_columns_become_nulls_in_table_order() -> None:
    out = conform(pa.table({"name": ["a", "b"], "id": pa.array([1, 2], pa.int32())}), TABLE)
    assert out.schema == TABLE
    assert out.to_pylist() == [
        {"id": 1, "score": None, "name": "a", "at": None},
        {"id": 2, "score": None, "name": "b", "at": None},
    ]


def test_schema_mismatch_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        conform(pa.table({"bogus": [1]}), TABLE)


NESTED_TABLE = pa.schema(
    [
        pa.field("s", pa.struct([pa.field("a", pa.int64()), pa.field("b", pa.string(), nullable=False)])),
        pa.field("l", pa.list_(pa.int64())),
        pa.field("m", pa.map_(pa.string(), pa.float64())),
    ]
)


def test_nested_types_widen_losslessly() -> None:
    data = pa.table(
        {
            "s": pa.array([{"b": "x", "a": 1}], pa.struct([pa.field("b", pa.large_string()), ("a", pa.int32())])),
            "l": pa.array([[1, 2]], pa.large_list(pa.int32())),
            "m": pa.array([[("k", 1.5)]], pa.map_(pa.string(), pa.float32())),
        }
    )
    out = conform(data, NESTED_TABLE)
    assert out.schema == NESTED_TABLE
    assert out.to_pylist() == [{"s": {"a": 1, "b": "x"}, "l": [1, 2], "m": [("k", 1.5)]}]


@pytest.mark.parametrize(
    "array",
    [
        pa.array([{"a": 1, "b": "x"}], pa.struct([("a", pa.float64()), ("b", pa.string())])),
        pa.array([{"a": 1, "b": "x", "z": 1}], pa.struct([("a", pa.int64()), ("b", pa.string()), ("z", pa.int8())])),
        pa.array([{"a": 1}], pa.struct([("a", pa.int64())])),
        pa.array([{"a": 1, "b": None}], pa.struct([("a", pa.int64()), ("b", pa.string())])),
    ],
    ids=["lossy-child", "extra-child", "missing-required-child", "null-in-required-child"],
)
def test_bad_struct_values_raise_schema_mismatch(array: pa.Array) -> None:
    with pytest.raises(SchemaMismatchError) as info:
        conform(pa.table({"s": array}), NESTED_TABLE)
    assert info.value.columns == ("s",)


def test_lossy_list_element_is_refused() -> None:
    with pytest.raises(SchemaMismatchError) as info:
        conform(pa.table({"l": pa.array([[1.5]], pa.list_(pa.float64()))}), NESTED_TABLE)
    assert info.value.columns == ("l",)


def test_schema_errors_name_the_types_as_spark_sql_does() -> None:
    """Users of Spark (and Delta schemas) say ``bigint``, ``decimal(10,2)``, ``array<string>``, not Arrow's names."""
    schema = pa.schema([("x", pa.int32()), ("d", pa.decimal128(10, 2)), ("tags", pa.list_(pa.int32()))])
    cases = [
        ({"x": pa.array([1], pa.int64())}, ("bigint", "int")),
        ({"d": pa.array([1.5])}, ("double", "decimal(10,2)")),
        ({"tags": pa.array([["a"]])}, ("array<string>", "array<int>")),
    ]
    for columns, names in cases:
        with pytest.raises(SchemaMismatchError) as info:
            conform(pa.table(columns), schema)
        message = str(info.value)
        assert all(name in message for name in names), message
        assert not any(arrow in message for arrow in ("int64", "int32", "decimal128", "list<")), message
