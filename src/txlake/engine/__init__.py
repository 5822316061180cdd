"""txlake.engine (see DESIGN §10)."""
