"""Deletion vectors on Spark: both readers drop the rows a DV deletes; Spark writes to a DV table rewrite the files
with a DV without the rows it deletes (copy-on-write), and remove them by ``(path, DV)``.

Spark's Parquet reader cannot apply a DV, so files with one are always read by the ``txlake`` data source
(which filters them as the Arrow path does), whatever the configured reader.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

import txlake
from tests.interop.deltars import rows
from tests.spark.helpers import df_rows
from tests.txn.conftest import ACCOUNTS, accounts, delete_with_deletion_vector
from txlake.delta.actions import Remove


def test_both_readers_drop_deleted_rows_and_spark_writes_rewrite_dv_files(
    lake: txlake.Lakehouse, spark: SparkSession
) -> None:
    lake.create_table("p.t", ACCOUNTS)
    with lake.transaction() as tx:
        tx.append("p.t", accounts(list(range(10)), list(range(10))))
    delete_with_deletion_vector(lake, "p.t", [0, 2, 5])
    lake.sync()
    (original,) = lake.snapshot().delta_snapshot("p.t").files.values()
    arrow = rows(lake.read_arrow("p.t"))
    assert arrow == rows(accounts([1, 3, 4, 6, 7, 8, 9], [1, 3, 4, 6, 7, 8, 9]))
    assert df_rows(lake.snapshot().read("p.t")) == arrow
    assert df_rows(lake.snapshot().read("p.t", where="id < 4")) == rows(accounts([1, 3], [1, 3]))
    with lake.transaction() as tx:
        assert df_rows(tx.read("p.t", columns=["id"])) == rows(lake.read_arrow("p.t", columns=["id"]))
        tx.append("p.t", spark.createDataFrame([(20, 20)], "id long, balance long"))
        assert tx.delete("p.t", where="id = 1", engine="spark") == 1
        assert tx.update("p.t", set={"balance": "balance * 10"}, where="id = 3", engine="spark") == 1
    want = rows(accounts([3, 4, 6, 7, 8, 9, 20], [30, 4, 6, 7, 8, 9, 20]))
    assert rows(lake.read_arrow("p.t")) == df_rows(lake.snapshot().read("p.t")) == want
    log = lake.delta_log("p.t")
    latest = log.latest_version()
    assert latest is not None
    (gone,) = [a for a in log.read_commit(latest) if isinstance(a, Remove)]
    assert (gone.path, gone.deletion_vector) == (original.path, original.deletion_vector)
