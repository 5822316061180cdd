"""txlake.spark (see DESIGN §10)."""
