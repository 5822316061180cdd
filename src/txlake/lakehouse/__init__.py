"""txlake.lakehouse (see DESIGN §10)."""
