"""txlake.maintenance (see DESIGN §10)."""
