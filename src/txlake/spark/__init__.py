"""txlake on PySpark (DESIGN §8): the ``txlake`` Python data source and the engine behind ``tx.read``/``append``.

Importing this package needs ``pyspark``; the rest of txlake never imports it (``txlake.connect(..., spark=)``
loads it on demand).
"""

from txlake.spark.engine import SparkEngine, register_source
from txlake.spark.source import TxlakeDataSource

__all__ = ["SparkEngine", "TxlakeDataSource", "register_source"]
