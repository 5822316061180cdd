"""A process of its own for the lazy-registration test (``test_spark_transactions.py``): a session on which
nothing registered the ``txlake`` data source yet (Spark lets only one session of a context register a Python
data source under a name, so the suites' shared session cannot show this).

Prints one JSON document (the last stdout line): whether ``spark.read.format("txlake")`` found the data source
after ``connect`` and after the first data source read, and what the reads returned.
"""

from __future__ import annotations

import json
import sys
import threading

from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]
from pyspark.errors import PySparkException

import txlake
from txlake.spark import register_source
from txlake.spark.session import local_session


def _found(load: object) -> bool:
    try:
        load()  # type: ignore[operator]
    except (PySparkException, Py4JJavaError) as exc:
        if "DATA_SOURCE_NOT_FOUND" in str(exc):
            return False
        raise
    return True


def main(lake_dir: str) -> None:
    spark, _ = local_session("txlake-registration")
    lake = txlake.connect(lake_dir, spark=spark, spark_reader="python", spark_writer="native")
    lake.create_table("s.t", "id long, owner string")
    with lake.transaction() as tx:
        tx.append("s.t", spark.createDataFrame([(1, "a"), (2, "b")], "id long, owner string"))  # Spark's writer
    direct = spark.read.format("txlake").option("lake", lake.uri).option("table", "s.t")
    after_connect = _found(direct.load)
    rows = sorted(tuple(r) for r in lake.snapshot().read("s.t").collect())  # the data source reader
    after_read = _found(direct.load)
    threads = [threading.Thread(target=register_source, args=(spark,)) for _ in range(4)]  # again: no error
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    direct_rows = sorted(tuple(r) for r in direct.load().collect())
    expected = sorted(tuple(r.values()) for r in lake.read_arrow("s.t").to_pylist())
    spark.stop()
    doc = {"after_connect": after_connect, "after_read": after_read, "rows": rows, "direct": direct_rows}
    print(json.dumps(doc | {"expected": expected}, default=list))


if __name__ == "__main__":
    main(sys.argv[1])
