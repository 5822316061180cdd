"""A pessimistic client in its own process, for tests/txn/test_pessimistic.py.

``python pessimistic_worker.py increment URI OPTIONS_JSON N`` runs N pessimistic increments of row 1 of
``bank.a`` and ``bank.b`` (retries=0: any abort fails the process) and prints ``done``.
``python pessimistic_worker.py hold URI OPTIONS_JSON`` updates ``bank.a`` pessimistically (placing its intent
marker), prints ``holding <txid>`` and sleeps until killed.
"""

from __future__ import annotations

import json
import sys
import time

import txlake


def main(argv: list[str]) -> int:
    mode, uri, options = argv[0], argv[1], json.loads(argv[2])
    # the holder is killed: a short lease lets the queue move on soon; the incrementers keep a roomier one (a
    # heartbeat late by a third of a lease on a loaded machine loses it: LeaseLostError, and retries=0 fails)
    lake = txlake.connect(uri, options, lease_seconds=1.0 if mode == "hold" else 10.0)
    if mode == "increment":
        for _ in range(int(argv[3])):

            def fn(tx: txlake.Transaction) -> None:
                tx.update("bank.a", set={"balance": "balance + 1"}, where="id = 1")
                tx.update("bank.b", set={"balance": "balance + 1"}, where="id = 1")

            lake.run(fn, concurrency="pessimistic", retries=0, redo=False)
        print("done", flush=True)
        return 0
    tx = lake.transaction(concurrency="pessimistic")
    tx.update("bank.a", set={"balance": "balance + 1000"}, where="id = 1")
    print("holding", tx.txid, flush=True)
    time.sleep(600)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
