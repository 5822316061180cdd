"""A child process for the resume tests: stages three statements on three tables in a resumable transaction,
prints its txid, and waits to be SIGKILLed (``python -m tests.txn.resume_worker <uri> <options-json>``)."""

from __future__ import annotations

import json
import sys
import time

import pyarrow as pa

import txlake


def main() -> None:
    uri, options = sys.argv[1], json.loads(sys.argv[2])
    lake = txlake.connect(uri, options, lease_seconds=1.0)
    tx = lake.transaction(resumable=True)
    tx.append("bank.accounts", pa.table({"id": [10, 11], "balance": [5, 6]}))
    tx.update("bank.audit", set={"balance": "balance + 1"}, where="id = 1")
    tx.append("bank.journal", pa.table({"id": [100], "balance": [-1]}))
    print(tx.txid, flush=True)
    while True:
        time.sleep(60)


if __name__ == "__main__":
    main()
