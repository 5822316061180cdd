"""txlake.txn (see DESIGN §10)."""
