"""Spark SQL DDL column lists as schemas: ``create_table("s.t", "id long, v string")``."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

import txlake
from txlake.ddl import DdlError, parse_ddl_schema, parse_ddl_type, spark_type_name
from txlake.delta.schema import schema_from_json, schema_to_json
from txlake.errors import InvalidArgumentError, TxlakeError


def test_every_spark_type() -> None:
    schema = parse_ddl_schema(
        "a long, b BIGINT NOT NULL, c int, d integer, e short, f smallint, g byte, h tinyint, i string, "
        "j boolean, k double, l float, m date, n timestamp, o timestamp_ntz, p decimal(10,2), q binary, "
        "r array<int>, s map<string, array<double>>, t struct<x: int, `y z`: string NOT NULL>, u decimal, "
        "v varchar(20), w char(3)"
    )
    assert [(f.name, f.type, f.nullable) for f in schema][:2] == [("a", pa.int64(), True), ("b", pa.int64(), False)]
    types = {f.name: f.type for f in schema}
    assert types["c"] == types["d"] == pa.int32() and types["e"] == types["f"] == pa.int16()
    assert types["g"] == types["h"] == pa.int8() and types["k"] == pa.float64() and types["l"] == pa.float32()
    assert types["m"] == pa.date32() and types["n"] == pa.timestamp("us", tz="UTC")
    assert types["o"] == pa.timestamp("us") and types["p"] == pa.decimal128(10, 2)
    assert types["u"] == pa.decimal128(10, 0) and types["q"] == pa.binary()
    assert types["i"] == types["v"] == types["w"] == pa.string() and types["j"] == pa.bool_()
    assert spark_type_name(types["r"]) == "array<int>"
    assert spark_type_name(types["s"]) == "map<string,array<double>>"
    assert spark_type_name(types["t"]) == "struct<x:int,y z:string>"
    assert not types["t"].field("y z").nullable


def test_the_schema_is_a_delta_schema() -> None:
    """What the parser returns round-trips through the Delta schema JSON (the table's metadata)."""
    schema = parse_ddl_schema("id long NOT NULL, v string COMMENT 'the value', tags array<string>")
    assert schema_from_json(schema_to_json(schema)) == schema
    fields = json.loads(schema_to_json(schema))["fields"]
    assert fields[1]["metadata"] == {"comment": "the value"}


def test_struct_form_and_single_types() -> None:
    assert parse_ddl_schema("struct<a:int,b:string>").names == ["a", "b"]
    assert parse_ddl_type("array<decimal(38, 0)>") == pa.list_(pa.field("element", pa.decimal128(38, 0)))


@pytest.mark.parametrize(
    ("ddl", "reason", "caret"),
    [
        ("id lnog", "unknown type 'lnog'; did you mean long?", 3),
        ("id long,", "expected a column name, found the end", 8),
        ("id long v string", "unexpected 'v': columns are separated by commas", 8),
        ("id array<int", "expected '>' to close array<...> at the end", 12),
        ("id decimal(40,2)", "decimal(40,2) needs 1 <= precision <= 38", 3),
        ("id map<int>", "expected ',' between the key and value types of map<K,V>, found '>'", 10),
    ],
)
def test_errors_name_spark_types_and_point_at_the_problem(ddl: str, reason: str, caret: int) -> None:
    with pytest.raises(DdlError) as err:
        parse_ddl_schema(ddl)
    first, line, marker = str(err.value).splitlines()
    assert reason in first
    assert (line, marker) == (f"  {ddl}", "  " + " " * caret + "^")
    assert isinstance(err.value, InvalidArgumentError) and isinstance(err.value, ValueError)
    assert err.value.argument == "schema" and err.value.position == caret


@pytest.mark.parametrize("ddl", ["", "   ", "id long, ID int"])
def test_empty_and_duplicate(ddl: str) -> None:
    with pytest.raises(TxlakeError) as err:
        parse_ddl_schema(ddl)
    assert isinstance(err.value, ValueError)


def test_unknown_types_list_the_spark_types() -> None:
    with pytest.raises(DdlError, match=r"Spark SQL types: long, bigint, int, .*struct<name:T,...>"):
        parse_ddl_schema("id number")


def test_create_table_takes_a_ddl_string(tmp_path: Path) -> None:
    lake = txlake.connect(f"file://{tmp_path}")
    lake.create_table("s.t", "id long NOT NULL, v string")
    assert lake.snapshot().schema("s.t") == pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string())])


def test_a_dotted_column_name_in_a_column_list_says_what_to_do() -> None:
    with pytest.raises(DdlError, match="a field inside a struct cannot be added here") as info:
        parse_ddl_schema("`s`.c bigint")
    assert "^" in str(info.value)
