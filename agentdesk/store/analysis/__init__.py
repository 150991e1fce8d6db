"""Pure analyses of a run's spans: the critical path, run-to-run alignment (no Qt, no database)."""
