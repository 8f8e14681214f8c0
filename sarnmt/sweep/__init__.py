"""The table sweeps: specs (``specs/``), plans, jobs and their records, launchers, and the tables rendered from the
records (``sarnmt reproduce``, ``sarnmt tables``)."""
