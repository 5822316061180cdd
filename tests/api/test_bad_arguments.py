"""Every bad argument to the public API raises a ``TxlakeError`` that is still the builtin it always was.

The README promises one error root: ``except txlake.TxlakeError`` catches whatever txlake raises on purpose,
and ``except ValueError`` / ``except TypeError`` keep working for bad arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import txlake
from txlake import TxlakeError
from txlake.errors import InvalidArgumentError, InvalidArgumentTypeError, StorageError

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])
ROWS = pa.table({"id": [1], "v": ["a"]}, schema=SCHEMA)


@pytest.fixture
def lake(tmp_path: Path) -> txlake.Lakehouse:
    lake = txlake.connect(tmp_path.as_uri())
    lake.create_table("s.parted", SCHEMA, partition_by=["v"])
    lake.create_table("s.plain", SCHEMA)
    return lake


Call = Callable[[txlake.Lakehouse], Any]


CASES: list[Any] = [
    # txlake.connect
    pytest.param(
        lambda lake: txlake.connect("relative/path"),
        ValueError,
        id="connect-relative-path",
    ),
    pytest.param(
        lambda lake: txlake.connect("ftp://host/x"),
        ValueError,
        id="connect-unknown-scheme",
    ),
    pytest.param(
        lambda lake: txlake.connect("s3://ab/x"),
        ValueError,
        id="connect-short-bucket",
    ),
    pytest.param(
        lambda lake: txlake.connect(lake.uri, {"nosuch": "1"}),
        ValueError,
        id="connect-unknown-option",
    ),
    pytest.param(
        lambda lake: txlake.connect(42),
        TypeError,
        id="connect-uri-not-a-string",  # type: ignore[arg-type]
    ),
    pytest.param(
        lambda lake: txlake.connect("s3://bucket/x", {"aws_region": 5}),
        TypeError,
        id="connect-option-type",
    ),
    pytest.param(
        lambda lake: txlake.connect("s3://bucket/x", 5),  # type: ignore[arg-type]
        TypeError,
        id="connect-options-not-a-mapping",
    ),
    pytest.param(
        lambda lake: txlake.connect("s3://bucket/x", {"aws_endpoint_url": "localhost:8333"}),
        ValueError,
        id="connect-endpoint-without-scheme",
    ),
    pytest.param(
        lambda lake: txlake.connect("s3://bucket/x", {"aws_endpoint_url": ""}),
        ValueError,
        id="connect-endpoint-empty",
    ),
    pytest.param(
        lambda lake: txlake.connect(lake.uri + "/" + "x" * 300),
        ValueError,
        id="connect-name-too-long",
    ),
    pytest.param(
        lambda lake: txlake.connect(lake.uri + "/_txlake/log/00000000000000000000.json/lake"),
        ValueError,
        id="connect-below-a-file",
    ),
    # Lakehouse: catalog
    pytest.param(
        lambda lake: lake.create_table("nodots", SCHEMA),
        ValueError,
        id="create-table-no-namespace",
    ),
    pytest.param(
        lambda lake: lake.create_table("s.bad name", SCHEMA),
        ValueError,
        id="create-table-bad-name",
    ),
    pytest.param(
        lambda lake: lake.create_table("s.x", 42),
        TypeError,
        id="create-table-schema-type",
    ),
    pytest.param(
        lambda lake: lake.create_table(5, SCHEMA),  # type: ignore[arg-type]
        TypeError,
        id="create-table-name-type",
    ),
    pytest.param(
        lambda lake: lake.drop_table(None),  # type: ignore[arg-type]
        TypeError,
        id="drop-table-name-type",
    ),
    pytest.param(
        lambda lake: lake.rename_table("s.plain", 7),  # type: ignore[arg-type]
        TypeError,
        id="rename-table-new-name-type",
    ),
    pytest.param(
        lambda lake: lake.create_namespace(["s"]),  # type: ignore[arg-type]
        TypeError,
        id="create-namespace-name-type",
    ),
    pytest.param(
        lambda lake: lake.create_table("s.y", "id lnog"),
        ValueError,
        id="create-table-bad-ddl",
    ),
    pytest.param(
        lambda lake: lake.create_table("s.z", SCHEMA, partition_by=["nope"]),
        ValueError,
        id="create-table-partition-column",
    ),
    pytest.param(
        lambda lake: lake.create_namespace("bad name"),
        ValueError,
        id="create-namespace-bad-name",
    ),
    pytest.param(
        lambda lake: lake.drop_namespace("s"),
        ValueError,
        id="drop-namespace-not-empty",
    ),
    pytest.param(
        lambda lake: lake.rename_table("s.plain", "nodots"),
        ValueError,
        id="rename-table-no-namespace",
    ),
    # Lakehouse: transactions and reads
    pytest.param(
        lambda lake: lake.transaction(isolation="repeatable_read"),
        ValueError,  # type: ignore[arg-type]
        id="transaction-isolation",
    ),
    pytest.param(
        lambda lake: lake.run(lambda tx: None, isolation="nope"),
        ValueError,  # type: ignore[arg-type]
        id="run-isolation",
    ),
    pytest.param(lambda lake: lake.snapshot(-1), LookupError, id="snapshot-negative-version"),
    pytest.param(
        lambda lake: lake.snapshot("x"),
        TypeError,
        id="snapshot-version-type",  # type: ignore[arg-type]
    ),
    pytest.param(
        lambda lake: lake.read_arrow("s.plain", where=42),
        TypeError,  # type: ignore[arg-type]
        id="read-where-type",
    ),
    pytest.param(lambda lake: lake.read_arrow("s.plain", where="id +"), ValueError, id="read-where-syntax"),
    pytest.param(lambda lake: lake.read_arrow("s.plain", where="nope = 1"), ValueError, id="read-where-column"),
    pytest.param(
        lambda lake: lake.read_arrow("s.plain", columns=["nope"]),
        ValueError,
        id="read-unknown-column",
    ),
    pytest.param(lambda lake: lake.read_arrow("nodots"), LookupError, id="read-unknown-table"),
    pytest.param(
        lambda lake: lake.read_arrow(5),  # type: ignore[arg-type]
        TypeError,
        id="read-table-name-type",
    ),
    pytest.param(
        lambda lake: lake.read_arrow("s.plain", columns="id"),
        TypeError,
        id="read-columns-a-string",
    ),
    # LakehouseSnapshot
    pytest.param(lambda lake: lake.snapshot().schema("s.nope"), LookupError, id="snapshot-schema-unknown-table"),
    pytest.param(lambda lake: lake.snapshot().read("s.plain"), RuntimeError, id="snapshot-read-without-spark"),
    pytest.param(lambda lake: lake.snapshot().read_arrow("s.plain", where=""), ValueError, id="snapshot-empty-where"),
    # Transaction
    pytest.param(
        lambda lake: lake.transaction().create_table(5, SCHEMA),  # type: ignore[arg-type]
        TypeError,
        id="tx-create-table-name-type",
    ),
    pytest.param(
        lambda lake: lake.transaction().append(5, pa.table({"x": [1]})),  # type: ignore[arg-type]
        TypeError,
        id="tx-append-name-type",
    ),
    pytest.param(
        lambda lake: lake.transaction().drop_table(None),  # type: ignore[arg-type]
        TypeError,
        id="tx-drop-table-name-type",
    ),
    pytest.param(
        lambda lake: lake.transaction().create_table("nodots", SCHEMA),
        ValueError,
        id="tx-create-table-no-namespace",
    ),
    pytest.param(
        lambda lake: lake.transaction().append("s.plain", "rows"),
        TypeError,
        id="tx-append-type",
    ),
    pytest.param(
        lambda lake: lake.transaction().append("s.plain", pa.table({"x": [1]})), ValueError, id="tx-append-schema"
    ),
    pytest.param(
        lambda lake: lake.transaction().overwrite("s.plain", [1, 2]),
        TypeError,
        id="tx-overwrite-type",
    ),
    pytest.param(
        lambda lake: lake.transaction().update("s.plain", set={}),
        ValueError,
        id="tx-update-empty-set",
    ),
    pytest.param(
        lambda lake: lake.transaction().update("s.plain", set={"v": 1}),
        TypeError,  # type: ignore[dict-item]
        id="tx-update-set-type",
    ),
    pytest.param(
        lambda lake: lake.transaction().update("s.plain", set={"v": "'a'"}, engine="bogus"),  # type: ignore[arg-type]
        ValueError,
        id="tx-update-engine",
    ),
    pytest.param(
        lambda lake: lake.transaction().update("s.parted", set={"v": "'a'"}),
        ValueError,
        id="tx-update-partition-column",
    ),
    pytest.param(
        lambda lake: lake.transaction().update("s.plain", set={"nope": "1"}), ValueError, id="tx-update-unknown-column"
    ),
    pytest.param(
        lambda lake: lake.transaction().delete("s.plain", where=1),
        TypeError,  # type: ignore[arg-type]
        id="tx-delete-where-type",
    ),
    pytest.param(
        lambda lake: lake.transaction().delete("s.plain", engine="bogus"),
        ValueError,  # type: ignore[arg-type]
        id="tx-delete-engine",
    ),
    pytest.param(
        lambda lake: lake.transaction().merge("s.plain", ROWS, on="t.id = s.id"),
        ValueError,
        id="tx-merge-no-clause",
    ),
    pytest.param(
        lambda lake: lake.transaction().merge("s.plain", "rows", on="t.id = s.id", when_matched_update="*"),
        TypeError,
        id="tx-merge-source-type",
    ),
    pytest.param(
        lambda lake: lake.transaction().merge(
            "s.plain", ROWS, on="t.id = t.id", when_matched_update="*", target_alias="t", source_alias="t"
        ),
        ValueError,
        id="tx-merge-same-aliases",
    ),
    pytest.param(
        lambda lake: lake.transaction().merge("s.plain", ROWS, on="t.id = s.id", when_matched_update=5),  # type: ignore[arg-type]
        TypeError,
        id="tx-merge-column-map-type",
    ),
    pytest.param(
        lambda lake: lake.transaction().merge("s.plain", ROWS, on="t.id = ", when_matched_update="*"),
        ValueError,
        id="tx-merge-on-syntax",
    ),
    # found by the adversarial review of the first hour
    pytest.param(lambda lake: lake.tables(5), TypeError, id="tables-namespace-type"),
    pytest.param(lambda lake: lake.transaction().tables(5), TypeError, id="tx-tables-namespace-type"),
    pytest.param(lambda lake: lake.transaction().table_exists(5), TypeError, id="tx-table-exists-type"),
    pytest.param(lambda lake: lake.transaction().update("s.plain", set="v = 'x'"), TypeError, id="tx-update-set-str"),
    pytest.param(lambda lake: txlake.connect(lake.uri, spark=5), TypeError, id="connect-spark-type"),
    pytest.param(
        lambda lake: lake.create_table("s.u", pa.schema([("x", pa.uint64())])), TypeError, id="create-table-uint64"
    ),
    pytest.param(lambda lake: lake.run(5), TypeError, id="run-not-callable"),
    pytest.param(lambda lake: lake.run(lambda tx: None, retries=-1), ValueError, id="run-negative-retries"),
    pytest.param(
        lambda lake: lake.create_table("s.p", SCHEMA, properties={"a": 1}), TypeError, id="create-table-property-int"
    ),
    pytest.param(lambda lake: lake.create_table("s.q", SCHEMA, description=5), TypeError, id="create-table-desc"),
    pytest.param(lambda lake: lake.create_table("s.e", pa.schema([])), ValueError, id="create-table-no-columns"),
    pytest.param(lambda lake: txlake.connect(lake.uri, lease_seconds="30"), TypeError, id="connect-lease-type"),
    pytest.param(lambda lake: txlake.connect(lake.uri, lease_seconds=-1), ValueError, id="connect-lease-negative"),
    pytest.param(lambda lake: txlake.connect(lake.uri, checkpoint_interval=1.5), TypeError, id="connect-interval"),
    pytest.param(lambda lake: txlake.connect(lake.uri, spark_reader="x"), ValueError, id="connect-spark-reader"),
    pytest.param(lambda lake: txlake.connect(lake.uri, spark_writer="x"), ValueError, id="connect-spark-writer"),
    pytest.param(lambda lake: txlake.connect(lake.uri, create="no"), TypeError, id="connect-create-type"),
    pytest.param(
        lambda lake: txlake.connect("s3://bucket/a//b", {"aws_endpoint_url": "http://127.0.0.1:1"}),
        ValueError,
        id="connect-s3-empty-segment",
    ),
]


@pytest.mark.parametrize(("call", "builtin"), CASES)
def test_bad_arguments_raise_txlake_errors(lake: txlake.Lakehouse, call: Call, builtin: type[Exception]) -> None:
    with pytest.raises(TxlakeError) as err:
        call(lake)
    assert isinstance(err.value, builtin), f"{type(err.value).__name__} is no longer a {builtin.__name__}"


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        pytest.param(lambda lake: lake.create_table(5, SCHEMA), "name", id="create-table"),
        pytest.param(lambda lake: lake.rename_table("s.plain", 7), "new_name", id="rename-table"),
        pytest.param(lambda lake: lake.read_arrow("s.plain", columns="id"), "columns", id="columns"),
        pytest.param(lambda lake: txlake.connect("s3://bucket/x", {"aws_region": 5}), "storage_options", id="region"),
        pytest.param(
            lambda lake: txlake.connect("s3://bucket/x", {"aws_endpoint_url": "localhost:8333"}),
            "storage_options",
            id="endpoint",
        ),
    ],
)
def test_argument_errors_name_the_argument(lake: txlake.Lakehouse, call: Call, argument: str) -> None:
    with pytest.raises((InvalidArgumentError, InvalidArgumentTypeError)) as err:
        call(lake)
    assert err.value.argument == argument  # type: ignore[union-attr]


def test_a_local_directory_txlake_cannot_create_is_a_storage_error(tmp_path: Path) -> None:
    """Not a bare ``OSError``: a :class:`StorageError` naming the path and why (exit 7 on the command line)."""
    with pytest.raises(StorageError) as err:
        txlake.connect("/proc/txlake-nope")
    assert not isinstance(err.value, OSError) and err.value.path == "/proc/txlake-nope"
    assert "/proc" in str(err.value) and "virtual file system" in str(err.value)


def test_the_argument_errors_are_both_txlake_and_builtin_errors() -> None:
    assert issubclass(InvalidArgumentError, TxlakeError) and issubclass(InvalidArgumentError, ValueError)
    assert issubclass(InvalidArgumentTypeError, TxlakeError) and issubclass(InvalidArgumentTypeError, TypeError)
    err = InvalidArgumentError("isolation must be one of ...", argument="isolation")
    assert err.argument == "isolation"
