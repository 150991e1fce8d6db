"""The run-to-run diff window: pick two runs, one merged waterfall, totals, differing context."""
