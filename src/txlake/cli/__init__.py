"""The ``txlake`` command line."""
