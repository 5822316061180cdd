"""pyspark is optional: txlake imports and the Arrow API works in a process where pyspark cannot be imported."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import txlake

SCRIPT = textwrap.dedent(
    """
    import sys
    sys.modules["pyspark"] = None  # every import of pyspark (or a submodule) now raises ImportError
    import pyarrow as pa
    import txlake
    from txlake.txn.engine import NoDataEngineError

    lake = txlake.connect(sys.argv[1])
    assert lake.engine is None
    lake.create_table("a.t", pa.schema([("id", pa.int64())]))
    with lake.transaction() as tx:
        tx.append("a.t", pa.table({"id": [1, 2, 3]}))
        assert tx.read_arrow("a.t", where="id > 1").num_rows == 2
        try:
            tx.read("a.t")
        except NoDataEngineError:
            pass
        else:
            raise AssertionError("tx.read without Spark must fail")
        try:
            tx.append("a.t", [1, 2])
        except TypeError:
            pass
        else:
            raise AssertionError("a list is not a dataset")
    assert lake.read_arrow("a.t").num_rows == 3
    try:
        lake.snapshot().read("a.t")
    except NoDataEngineError:
        pass
    else:
        raise AssertionError("snapshot().read without Spark must fail")
    try:
        txlake.connect(sys.argv[1], spark=object())
    except ImportError:
        pass
    else:
        raise AssertionError("spark= needs pyspark")
    loaded = sorted(m for m in sys.modules if m.startswith("pyspark.") or m.startswith("txlake.spark"))
    assert loaded == [], loaded
    print("ok")
    """
)


def test_arrow_api_without_pyspark(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, (tmp_path / "lake").as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_only_the_spark_package_imports_pyspark() -> None:
    root = Path(txlake.__file__).parent
    offenders = []
    for path in root.rglob("*.py"):
        # txlake.spark is the Spark layer; the Spark benchmark (a top-level tool) imports pyspark lazily
        if path.relative_to(root).parts[0] in {"spark", "bench"}:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if any(n == "pyspark" or n.startswith("pyspark.") for n in names):
                offenders.append(str(path.relative_to(root)))
    assert offenders == []
