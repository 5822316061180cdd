"""txlake.expr (see DESIGN §10)."""
